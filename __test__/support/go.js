"use strict";

// A worker's start on cue: it says it is ready, waits for a line on stdin (the parent's "go",
// so that every worker starts together), then runs `main`, exiting 0 when it resolves and 1,
// with a "Crash" line, when it rejects.
function runOnGo(main, say)
{
    say({ ready: true });
    let go = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", chunk =>
        {
            if (go === null)
            {
                return;
            }
            go += chunk;
            if (go.includes("\n"))
            {
                go = null;
                process.stdin.pause();
                main().then(
                    () => process.exit(0),
                    e =>
                    {
                        say({ error: "Crash", message: e && e.stack });
                        process.exit(1);
                    });
            }
        });
}

module.exports = { runOnGo };
