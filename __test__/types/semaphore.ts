// Semaphore and ReadWriteLock: permits and modes, waitMs, AbortSignal, the callback form,
// what showLock lists of their holders, and the options each refuses.
import DynamoDBLockClient, { LockError, ReadWriteHold, ReadWriteLock, Semaphore, SemaphoreHolder, SemaphoreLock, showLock } from "dynamodb-lock-native";

async function main(): Promise<void> {
    const table = { lockTable: "locks", partitionKey: "resource", sortKey: "entry", leaseDurationMs: 10_000 };
    const limiter = new Semaphore({ ...table, permits: 5, heartbeatPeriodMs: 3_000 });
    const one: SemaphoreLock = await limiter.acquireLock("partner-api");
    const two = await limiter.acquireLock("partner-api", { permits: 2, waitMs: 30_000, signal: AbortSignal.timeout(60_000) });
    const held: number = one.permits + two.permits;
    const token: number = two.fencingToken;
    two.on("lost", (e: LockError) => console.error(e.code, held, token, two.signal.aborted, two.leaseRemainingMs));
    await Promise.all([one.release(), two.release()]);
    limiter.acquireLock("partner-api", { waitMs: 0 }, (error: LockError, lock: SemaphoreLock) => {
        if (!error) {
            lock.release(() => {});
        }
    });

    const prices = ReadWriteLock({ ...table, dynamodb: { region: "us-east-1" } });
    await using reader = await prices.acquireLock("price-list", { mode: "shared" });
    const mode: "shared" | "exclusive" = reader.mode;
    const writer: ReadWriteHold = await prices.acquireLock("price-list", { waitMs: Infinity });
    prices.acquireLock(Buffer.from("price-list"), (error, lock) => console.log(error, lock.mode, lock.permits, mode));
    await writer.release();
    await prices.close({ releaseLocks: true });

    const shown = await showLock({ lockTable: "locks", id: "partner-api" });
    if (shown && (shown.kind === "Semaphore" || shown.kind === "ReadWriteLock")) {
        const holders: SemaphoreHolder[] = shown.holders ?? [];
        for (const h of holders) {
            console.log(h.owner, h.permits ?? h.mode, h.state === "expired", h.silentMs, shown.permits, shown.permitsHeld);
        }
        console.log(shown.queue?.map(e => e.permits ?? e.mode));
    }
    const info = await limiter.getLock("partner-api");
    prices.getLock("price-list", (error: LockError, found) => console.log(error, found?.heldByThisClient, info?.released));
    const viaDefault: DynamoDBLockClient.Semaphore = new DynamoDBLockClient.Semaphore({ ...table, permits: 1 });
    void viaDefault;

    // @ts-expect-error: a Semaphore needs its permits.
    new Semaphore(table);
    // @ts-expect-error: a ReadWriteLock counts its own.
    new ReadWriteLock({ ...table, permits: 2 });
    // @ts-expect-error: one id per acquisition.
    void limiter.acquireLock(["a", "b"]);
    // @ts-expect-error: the modes are "shared" and "exclusive".
    void prices.acquireLock("price-list", { mode: "read" });
    // @ts-expect-error: permits are a Semaphore's.
    void prices.acquireLock("price-list", { permits: 1 });
    // @ts-expect-error: no lock data.
    void limiter.acquireLock("partner-api", { data: "x" });
    // @ts-expect-error: no leader election.
    limiter.campaign("partner-api");
}

void main();
