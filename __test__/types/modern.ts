// Promises, AbortSignal, `await using`, health events and error codes.
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { FailClosed, FailOpen, LockError, ValidationError } from "dynamodb-lock-native";

async function main(): Promise<void> {
    const dynamodb = DynamoDBDocumentClient.from(new DynamoDBClient({ region: "us-east-1" }));
    const client = new FailOpen({ dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 10_000, heartbeatPeriodMs: 3_000 });
    {
        await using lock = await client.acquireLock("job-42", { signal: AbortSignal.timeout(5_000) });
        lock.on("danger", ({ remainingMs }) => console.warn(`lease lapses in ${remainingMs} ms`));
        lock.on("lost", (e: LockError) => console.error(e.code));
        const signal: AbortSignal = lock.signal;
        await fetchLike(lock.fencingToken, signal);
    }
    const options = { region: "us-east-1", endpoint: "http://127.0.0.1:8000", credentials: { accessKeyId: "a", secretAccessKey: "b" } };
    const closed = FailClosed({ dynamodb: options, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 100, retryCount: 3 });
    try {
        const lock = await closed.acquireLock({ id: "a" });
        await lock.release();
    } catch (e) {
        const err = e as LockError;
        if (err.code === "FailedToAcquireLock") {
            console.log(err.originalError?.code);
        }
    }
    try {
        new FailOpen({ lockTable: "t", partitionKey: "p", leaseDurationMs: 1 });
    } catch (e) {
        if (e instanceof ValidationError) {
            console.log(e.details.map(d => d.message));
        }
    }
}

async function fetchLike(_token: number, _signal: AbortSignal): Promise<void> {}

void main();
