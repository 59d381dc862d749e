// The ES module entry exposes the same classes as the CommonJS one.
import { it } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import lockClient, { FailClosed, FailOpen, Lock, ValidationError } from "dynamodb-lock-native";

const require = createRequire(import.meta.url);

it("import and require give the same classes", () =>
{
    const cjs = require("dynamodb-lock-native");
    assert.equal(FailClosed, cjs.FailClosed);
    assert.equal(FailOpen, cjs.FailOpen);
    assert.equal(Lock, cjs.Lock);
    assert.equal(lockClient, cjs);
    assert.throws(() => new FailOpen({}), ValidationError);
});
