// Code written against @types/dynamodb-lock-client 0.7, with only the module name changed.
import { DynamoDB } from "aws-sdk";
import * as DynamoDBLockClient from "dynamodb-lock-native";
import { FailClosed, FailOpen, Lock, LockClient } from "dynamodb-lock-native";

const dynamodb = new DynamoDB.DocumentClient({ region: "us-east-1" });

const failOpen = new FailOpen<string>({
    dynamodb,
    lockTable: "my-lock-table-name",
    partitionKey: "mylocks",
    heartbeatPeriodMs: 3e3,
    leaseDurationMs: 1e4,
    trustLocalTime: true,
    owner: "me",
});

const failClosed: LockClient<number> = new DynamoDBLockClient.FailClosed<number>({
    dynamodb,
    lockTable: "my-lock-table-name",
    partitionKey: "mylocks",
    sortKey: "sort",
    acquirePeriodMs: 1e4,
});

failOpen.acquireLock("my-fail-open-lock", (error: Error, lock: Lock) => {
    if (error) {
        return console.error(error);
    }
    const token: number = lock.fencingToken;
    lock.on("error", (e: Error) => console.error("failed to heartbeat!", e, token));
    lock.release((e: Error) => console.log(e));
});

failClosed.acquireLock(42, (error, lock) => {
    if (error) {
        return;
    }
    lock.release(() => undefined);
});

// A duck-typed dynamodb object, as users' test doubles are written.
const mock = {
    get: (_params: any, callback: (error: any, data?: any) => void) => callback(undefined, {}),
    put: (_params: any, callback: (error: any, data?: any) => void) => callback(undefined, {}),
    delete: (_params: any, callback: (error: any, data?: any) => void) => callback(undefined, {}),
};
const withMock: FailClosed<string> = new FailClosed<string>({ dynamodb: mock, lockTable: "t", partitionKey: "p", acquirePeriodMs: 1 });
withMock.acquireLock("x", () => undefined);

// A Lock is an EventEmitter, as in @types/dynamodb-lock-client: code that treats it as one compiles.
import { EventEmitter, once } from "events";
failOpen.acquireLock("as-an-emitter", async (error: Error, lock: Lock) => {
    if (error) {
        return;
    }
    const emitter: EventEmitter = lock;
    lock.setMaxListeners(20);
    const n: number = lock.getMaxListeners() + emitter.listenerCount("error");
    const names = lock.eventNames();
    await once(lock, "lost");
    console.log(n, names);
});
