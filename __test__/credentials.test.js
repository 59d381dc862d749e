"use strict";

// Credentials as the AWS SDKs resolve them, with a plain `dynamodb` options object: keys in
// the environment, a container credentials endpoint, a web identity token, a profile
// with `credential_process`, SSO profiles with a cached login (both the `sso_session` and the
// older `sso_start_url` forms), static keys in a profile, and what a failure says (a process
// that exits 1, an SSO login missing or expired, a profile the files do not have, no region).
// Each case runs in a child process whose HOME and AWS config files are temporary, so the
// real ~/.aws is never read; the access key id each request was signed with is read from its
// Authorization header by a proxy in front of the engine, and the SSO portal is a loopback
// server reached through AWS_ENDPOINT_URL_SSO (STS through AWS_ENDPOINT_URL_STS).

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("crypto");
const fs = require("fs");
const http = require("http");
const os = require("os");
const path = require("path");
const { spawn } = require("child_process");
const { selectedEngines, startEngine } = require("./engines.js");
const { startProxy } = require("./support/proxy.js");

const TABLE = "credential_locks";
const ROLE = "LockRole";
const ACCOUNT = "123456789012";
const START_URL = "https://sso.invalid/start";
const SESSION = "lock-sso";

// Variables that would let credentials or a region come from this process's environment.
const CLEARED = [
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_SSO", "AWS_ENDPOINT_URL_STS", "AWS_ROLE_SESSION_NAME", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
];

