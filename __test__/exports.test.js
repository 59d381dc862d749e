"use strict";

// The runtime exports against the declarations: every value the module exports, named or on
// the default export, through `require` and `import`, is declared in index.d.ts, and every
// declared value exists at runtime.

const { it } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const path = require("path");
const { pathToFileURL } = require("url");
const { spawnSync } = require("child_process");
const ts = require("typescript");

const root = path.join(__dirname, "..");
const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc");
const sorted = names => [...new Set(names)].sort();

// What index.d.ts declares: the module's value exports, and the properties of the default
// export's type.
function declared()
{
    const file = path.join(root, "index.d.ts");
    const program = ts.createProgram([file], { strict: true, noEmit: true, module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16, types: ["node"] });
    const checker = program.getTypeChecker();
    const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(file));
    const values = checker.getExportsOfModule(moduleSymbol)
        .filter(s => ((s.flags & ts.SymbolFlags.Alias) ? checker.getAliasedSymbol(s) : s).flags & ts.SymbolFlags.Value);
    const def = values.find(s => s.name === "default");
    const defType = checker.getTypeOfSymbolAtLocation(def, def.valueDeclaration || def.declarations[0]);
    return {
        named: sorted(values.map(s => s.name)),
        default: sorted(checker.getPropertiesOfType(defType).map(p => p.name)),
    };
}

async function runtime()
{
    const cjs = require("..");
    const esm = await import(pathToFileURL(path.join(root, "index.mjs")).href);
    return {
        cjsNamed: sorted([...Object.keys(cjs), ...("default" in cjs ? ["default"] : [])]),
        cjsDefault: sorted(Object.keys(cjs.default)),
        esmNamed: sorted(Object.keys(esm)),
        esmDefault: sorted(Object.keys(esm.default)),
    };
}

it("declares exactly the values the module exports, named and on the default export, for require and import", async () =>
    {
        const d = declared();
        const r = await runtime();
        assert.ok(d.named.includes("createTable") && d.default.includes("createTable"), JSON.stringify(d));
        assert.deepEqual(r.cjsNamed, d.named, "require(): named exports");
        assert.deepEqual(r.esmNamed, d.named, "import: named exports");
        assert.deepEqual(r.cjsDefault, d.default, "require().default");
        assert.deepEqual(r.esmDefault, d.default, "import default");
    }
);

it("a file that touches every runtime export, through every import form, compiles under strict", { timeout: 120000 }, async () =>
    {
        const r = await runtime();
        const named = r.esmNamed.filter(n => n !== "default");
        const touch = (prefix, names) => names.map(n => `void ${prefix}${n};`).join("\n");
        const dir = fs.mkdtempSync(path.join(__dirname, "types", "tmp-"));
        try
        {
            fs.writeFileSync(path.join(dir, "cjs.ts"),
                "import DynamoDBLockClient from \"dynamodb-lock-native\";\n"
                + "import * as ns from \"dynamodb-lock-native\";\n"
                + `import { ${named.join(", ")} } from "dynamodb-lock-native";\n`
                + "import required = require(\"dynamodb-lock-native\");\n"
                + touch("DynamoDBLockClient.", r.cjsDefault) + "\n"
                + touch("ns.", named) + "\n"
                + touch("required.", r.cjsNamed) + "\n"
                + touch("required.default.", r.cjsDefault) + "\n"
                + touch("", named) + "\n");
            fs.writeFileSync(path.join(dir, "esm.mts"),
                "import DynamoDBLockClient from \"dynamodb-lock-native\";\n"
                + `import { ${named.join(", ")} } from "dynamodb-lock-native";\n`
                + touch("DynamoDBLockClient.", r.esmDefault) + "\n"
                + touch("", named) + "\n");
            fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ extends: "../tsconfig.json", files: ["cjs.ts", "esm.mts"] }));
            const out = spawnSync(process.execPath, [tsc, "-p", path.join(dir, "tsconfig.json")], { encoding: "utf8" });
            assert.equal(out.status, 0, out.stdout + out.stderr);
        }
        finally
        {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
);

it("the defaults index.d.ts and the README state for retryCount and Fifo's waitMs are the native core's", () =>
    {
        const defaults = require("../binding.js").defaults();
        const dts = fs.readFileSync(path.join(root, "index.d.ts"), "utf8");
        const readme = fs.readFileSync(path.join(root, "README.md"), "utf8");
        // The number after "Default:" in the doc comment just above a declaration of `name`.
        const documented = name =>
        {
            const m = dts.match(new RegExp(`Default: (\\d+)\\. \\*/\\s*\\n\\s*${name}\\?:`));
            assert.ok(m, `index.d.ts documents a default for ${name}`);
            return Number(m[1]);
        };
        assert.equal(documented("retryCount"), defaults.retryCount);
        assert.equal(documented("waitMs"), defaults.fifoWaitMs);
        assert.ok(readme.includes(`\`retryCount\`: _Number_ _(Default: ${defaults.retryCount})_`), "README: retryCount");
        assert.ok(readme.includes(`\`waitMs\` per acquisition (default ${defaults.fifoWaitMs})`), "README: waitMs");
    }
);
