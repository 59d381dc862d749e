// Lock data, getLock, TTL options and createTable.
import * as DynamoDBLockClient from "dynamodb-lock-native";
import { createTable, FailClosed, FailOpen, Fifo, LockInfo, LockError } from "dynamodb-lock-native";

async function main(): Promise<void> {
    const dynamodb = { region: "us-east-1", endpoint: "http://127.0.0.1:8000", credentials: { accessKeyId: "a", secretAccessKey: "b" } };
    const made = await createTable({ dynamodb, lockTable: "locks", partitionKey: "id", ttlAttribute: "expires" });
    const created: boolean = made.created;
    await DynamoDBLockClient.createTable({ dynamodb, lockTable: "fifo", partitionKey: "id", sortKey: "sk", billingMode: "PROVISIONED", readCapacityUnits: 2 });
    const open = new FailOpen({ dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 10_000, heartbeatPeriodMs: 3_000, ttlAttribute: "expires", ttlSeconds: 600 });
    const lock = await open.acquireLock("job", { data: JSON.stringify({ step: 1 }) });
    const data: string | Buffer | undefined = lock.data;
    await lock.update({ data: Buffer.from("step 2") });
    lock.update({ data: undefined }, (error: Error) => console.log(error, created, data));
    const info: LockInfo | null = await open.getLock("job");
    if (info !== null && info.heldByThisClient && !info.released) {
        const token: number | undefined = info.fencingToken;
        console.log(info.owner, token, info.leaseDurationMs, info.data);
    }
    const closed = FailClosed({ dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 100, ttlAttribute: "expires", ttlSeconds: 86_400 });
    closed.getLock({ id: "job" }, (error: Error, found: LockInfo | null) => console.log(error, found));
    const fifo = new Fifo({ dynamodb, lockTable: "fifo", partitionKey: "id", sortKey: "sk", leaseDurationMs: 5_000 });
    console.log(await fifo.getLock("printer"));
    try {
        await lock.update({ data: "x" });
    } catch (e) {
        console.log((e as LockError).code === "LockLost");
    }
    await lock.release();
}

void main();