// The child's outcomes, one per JSON line; the last is returned, all are in `outcomes`.
function runChild(env, job)
{
    const childEnv = Object.assign({}, process.env);
    for (const k of CLEARED)
    {
        delete childEnv[k];
    }
    Object.assign(childEnv, { AWS_EC2_METADATA_DISABLED: "true", AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE: "1" }, env);
    return new Promise((resolve, reject) =>
    {
        const child = spawn(process.execPath, [path.join(__dirname, "support", "credentials-child.js"), JSON.stringify(job)],
            { env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        let err = "";
        child.stdout.on("data", d => (out += d));
        child.stderr.on("data", d => (err += d));
        const killer = setTimeout(() => child.kill("SIGKILL"), 60000);
        child.on("exit", code =>
        {
            clearTimeout(killer);
            try
            {
                const outcomes = out.trim().split("\n").map(l => JSON.parse(l));
                const last = outcomes[outcomes.length - 1];
                Object.defineProperty(last, "outcomes", { value: outcomes });
                resolve(last);
            }
            catch (_)
            {
                reject(new Error(`the child printed no outcome (exit ${code}): ${out} ${err}`));
            }
        });
    });
}

// A loopback SSO portal answering GetRoleCredentials for one bearer token.
async function ssoPortal(token, accessKeyId)
{
    const calls = [];
    const server = http.createServer((req, res) =>
    {
        const url = new URL(req.url, "http://127.0.0.1");
        calls.push({ path: url.pathname, role: url.searchParams.get("role_name"), account: url.searchParams.get("account_id"),
            token: req.headers["x-amz-sso_bearer_token"] });
        res.setHeader("content-type", "application/json");
        if (req.headers["x-amz-sso_bearer_token"] !== token)
        {
            res.statusCode = 401;
            res.setHeader("x-amzn-errortype", "UnauthorizedException");
            return res.end(JSON.stringify({ message: "Session token not found or invalid" }));
        }
        res.end(JSON.stringify({ roleCredentials: {
            accessKeyId, secretAccessKey: "sso-secret", sessionToken: "sso-session-token", expiration: Date.now() + 3600000,
        } }));
    });
    await new Promise(resolve => server.listen(0, "127.0.0.1", resolve));
    return { endpoint: `http://127.0.0.1:${server.address().port}`, calls, close: () => new Promise(r => server.close(r)) };
}

// A loopback server answering every request with `answer(req, body)` ({ status, type, body }).
async function fakeService(answer)
{
    const calls = [];
    const server = http.createServer((req, res) =>
    {
        let body = "";
        req.on("data", d => (body += d));
        req.on("end", () =>
        {
            calls.push({ method: req.method, url: req.url, headers: req.headers, body });
            const a = answer(req, body);
            res.statusCode = a.status || 200;
            res.setHeader("content-type", a.type);
            res.end(a.body);
        });
    });
    await new Promise(resolve => server.listen(0, "127.0.0.1", resolve));
    return { endpoint: `http://127.0.0.1:${server.address().port}`, calls, close: () => new Promise(r => server.close(r)) };
}

const engineName = selectedEngines()[0];

describe(`credentials from the AWS environment (${engineName})`, () =>
{
    let engine;
    let proxy;
    let home;
    const seen = [];
    const regions = [];
    let ids = 0;

    // A fresh HOME with these config and credentials files; returns the child's environment.
    function profileHome(config, credentials = "")
    {
        const dir = fs.mkdtempSync(path.join(home, "home-"));
        fs.mkdirSync(path.join(dir, ".aws"));
        fs.writeFileSync(path.join(dir, ".aws", "config"), config);
        fs.writeFileSync(path.join(dir, ".aws", "credentials"), credentials);
        return {
            dir,
            env: {
                HOME: dir,
                USERPROFILE: dir,
                AWS_CONFIG_FILE: path.join(dir, ".aws", "config"),
                AWS_SHARED_CREDENTIALS_FILE: path.join(dir, ".aws", "credentials"),
            },
        };
    }

    function cacheSsoLogin(dir, identifier, token, expiresAt)
    {
        const cache = path.join(dir, ".aws", "sso", "cache");
        fs.mkdirSync(cache, { recursive: true });
        const file = path.join(cache, `${crypto.createHash("sha1").update(identifier).digest("hex")}.json`);
        fs.writeFileSync(file, JSON.stringify({ accessToken: token, expiresAt: expiresAt.toISOString().replace(/\.\d+Z$/, "Z"),
            region: "us-east-1", startUrl: START_URL }));
        return file;
    }

    // Acquires and releases a lock in a child; returns its outcome and the key ids signed with.
    async function acquire(env, job = {})
    {
        const from = seen.length;
        const outcome = await runChild(env, Object.assign({ client: "options", endpoint: proxy.endpoint, lockTable: TABLE,
            id: `cred-${process.pid}-${ids++}` }, job));
        return { outcome, keys: [...new Set(seen.slice(from))], regions: [...new Set(regions.slice(from))] };
    }

    before(async () =>
    {
        home = fs.mkdtempSync(path.join(os.tmpdir(), "lock-credentials-"));
        engine = await startEngine(engineName);
        await engine.createTable(TABLE, { partitionKey: "id" });
        proxy = await startProxy({ target: engine.endpoint });
        proxy.onRequest = (op, body, info) =>
        {
            const m = /Credential=([^/]+)\//.exec(info.headers.authorization || "");
            seen.push(m ? m[1] : null);
            const r = /Credential=[^/]+\/\d+\/([^/]*)\//.exec(info.headers.authorization || "");
            regions.push(r ? r[1] : null);
        };
    });

    after(async () =>
    {
        if (proxy)
        {
            await proxy.close();
        }
        if (engine)
        {
            await engine.stop();
        }
        fs.rmSync(home, { recursive: true, force: true });
    });

    it("keys in the environment sign, ahead of the profile", async () =>
    {
        const { env } = profileHome("[default]\nregion = us-east-1\n",
            "[default]\naws_access_key_id = AKIDPROFILEDEFAULT\naws_secret_access_key = s\n");
        const { outcome, keys } = await acquire(Object.assign(env, { AWS_ACCESS_KEY_ID: "AKIDFROMENV", AWS_SECRET_ACCESS_KEY: "env-secret" }));
        assert.deepEqual(outcome, { ok: true });
        assert.deepEqual(keys, ["AKIDFROMENV"]);
    });

    it("a container credentials endpoint (ECS) signs with what it serves", async () =>
    {
        const ecs = await fakeService(() => ({ type: "application/json", body: JSON.stringify({
            AccessKeyId: "AKIDFROMECS", SecretAccessKey: "ecs-secret", Token: "ecs-token",
            Expiration: new Date(Date.now() + 3600000).toISOString() }) }));
        try
        {
            const { env } = profileHome("");
            const { outcome, keys } = await acquire(Object.assign(env, { AWS_CONTAINER_CREDENTIALS_FULL_URI: `${ecs.endpoint}/v2/credentials` }),
                { region: "us-east-1" });
            assert.deepEqual(outcome, { ok: true });
            assert.deepEqual(keys, ["AKIDFROMECS"]);
            assert.equal(ecs.calls[0].url, "/v2/credentials");
        }
        finally
        {
            await ecs.close();
        }
    });

    it("a web identity token is exchanged with STS for the role's credentials", async () =>
    {
        const sts = await fakeService(() => ({ type: "text/xml", body: `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>AKIDFROMSTS</AccessKeyId><SecretAccessKey>sts-secret</SecretAccessKey>
<SessionToken>sts-token</SessionToken><Expiration>${new Date(Date.now() + 3600000).toISOString()}</Expiration></Credentials>
</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>` }));
        try
        {
            const { dir, env } = profileHome("");
            const token = path.join(dir, "token");
            fs.writeFileSync(token, "the-web-identity-token");
            const { outcome, keys } = await acquire(Object.assign(env, { AWS_WEB_IDENTITY_TOKEN_FILE: token,
                AWS_ROLE_ARN: `arn:aws:iam::${ACCOUNT}:role/${ROLE}`, AWS_ENDPOINT_URL_STS: sts.endpoint }), { region: "us-east-1" });
            assert.deepEqual(outcome, { ok: true });
            assert.deepEqual(keys, ["AKIDFROMSTS"]);
            assert.match(sts.calls[0].body, /Action=AssumeRoleWithWebIdentity/);
            assert.match(sts.calls[0].body, /WebIdentityToken=the-web-identity-token/);
        }
        finally
        {
            await sts.close();
        }
    });

    it("a profile with static keys signs with them", async () =>
    {
        const { env } = profileHome("[profile keys]\nregion = us-east-1\n",
            "[keys]\naws_access_key_id = AKIDPROFILEKEYS\naws_secret_access_key = profile-secret\n");
        const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "keys" }));
        assert.deepEqual(outcome, { ok: true });
        assert.deepEqual(keys, ["AKIDPROFILEKEYS"]);
    });

    it("a credential_process profile runs the process and signs with what it prints", async () =>
    {
        const { dir, env } = profileHome("");
        const script = path.join(dir, "creds.js");
        const ran = path.join(dir, "ran");
        fs.writeFileSync(script, `require("fs").appendFileSync(${JSON.stringify(ran)}, "x");
console.log(JSON.stringify({ Version: 1, AccessKeyId: "AKIDFROMPROCESS", SecretAccessKey: "process-secret",
    SessionToken: "process-token", Expiration: new Date(Date.now() + 3600000).toISOString() }));\n`);
        fs.writeFileSync(env.AWS_CONFIG_FILE,
            `[profile proc]\nregion = us-east-1\ncredential_process = "${process.execPath}" "${script}"\n`);
        const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "proc" }));
        assert.deepEqual(outcome, { ok: true });
        assert.deepEqual(keys, ["AKIDFROMPROCESS"]);
        assert.ok(fs.readFileSync(ran, "utf8").length >= 1, "the process ran");
    });

    it("a credential_process that exits 1 is named with its profile, exit status and stderr", async () =>
    {
        const { dir, env } = profileHome("");
        const script = path.join(dir, "fail.js");
        fs.writeFileSync(script, "process.stderr.write('the vault is sealed\\n'); process.exit(1);\n");
        fs.writeFileSync(env.AWS_CONFIG_FILE,
            `[profile broken]\nregion = us-east-1\ncredential_process = "${process.execPath}" "${script}"\n`);
        const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "broken" }));
        assert.equal(outcome.ok, false);
        assert.equal(outcome.code, "CredentialsError");
        assert.match(outcome.message, /credential_process of the AWS profile "broken" failed/);
        assert.match(outcome.message, /exit status: 1/);
        assert.match(outcome.message, /the vault is sealed/);
        assert.doesNotMatch(outcome.message, /already taken/);
        assert.deepEqual(keys, [], "nothing was sent unsigned");
    });

    it("a credential_process that never answers: a CredentialsError that says so by the request timeouts, one process started, and the client closes and the process exits at once", async () =>
    {
        const { dir, env } = profileHome("");
        const script = path.join(dir, "hang.js");
        const started = path.join(dir, "started");
        fs.writeFileSync(script, `require("fs").appendFileSync(${JSON.stringify(started)}, process.pid + "\\n");
setTimeout(() => {}, 60000);\n`);
        fs.writeFileSync(env.AWS_CONFIG_FILE,
            `[profile hung]\nregion = us-east-1\ncredential_process = "${process.execPath}" "${script}"\n`);
        const t0 = performance.now();
        try
        {
            const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "hung" }), { requestTimeoutMs: 300, close: true });
            const exitedInMs = performance.now() - t0;
            const [failed, closed] = outcome.outcomes;
            assert.equal(failed.ok, false);
            assert.equal(failed.code, "CredentialsError", JSON.stringify(failed));
            assert.match(failed.message, /credentials source did not answer within the request's timeout/);
            assert.match(failed.message, /nothing was sent to DynamoDB/);
            assert.deepEqual(keys, [], "nothing was sent");
            // Nothing of the client waits for the credentials once the acquisition is over.
            assert.ok(closed.closedInMs < 1000, `close() took ${closed.closedInMs} ms`);
            assert.ok(exitedInMs < 15000, `the process ended ${exitedInMs} ms after its start`);
            const pids = fs.readFileSync(started, "utf8").trim().split("\n");
            assert.equal(pids.length, 1, `the credential_process was started once, not once a request: ${pids}`);
        }
        finally
        {
            for (const pid of fs.existsSync(started) ? fs.readFileSync(started, "utf8").trim().split("\n") : [])
            {
                try
                {
                    process.kill(Number(pid), "SIGKILL");
                }
                catch (_)
                {
                    // Gone already.
                }
            }
        }
    });

    for (const form of ["sso_session", "sso_start_url"])
    {
        const profile = form === "sso_session"
            ? `[profile dev]\nsso_session = ${SESSION}\nsso_account_id = ${ACCOUNT}\nsso_role_name = ${ROLE}\nregion = us-east-1\n`
                + `[sso-session ${SESSION}]\nsso_start_url = ${START_URL}\nsso_region = us-east-1\n`
            : `[profile dev]\nsso_start_url = ${START_URL}\nsso_region = us-east-1\nsso_account_id = ${ACCOUNT}\n`
                + `sso_role_name = ${ROLE}\nregion = us-east-1\n`;
        const identifier = form === "sso_session" ? SESSION : START_URL;

        it(`an SSO profile (${form}) with a cached login signs with the role credentials from the portal`, async () =>
        {
            const portal = await ssoPortal("cached-token", "AKIDFROMSSO");
            try
            {
                const { dir, env } = profileHome(profile);
                cacheSsoLogin(dir, identifier, "cached-token", new Date(Date.now() + 3600000));
                const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "dev", AWS_ENDPOINT_URL_SSO: portal.endpoint }));
                assert.deepEqual(outcome, { ok: true });
                assert.deepEqual(keys, ["AKIDFROMSSO"]);
                assert.equal(portal.calls.length, 1);
                assert.deepEqual(portal.calls[0],
                    { path: "/federation/credentials", role: ROLE, account: ACCOUNT, token: "cached-token" });
            }
            finally
            {
                await portal.close();
            }
        });

        it(`an SSO profile (${form}) without a cached login says to log in`, async () =>
        {
            const portal = await ssoPortal("cached-token", "AKIDFROMSSO");
            try
            {
                const { env } = profileHome(profile);
                const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "dev", AWS_ENDPOINT_URL_SSO: portal.endpoint }));
                assert.equal(outcome.code, "CredentialsError");
                assert.match(outcome.message, /"dev" uses SSO and no SSO login is cached/);
                assert.match(outcome.message, /aws sso login --profile dev/);
                assert.deepEqual(keys, []);
                assert.equal(portal.calls.length, 0);
            }
            finally
            {
                await portal.close();
            }
        });
    }

    it("an SSO login that has expired is named, with when and what to run", async () =>
    {
        // The portal refuses the token, as it does an expired one.
        const portal = await ssoPortal("another-token", "AKIDFROMSSO");
        try
        {
            for (const form of ["sso_session", "sso_start_url"])
            {
                const profile = form === "sso_session"
                    ? `[profile dev]\nsso_session = ${SESSION}\nsso_account_id = ${ACCOUNT}\nsso_role_name = ${ROLE}\n`
                        + `region = us-east-1\n[sso-session ${SESSION}]\nsso_start_url = ${START_URL}\nsso_region = us-east-1\n`
                    : `[profile dev]\nsso_start_url = ${START_URL}\nsso_region = us-east-1\nsso_account_id = ${ACCOUNT}\n`
                        + `sso_role_name = ${ROLE}\nregion = us-east-1\n`;
                const { dir, env } = profileHome(profile);
                const expiredAt = new Date(Date.now() - 600000);
                cacheSsoLogin(dir, form === "sso_session" ? SESSION : START_URL, "cached-token", expiredAt);
                const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "dev", AWS_ENDPOINT_URL_SSO: portal.endpoint }));
                assert.equal(outcome.code, "CredentialsError", form);
                assert.match(outcome.message, /the SSO login of the AWS profile "dev" expired at /, form);
                assert.ok(outcome.message.includes(expiredAt.toISOString().slice(0, 19)), outcome.message);
                assert.match(outcome.message, /aws sso login --profile dev/, form);
                assert.deepEqual(keys, [], form);
            }
        }
        finally
        {
            await portal.close();
        }
    });

    it("a token the portal refuses is reported with the portal's answer", async () =>
    {
        const portal = await ssoPortal("another-token", "AKIDFROMSSO");
        try
        {
            const { dir, env } = profileHome(`[profile dev]\nsso_start_url = ${START_URL}\nsso_region = us-east-1\n`
                + `sso_account_id = ${ACCOUNT}\nsso_role_name = ${ROLE}\nregion = us-east-1\n`);
            cacheSsoLogin(dir, START_URL, "cached-token", new Date(Date.now() + 3600000));
            const { outcome } = await acquire(Object.assign(env, { AWS_PROFILE: "dev", AWS_ENDPOINT_URL_SSO: portal.endpoint }));
            assert.equal(outcome.code, "CredentialsError");
            assert.match(outcome.message, /SSO credentials of the AWS profile "dev" could not be fetched: UnauthorizedException/);
            assert.ok(portal.calls.length >= 1);
        }
        finally
        {
            await portal.close();
        }
    });

    it("a profile the files do not have is named with both files, with a region given", async () =>
    {
        const { env } = profileHome("[profile other]\nregion = us-east-1\n",
            "[other]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = other-secret\n");
        const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "nope" }), { region: "us-east-1" });
        assert.equal(outcome.code, "CredentialsError");
        assert.ok(outcome.message.includes(`the AWS profile "nope" (AWS_PROFILE) was not found in the config file ${env.AWS_CONFIG_FILE}`),
            outcome.message);
        assert.ok(outcome.message.includes(`the credentials file ${env.AWS_SHARED_CREDENTIALS_FILE}`), outcome.message);
        assert.doesNotMatch(outcome.message, /already taken/);
        assert.deepEqual(keys, []);
    });

    it("credentials that could not be loaded are looked for again: a profile added later is used by the same client", async () =>
    {
        const { env } = profileHome("[profile other]\nregion = us-east-1\n");
        const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "late" }), { region: "us-east-1",
            thenWrite: { file: env.AWS_SHARED_CREDENTIALS_FILE, text: "[late]\naws_access_key_id = AKIDADDEDLATER\naws_secret_access_key = s\n" } });
        assert.equal(outcome.outcomes.length, 2);
        assert.equal(outcome.outcomes[0].code, "CredentialsError");
        assert.match(outcome.outcomes[0].message, /"late" \(AWS_PROFILE\) was not found/);
        assert.deepEqual(outcome, { ok: true });
        assert.deepEqual(keys, ["AKIDADDEDLATER"]);
    });

    it("a profile the files do not have, without a region, is a ConfigError that names the profile", async () =>
    {
        const { env } = profileHome("[profile other]\nregion = us-east-1\n");
        const { outcome } = await acquire(Object.assign(env, { AWS_PROFILE: "nope" }));
        assert.equal(outcome.code, "ConfigError");
        assert.equal(outcome.name, "ConfigError");
        assert.match(outcome.message, /^No AWS region: the AWS profile "nope" \(AWS_PROFILE\) was not found in the config file /);
        assert.ok(outcome.message.includes(env.AWS_CONFIG_FILE), outcome.message);
    });

    it("no region at all is a ConfigError that says where a region can be set", async () =>
    {
        const { env } = profileHome("", "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s\n");
        const { outcome } = await acquire(env);
        assert.equal(outcome.code, "ConfigError");
        assert.match(outcome.message, /^No AWS region: set `region` in the `dynamodb` options, AWS_REGION/);
        // Set but empty is no region either: nothing is signed for a region named "".
        const { outcome: empty, keys } = await acquire(Object.assign(env, { AWS_REGION: "", AWS_DEFAULT_REGION: "" }));
        assert.equal(empty.code, "ConfigError", JSON.stringify(empty));
        assert.match(empty.message, /^No AWS region/);
        assert.deepEqual(keys, [], "nothing was sent");
        // With a region in the profile, that one, as the AWS CLI takes it.
        fs.writeFileSync(env.AWS_CONFIG_FILE, "[default]\nregion = eu-west-1\n");
        const fromProfile = await acquire(env);
        assert.deepEqual(fromProfile.outcome, { ok: true });
        assert.deepEqual(fromProfile.regions, ["eu-west-1"]);
    });

    it("an AWS SDK v3 client without a region is a ConfigError, not the SDK's bare error", async () =>
    {
        const { env } = profileHome("", "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s\n");
        const { outcome, keys } = await acquire(env, { client: "v3" });
        assert.equal(outcome.ok, false);
        assert.equal(outcome.code, "ConfigError");
        assert.equal(outcome.name, "ConfigError");
        assert.match(outcome.message, /^No AWS region: the AWS SDK client has none/);
        assert.match(outcome.cause, /Region is missing/);
        assert.deepEqual(keys, []);
    });

    it("an AWS SDK v3 client signs with its profile's credential_process", async () =>
    {
        const { dir, env } = profileHome("");
        const script = path.join(dir, "creds.js");
        fs.writeFileSync(script, `console.log(JSON.stringify({ Version: 1, AccessKeyId: "AKIDV3PROCESS", SecretAccessKey: "s" }));\n`);
        fs.writeFileSync(env.AWS_CONFIG_FILE, `[profile proc]\nregion = us-east-1\ncredential_process = "${process.execPath}" "${script}"\n`);
        const { outcome, keys } = await acquire(Object.assign(env, { AWS_PROFILE: "proc" }), { client: "v3" });
        assert.deepEqual(outcome, { ok: true });
        assert.deepEqual(keys, ["AKIDV3PROCESS"]);
    });
});
