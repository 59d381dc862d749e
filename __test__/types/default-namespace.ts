// The default export names the types too, as code written against @types/dynamodb-lock-client
// in the `DynamoDBLockClient.X` style does (TS2503 "Cannot find namespace" before).
import DynamoDBLockClient from "dynamodb-lock-native";

const options = { region: "us-east-1", endpoint: "http://127.0.0.1:8000" };
const open: DynamoDBLockClient.FailOpen = new DynamoDBLockClient.FailOpen({
    dynamodb: options,
    lockTable: "locks",
    partitionKey: "id",
    leaseDurationMs: 10000,
    heartbeatPeriodMs: 3000,
});
const closed: DynamoDBLockClient.FailClosed<string> = DynamoDBLockClient.FailClosed<string>({
    dynamodb: options,
    lockTable: "locks",
    partitionKey: "id",
    acquirePeriodMs: 100,
});
const config: DynamoDBLockClient.FailOpenConfig = { lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000 };
const client: DynamoDBLockClient.LockClient<string> = closed;

export async function work(): Promise<number> {
    const lock: DynamoDBLockClient.Lock = await open.acquireLock("a");
    lock.on("error", (error: DynamoDBLockClient.LockError) => console.error(error.code));
    const info: DynamoDBLockClient.LockInfo | null = await client.getLock("a");
    const fair: DynamoDBLockClient.Fifo = new DynamoDBLockClient.Fifo({ lockTable: "f", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 1000 });
    void fair;
    void info;
    void config;
    const outcomes: DynamoDBLockClient.CloseOutcome[] = await open.close();
    void outcomes;
    return lock.fencingToken;
}
