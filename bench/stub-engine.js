"use strict";

// A stub DynamoDB for the client's own cost (scenario 2's cycles, scenario 9's acquisition
// capacity): on 127.0.0.1 only, in its own
// process (forked by bench/run.js, which reads { type: "listening", port } over IPC), it keeps
// items in a Map (per table and key) and answers GetItem, UpdateItem (SET of values,
// `if_not_exists(#a, :v) + :w` and `#a + :w`, REMOVE; ReturnValues UPDATED_NEW / ALL_NEW /
// ALL_OLD), PutItem and DeleteItem (ReturnValues ALL_OLD) and DescribeTable at once.
// Conditions are not evaluated: every write succeeds. It measures what the client can do when
// the engine is not the limit, never whether a lock is exclusive.

const http = require("http");
const path = require("path");
const { crc32 } = require(path.join(__dirname, "..", "__test__", "support", "proxy.js"));

const items = new Map();
const counts = {};

function keyOf(table, key)
{
    return JSON.stringify([table || "", Object.keys(key).sort().map(k => [k, key[k]])]);
}

function numberOf(v)
{
    return v && v.N !== undefined ? Number(v.N) : 0;
}

function operand(expr, names, values, old)
{
    expr = expr.trim();
    let m = /^if_not_exists\(\s*(#\w+)\s*,\s*(:\w+)\s*\)$/.exec(expr);
    if (m)
    {
        const a = names[m[1]];
        return old && old[a] !== undefined ? old[a] : values[m[2]];
    }
    if (/^#\w+$/.test(expr))
    {
        return old ? old[names[expr]] : undefined;
    }
    if (/^:\w+$/.test(expr))
    {
        return values[expr];
    }
    throw new Error(`stub engine: unsupported operand ${expr}`);
}

function update(body)
{
    const names = body.ExpressionAttributeNames || {};
    const values = body.ExpressionAttributeValues || {};
    const k = keyOf(body.TableName, body.Key);
    const old = items.get(k);
    const item = Object.assign({}, old || body.Key);
    const expr = body.UpdateExpression || "";
    const setPart = /SET\s+(.*?)(?:\s+REMOVE\s+|$)/.exec(expr);
    const removePart = /REMOVE\s+(.*?)(?:\s+SET\s+|$)/.exec(expr);
    const updated = {};
    if (setPart)
    {
        for (const assignment of setPart[1].split(/,(?![^(]*\))/))
        {
            const [lhs, rhs] = assignment.split("=").map(s => s.trim());
            const name = names[lhs] || lhs;
            const terms = rhs.split("+");
            let v;
            if (terms.length === 2)
            {
                v = { N: String(numberOf(operand(terms[0], names, values, old)) + numberOf(operand(terms[1], names, values, old))) };
            }
            else
            {
                v = operand(rhs, names, values, old);
            }
            item[name] = v;
            updated[name] = v;
        }
    }
    if (removePart)
    {
        for (const r of removePart[1].split(","))
        {
            delete item[names[r.trim()] || r.trim()];
        }
    }
    items.set(k, item);
    const rv = body.ReturnValues;
    if (rv === "UPDATED_NEW")
    {
        return { Attributes: updated };
    }
    if (rv === "ALL_NEW")
    {
        return { Attributes: item };
    }
    if (rv === "ALL_OLD")
    {
        return old ? { Attributes: old } : {};
    }
    return {};
}

/** The item's key attributes, as the table's key schema names them (the stub's tables: "id", and "sk" when the item has one). */
function keyOfItem(item)
{
    const key = {};
    for (const a of ["id", "sk"])
    {
        if (item[a] !== undefined)
        {
            key[a] = item[a];
        }
    }
    return key;
}

function put(body)
{
    const item = body.Item || {};
    const k = keyOf(body.TableName, keyOfItem(item));
    const old = items.get(k);
    items.set(k, Object.assign({}, item));
    return body.ReturnValues === "ALL_OLD" && old ? { Attributes: old } : {};
}

function remove(body)
{
    const k = keyOf(body.TableName, body.Key);
    const old = items.get(k);
    items.delete(k);
    return body.ReturnValues === "ALL_OLD" && old ? { Attributes: old } : {};
}

function describe(body)
{
    return {
        Table: {
            TableName: body.TableName,
            TableStatus: "ACTIVE",
            KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
            AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
            ItemCount: items.size,
            TableArn: `arn:aws:dynamodb:us-east-1:000000000000:table/${body.TableName}`,
        },
    };
}

const server = http.createServer((req, res) =>
{
    const chunks = [];
    req.on("data", c => chunks.push(c));
    req.on("end", () =>
    {
        const target = String(req.headers["x-amz-target"] || "");
        const op = target.slice(target.lastIndexOf(".") + 1);
        counts[op] = (counts[op] || 0) + 1;
        let status = 200;
        let out;
        try
        {
            const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
            if (op === "UpdateItem")
            {
                out = update(body);
            }
            else if (op === "GetItem")
            {
                const item = items.get(keyOf(body.TableName, body.Key));
                out = item ? { Item: item } : {};
            }
            else if (op === "PutItem")
            {
                out = put(body);
            }
            else if (op === "DeleteItem")
            {
                out = remove(body);
            }
            else if (op === "DescribeTable")
            {
                out = describe(body);
            }
            else
            {
                throw new Error(`stub engine: unsupported operation ${op}`);
            }
        }
        catch (e)
        {
            status = 400;
            out = { __type: "com.amazon.coral.validate#ValidationException", message: String(e.message) };
        }
        const payload = Buffer.from(JSON.stringify(out));
        res.writeHead(status, {
            "content-type": "application/x-amz-json-1.0",
            "content-length": payload.length,
            "x-amzn-requestid": "STUB",
            "x-amz-crc32": String(crc32(payload)),
        });
        res.end(payload);
    });
});
server.keepAliveTimeout = 65000;
server.listen(0, "127.0.0.1", () =>
{
    process.send({ type: "listening", port: server.address().port });
});
process.on("message", m =>
{
    if (m && m.type === "counts")
    {
        process.send({ type: "counts", counts, items: items.size });
    }
});
process.on("disconnect", () => process.exit(0));
setTimeout(() => process.exit(0), 10 * 60 * 1000).unref();
