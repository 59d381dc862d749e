// close(), metrics() and the diagnostics channel messages.
import diagnostics from "node:diagnostics_channel";
import { AcquiredMessage, Campaign, CloseOutcome, FailClosed, FailOpen, Fifo, HandedOverMessage, LatencyHistogram, LockError, LockMessage, Metrics, WaitingMessage } from "dynamodb-lock-native";

async function main(): Promise<void> {
    const dynamodb = { region: "us-east-1", endpoint: "http://127.0.0.1:8000", credentials: { accessKeyId: "a", secretAccessKey: "b" } };
    const open = new FailOpen({ dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 10_000, heartbeatPeriodMs: 3_000 });
    const closed = FailClosed({ dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 100 });
    const fifo = new Fifo({ dynamodb, lockTable: "queue", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 10_000 });
    const m: Metrics = open.metrics();
    const waited: number = m.waits.p99Ms + m.heartbeats.retried + m.locks.held + (m.acquisitions.byCode["FailedToAcquireLock"] ?? 0);
    const updates: number = m.requests["UpdateItem"].conditionFailed + m.throttles;
    console.log(waited, updates, closed.metrics().releases.failed, fifo.metrics().kind);
    diagnostics.subscribe("dynamodb-lock-native:acquired", message => {
        const m = message as AcquiredMessage;
        console.log(m.id, m.kind, m.fencingToken, m.waitMs);
    });
    diagnostics.subscribe("dynamodb-lock-native:lost", message => console.log((message as LockMessage).heldMs));
    diagnostics.subscribe("dynamodb-lock-native:waiting", message => console.log((message as WaitingMessage).waitMs));
    diagnostics.subscribe("dynamodb-lock-native:handed-over", message => {
        const h = message as HandedOverMessage;
        console.log(h.fencingToken, h.waitMs - h.waitedMs);
    });
    const histogram: LatencyHistogram = m.waits.histogram;
    const fleet: number[] = histogram.counts.map((n, i) => n + m.holds.histogram.counts[i]);
    console.log(fleet, histogram.boundsMs.length, histogram.sumMs, m.acquisitions.waited + m.acquisitions.handedOver);
    const lock = await open.acquireLock("typed");
    lock.on("error", (e: LockError) => {
        const atRisk: boolean | undefined = e.leaseAtRisk;
        console.log(atRisk, e.leaseRemainingMs?.toFixed(0));
    });
    const outcomes: CloseOutcome[] = await open.close({ releaseLocks: true });
    for (const o of outcomes) {
        console.log(o.id, o.fencingToken, o.released, o.error?.code);
    }
    closed.close((error, outcomes) => console.log(error, outcomes.length));
    closed.close({ releaseLocks: false }, (error, outcomes) => console.log(error, outcomes.length));
    await fifo.close();
}

main();

async function elect(): Promise<void> {
    const dynamodb = { region: "us-east-1", endpoint: "http://127.0.0.1:8000", credentials: { accessKeyId: "a", secretAccessKey: "b" } };
    const open = new FailOpen({ dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 10_000, heartbeatPeriodMs: 3_000 });
    const campaign: Campaign = open.campaign("scheduler", { signal: AbortSignal.timeout(60_000) });
    campaign.on("elected", ({ term, signal }) => console.log(term, signal.aborted));
    campaign.on("deposed", ({ term, reason, error }) => console.log(term, reason === "danger", error?.code));
    for await (const { term, signal } of campaign) {
        console.log(term, signal.aborted, campaign.leader?.term, campaign.active);
        break;
    }
    await campaign.resign();
    const fifo = new Fifo({ dynamodb, lockTable: "queue", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 10_000 });
    fifo.campaign("scheduler").resign(() => console.log("resigned"));
    await campaign.done;
}

elect();
