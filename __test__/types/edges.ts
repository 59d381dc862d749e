// What strict TypeScript users write first: callbacks that read `error.code`, every listener
// method, FailClosed locks without a fencing token, and the default import.
import DynamoDBLockClient from "dynamodb-lock-native";
import { FailClosedLock, Lock, LockError } from "dynamodb-lock-native";

const dynamodb = { region: "us-east-1", endpoint: "http://127.0.0.1:8000", credentials: async () => ({ accessKeyId: "a", secretAccessKey: "b" }) };

const open = new DynamoDBLockClient.FailOpen({ dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 10_000, heartbeatPeriodMs: 3_000 });
open.acquireLock("a", (error, lock) => {
    if (error) {
        return console.error("failed to acquire the lock:", error.code, error.message, error.lockId, error.owner);
    }
    const token: number = lock.fencingToken;
    const onError = (e: LockError) => console.error(e.code, token);
    lock.once("lost", e => console.error(e.code));
    lock.addListener("danger", ({ remainingMs }) => console.warn(remainingMs));
    lock.prependListener("error", onError);
    lock.on("error", onError);
    lock.off("error", onError);
    lock.removeListener("error", onError);
    const count: number = lock.listenerCount("error");
    console.log(count, lock.listeners("danger").length);
    lock.release(e => e && console.error(e.code));
});

const closed = DynamoDBLockClient.FailClosed({ dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 100 });
closed.acquireLock("b", (error, lock) => {
    if (error) {
        return console.error(error.code);
    }
    const none: undefined = lock.fencingToken;
    console.log(none);
    lock.release(() => undefined);
});

async function modern(): Promise<void> {
    const lock: FailClosedLock = await closed.acquireLock("c");
    const any: Lock<number | undefined> = lock;
    await any.release();
}
void modern;
