// The ES module entry has the same names.
import lockClient, { FailOpen, FailClosed } from "dynamodb-lock-native";

const a = new FailOpen({ lockTable: "t", partitionKey: "p", leaseDurationMs: 1000 });
const b = new lockClient.FailClosed({ lockTable: "t", partitionKey: "p", acquirePeriodMs: 1 });
const c: FailClosed = b;
void a.acquireLock("x");
void c;
