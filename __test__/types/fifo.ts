// Fifo: one or several resources, waitMs, AbortSignal, the callback form.
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Fifo, FifoAcquireOptions, Lock, LockError } from "dynamodb-lock-native";

async function main(): Promise<void> {
    const dynamodb = new DynamoDBClient({ region: "us-east-1" });
    const fifo = new Fifo({ dynamodb, lockTable: "locks", partitionKey: "resource", sortKey: "entry", leaseDurationMs: 10_000 });
    const lock: Lock = await fifo.acquireLock("job-42");
    const token: number = lock.fencingToken;
    await lock.release();
    const options: FifoAcquireOptions = { waitMs: 60_000, signal: AbortSignal.timeout(5_000) };
    await using both = await fifo.acquireLock(["acct-1", Buffer.from("acct-2"), 3], options);
    both.on("lost", (e: LockError) => console.error(e.code, token));
    const withoutNew = Fifo({ dynamodb: { region: "us-east-1" }, lockTable: "t", partitionKey: "p", sortKey: "s", leaseDurationMs: 3_000, heartbeatPeriodMs: 1_000, ttlAttribute: "expiresAt" });
    withoutNew.acquireLock("x", { waitMs: Infinity }, (error: Error, l: Lock) => {
        if (!error) {
            l.release(() => {});
        }
    });
}

void main();
