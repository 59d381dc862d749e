"use strict";

// `npm run pack:local [-- --pack-destination DIR]`: writes, from the current build, the two
// tarballs that an install on this machine takes from the registry: the main package, with
// the optionalDependencies that `napi pre-publish` gives it on release, and this platform's
// package holding the `.node` file. DIR defaults to dist/.

const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");
const { binaryName, platformSuffix } = require("./platform.js");

const root = path.join(__dirname, "..");

function fail(message)
{
    console.error(`pack:local: ${message}`);
    process.exit(1);
}

function destination()
{
    const i = process.argv.indexOf("--pack-destination");
    if (i < 0)
    {
        return path.join(root, "dist");
    }
    if (!process.argv[i + 1])
    {
        fail("--pack-destination needs a directory");
    }
    return path.resolve(process.argv[i + 1]);
}

// Runs npm with --json and returns what it printed, parsed. Under `npm run`, the npm that
// runs this script runs the packing too.
function npm(args, cwd)
{
    const cli = process.env.npm_execpath;
    const [cmd, argv] = cli && /\.c?js$/.test(cli) ? [process.execPath, [cli, ...args]] : ["npm", args];
    const r = spawnSync(cmd, [...argv, "--json"], { cwd, encoding: "utf8", shell: cmd === "npm" && process.platform === "win32" });
    if (r.error || r.status !== 0)
    {
        fail(`npm ${args.join(" ")} in ${cwd} failed: ${r.error ? r.error.message : `${r.stderr}${r.stdout}`}`);
    }
    return JSON.parse(r.stdout);
}

// The platform packages that `napi create-npm-dirs` wrote from package.json's napi.targets.
function platformPackages(version)
{
    const dir = path.join(root, "npm");
    return fs.readdirSync(dir).sort().map(suffix =>
        {
            const manifest = JSON.parse(fs.readFileSync(path.join(dir, suffix, "package.json"), "utf8"));
            if (manifest.version !== version)
            {
                fail(`npm/${suffix} is version ${manifest.version}, the main package ${version}: run \`napi version\``);
            }
            return { suffix, dir: path.join(dir, suffix), manifest };
        });
}

function packFrom(stage, dest)
{
    const [packed] = npm(["pack", "--ignore-scripts", "--pack-destination", dest], stage);
    return path.join(dest, packed.filename);
}

const rootManifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
const suffix = platformSuffix();
const binary = path.join(root, binaryName());
if (!fs.existsSync(binary))
{
    fail(`${binary} is missing: run \`npm run build\` first`);
}
const packages = platformPackages(rootManifest.version);
const host = packages.find(p => p.suffix === suffix);
if (!host)
{
    fail(`npm/ has no package for ${suffix}: it is not one of package.json's napi.targets`);
}

const dest = destination();
fs.mkdirSync(dest, { recursive: true });
const stages = fs.mkdtempSync(path.join(os.tmpdir(), "dynamodb-lock-native-pack-"));
try
{
    // This platform's package: its manifest and README from npm/, and the build.
    const platformStage = path.join(stages, suffix);
    fs.mkdirSync(platformStage);
    for (const f of fs.readdirSync(host.dir))
    {
        fs.copyFileSync(path.join(host.dir, f), path.join(platformStage, f));
    }
    fs.copyFileSync(binary, path.join(platformStage, host.manifest.main));

    // The main package: the files that `npm pack` would take, with the platform packages as
    // optional dependencies of the same version.
    const mainStage = path.join(stages, "main");
    const [listing] = npm(["pack", "--dry-run", "--ignore-scripts"], root);
    for (const { path: file } of listing.files)
    {
        fs.mkdirSync(path.dirname(path.join(mainStage, file)), { recursive: true });
        fs.copyFileSync(path.join(root, file), path.join(mainStage, file));
    }
    const optionalDependencies = Object.fromEntries(packages.map(p => [p.manifest.name, rootManifest.version]));
    fs.writeFileSync(path.join(mainStage, "package.json"),
        JSON.stringify(Object.assign({}, rootManifest, { optionalDependencies }), null, 2) + "\n");

    console.log(packFrom(mainStage, dest));
    console.log(packFrom(platformStage, dest));
}
finally
{
    fs.rmSync(stages, { recursive: true, force: true });
}
