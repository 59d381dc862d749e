/// <reference types="node" />

import { EventEmitter } from "events";
import * as self from "./index.js";

// Public types of dynamodb-lock-native: a superset of @types/dynamodb-lock-client 0.7, so
// code written against those types compiles unchanged, plus Promises, AbortSignal,
// `await using` and lock health events.

/** A user object the library calls with the original library's DocumentClient requests. */
export interface DynamoDBObject {
    get(params: any, callback: (error: any, data?: any) => void): any;
    put(params: any, callback: (error: any, data?: any) => void): any;
    delete(params: any, callback: (error: any, data?: any) => void): any;
}

/** An AWS SDK for JavaScript v3 client (`DynamoDBClient`, `DynamoDBDocumentClient`). */
export interface DynamoDBSdkV3Client {
    send(command: any, ...rest: any[]): Promise<any>;
    config: object;
}

/** Static credentials for the native core. */
export interface StaticCredentials {
    accessKeyId: string;
    secretAccessKey: string;
    sessionToken?: string;
}

/**
 * Options for the native core. Anything left out comes from the standard AWS environment
 * (`AWS_REGION`, `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_PROFILE`, ...).
 */
export interface DynamoDBOptions {
    region?: string;
    endpoint?: string | URL;
    /** Static credentials, or a provider function (as the AWS SDK v3's providers are), called whenever the cached credentials near expiry. Checked at construction: never replaced by the environment's. */
    credentials?: StaticCredentials | (() => Promise<StaticCredentials & { expiration?: Date }>);
    /** PEM certificates (or the path of a PEM file) trusted instead of the system's roots. Default: `AWS_CA_BUNDLE`, else the system's roots. */
    caBundle?: string | Buffer;
}

/**
 * Where the locks live: an AWS SDK client (v2 or v3; the native core does the I/O with its
 * region, endpoint and credentials), native core options, or any object with get/put/delete.
 */
export type DynamoDBInput = DynamoDBObject | DynamoDBSdkV3Client | DynamoDBOptions;

interface GenericConfig {
    /** Default: the standard AWS environment. */
    dynamodb?: DynamoDBInput;
    /** Name of the lock table. */
    lockTable: string;
    /** Name of the table's partition key. */
    partitionKey: string;
    /** Name of the table's sort key, if it has one. */
    sortKey?: string;
    /** Written into the lock item. Default: `dynamodb-lock-native@<version>_<user>@<host>`. */
    owner?: string;
    /** Retries after the lock is found held. Default: 1. */
    retryCount?: number;
    /** Longest wait for one DynamoDB answer, in ms. Default: 5000. */
    requestTimeoutMs?: number;
    /** A waiter's first pause between re-reads of a held lock, in ms; each pause is this plus half the time waited for the same holder, up to half the lease (FailClosed: half of `acquirePeriodMs`). Default: 10 (FailOpen: lease/4 if shorter). */
    rereadPeriodMs?: number;
    /** `"sdk"`: the native core does the I/O; `"object"`: call `dynamodb.get/put/delete`. Default: `"auto"`. */
    transport?: "auto" | "sdk" | "object";
    /**
     * Take locks on a global table in the eventually consistent mode, where two Regions can grant
     * one lock at once. Without it such a table is refused (code `EventuallyConsistentGlobalTable`),
     * as the client learns with one `DescribeTable` beside its first acquisition. The same check
     * refuses a TTL attribute (`ttlAttribute`, and Fifo's queue entries) on a global table with
     * multi-Region strong consistency (code `StronglyConsistentGlobalTableLimit`); `true` turns
     * both off. Default: false.
     */
    allowEventuallyConsistentGlobalTable?: boolean;
}

export interface FailClosedConfig extends GenericConfig {
    /** Pause between attempts on a held lock, in ms. */
    acquirePeriodMs: number;
    /** The Number attribute the table's TTL reads (Unix seconds), written with every write of a lock item. Needs `ttlSeconds`. Default: none. */
    ttlAttribute?: string;
    /** With `ttlAttribute`: seconds after an item's last write that DynamoDB may delete it, held or not (the one way a crashed holder's lock ever goes away). */
    ttlSeconds?: number;
}

export interface FailOpenConfig extends GenericConfig {
    /**
     * Period of heartbeats that renew the lease, in ms. No heartbeats without it. A period not
     * shorter than `leaseDurationMs` is accepted, as by dynamodb-lock-client, with a process
     * warning (code `DYNAMODB_LOCK_NATIVE_UNSAFE_HEARTBEAT`): each lease runs out before its renewal.
     */
    heartbeatPeriodMs?: number;
    /** The lease: how long after its last heartbeat a lock may be taken over, in ms. */
    leaseDurationMs: number;
    /** Let the holder's `lockAcquiredTimeUnixMs` shorten a waiter's wait. Default: false. */
    trustLocalTime?: boolean;
    /** `"danger"` is emitted when this little of the lease is left without a heartbeat, in ms. Default: lease/3. */
    dangerMarginMs?: number;
    /** Cap on this client's heartbeat requests per second. Default: none. */
    maxHeartbeatsPerSecond?: number;
    /**
     * Hold every lock through one session of this client: one item renewed every
     * `heartbeatPeriodMs` keeps all of them, and a held lock writes nothing until its release.
     * Its locks' `leaseRemainingMs`, `"danger"` and `"lost"` follow the session. Needs
     * `heartbeatPeriodMs` below `leaseDurationMs`, and a table whose key attributes are strings.
     * Not for lock ids that dynamodb-lock-client also takes. Default: false.
     */
    session?: boolean;
    /** The Number attribute the table's TTL reads (Unix seconds), written with every write of a lock item. Default: none. */
    ttlAttribute?: string;
    /** With `ttlAttribute`: seconds past the lease (held) or the release (released) that DynamoDB may delete the item. Default: 3600. */
    ttlSeconds?: number;
}

/**
 * A fair lock on a table with a partition key and a string sort key. Waiters are granted each
 * resource in the order they asked; the ticket is the fencing token.
 */
export interface FifoConfig {
    /** An AWS SDK client or options for the native core. Default: the standard AWS environment. */
    dynamodb?: DynamoDBSdkV3Client | DynamoDBOptions | object;
    /** Name of the lock table. */
    lockTable: string;
    /** Name of the table's partition key: a lock id is its value (the resource). */
    partitionKey: string;
    /** Name of the table's sort key, of type string (S). */
    sortKey: string;
    /** Written into the lock and queue items. Default: `dynamodb-lock-native@<version>_<user>@<host>`. */
    owner?: string;
    /** The lease of the lock and of queue entries, in ms (>= 2). */
    leaseDurationMs: number;
    /** Period of the heartbeats of the lock and of queue entries, in ms. Default: a third of the lease. */
    heartbeatPeriodMs?: number;
    /** The first pause of the waiter next in line between reads of the head of a holder in another process, in ms; each pause is this plus half the time it has watched the same holder, up to half the lease (others: at least every quarter lease, at most 250 ms, slowing the same way). Default: 10. */
    rereadPeriodMs?: number;
    /** Longest wait for one DynamoDB answer, in ms. Default: 5000. */
    requestTimeoutMs?: number;
    /** `"danger"` is emitted when this little of the lease is left without a heartbeat, in ms. Default: lease/3. */
    dangerMarginMs?: number;
    /** The attribute DynamoDB's TTL reads (Unix seconds), as for FailClosed and FailOpen; Fifo writes it on queue entries (never on head items). Default: `"ttl"`. */
    ttlAttribute?: string;
}

export interface FifoAcquireOptions {
    /** How long to wait for the turn, in ms: 0 fails at once if anyone is ahead, `Infinity` waits without end. Default: 60000. */
    waitMs?: number;
    /** Aborting it cancels the acquisition; an aborted acquisition leaves neither a lock nor a queue entry. */
    signal?: AbortSignal;
}

/**
 * A Semaphore: Fifo's options and `permits`. At most `permits` permits of an id are held at
 * once, granted in ticket order on Fifo's queue and table.
 */
export interface SemaphoreConfig extends FifoConfig {
    /** How many permits each id counts, an integer from 1 to 2^31 - 1. Every client of one id must give the same: the first acquisition writes it into the id's head, and a client with another number is refused (`code` `PermitsMismatch`). */
    permits: number;
}

/** A ReadWriteLock takes Fifo's options (and no `permits`). */
export type ReadWriteLockConfig = FifoConfig;

export interface SemaphoreAcquireOptions extends FifoAcquireOptions {
    /** How many of the id's permits to take, from 1 to the semaphore's `permits`. Default: 1. */
    permits?: number;
}

export interface ReadWriteLockAcquireOptions extends FifoAcquireOptions {
    /** `"shared"`: held with any other shared holders; `"exclusive"`: held alone. Default: `"exclusive"`. */
    mode?: "shared" | "exclusive";
}

/** A Fifo lock id: the resource's partition value. */
export type FifoLockId = string | number | Buffer | Uint8Array;

/** Data kept with a lock: a string, or bytes. */
export type LockData = string | Buffer | Uint8Array;

export interface AcquireOptions {
    /** Aborting it cancels the acquisition; an aborted acquisition leaves no lock behind. */
    signal?: AbortSignal;
    /** Stored with the lock (attribute `lockData`), readable by `getLock` from any client. */
    data?: LockData;
}

export interface UpdateOptions {
    /** The lock's new data; `undefined` removes it. */
    data: LockData | undefined;
}

/** A lock item as `getLock` reads it. */
export interface LockInfo {
    /** Who holds (or last held) it. */
    owner?: string;
    /** FailOpen and Fifo: the fencing token of the current (or last) holder. */
    fencingToken?: number;
    /** FailOpen and Fifo: the holder's lease in ms (1 once released). */
    leaseDurationMs?: number;
    /** The lock was released (FailOpen and Fifo keep released items). */
    released: boolean;
    /** The holder's data: a string, or a Buffer. */
    data?: string | Buffer;
    /** A lock this client holds now. */
    heldByThisClient: boolean;
    /** When this package last wrote the item (`lockWrittenUnixMs`, Unix ms, the writer's clock), for people; never used to decide anything. Undefined when unknown (the original library's writes drop it). */
    lastWrittenUnixMs?: number;
    /** The session the lock is held through (a client with `session: true`): its lease is the session's item's. */
    session?: string;
}

export interface CreateTableOptions {
    /** Where to create it: options for the native core or an AWS SDK client. Default: the standard AWS environment. */
    dynamodb?: DynamoDBSdkV3Client | DynamoDBOptions | object;
    /** Name of the lock table. */
    lockTable: string;
    /** Name of the partition key. */
    partitionKey: string;
    /** Type of the partition key. Default: `"S"`. */
    partitionKeyType?: "S" | "N" | "B";
    /** Name of a sort key (Fifo needs one, of type S). */
    sortKey?: string;
    /** Type of the sort key. Default: `"S"`. */
    sortKeyType?: "S" | "N" | "B";
    /** Enable TTL on this Number attribute. Default: TTL is left as it is. */
    ttlAttribute?: string;
    /** Default: `"PAY_PER_REQUEST"` (on-demand). */
    billingMode?: "PAY_PER_REQUEST" | "PROVISIONED";
    /** PROVISIONED: read capacity units. Default: 1. */
    readCapacityUnits?: number;
    /** PROVISIONED: write capacity units. Default: 1. */
    writeCapacityUnits?: number;
    /** Longest wait for the table to become ACTIVE, in ms. Default: 300000. */
    waitMs?: number;
}

export interface CreateTableResult {
    tableName: string;
    /** False when the table existed already with the same key schema. */
    created: boolean;
    ttlAttribute?: string;
}

/**
 * Creates a lock table (on-demand unless told), waits until it is ACTIVE and enables TTL on
 * `ttlAttribute` when given. A table that exists with the same key schema is success; another
 * key schema rejects with `code` `TableMismatch`, naming the difference.
 */
export declare function createTable(options: CreateTableOptions): Promise<CreateTableResult>;

/** Errors carry a `code`: `FailedToAcquireLock`, `FailedToReleaseLock`, `CorruptLockItem`, an AWS error name, ... */
export interface LockError extends Error {
    code: string;
    /** The DynamoDB error behind `FailedToAcquireLock` and `FailedToReleaseLock`. */
    originalError?: LockError;
    /** `FailedToAcquireLock`, `FailedToReleaseLock`: the lock id as given to `acquireLock`. */
    lockId?: unknown;
    /** `FailedToAcquireLock`, `FailedToReleaseLock`: the `owner` of the item that holds the lock, when known. */
    owner?: string;
    /** `CorruptLockItem`: the attribute the lock item holds in a form that is refused (`fencingToken`, `leaseDurationMs`, `guid`). */
    attribute?: string;
    /** The chain of causes behind the message (e.g. `CredentialsError`), or an abort's reason. */
    cause?: unknown;
    /**
     * A lock's `"error"` (a failed heartbeat): `false` when a retry will mend it (a retryable
     * failure before `"danger"` is due), `true` when the lease is at risk (no retry mends the
     * failure, or `"danger"` is due: `dangerMarginMs` left, or half the lease left at the
     * heartbeat's start if that comes later).
     */
    leaseAtRisk?: boolean;
    /** A lock's `"error"`: ms of lease left when the heartbeat failed (absent without a lease). */
    leaseRemainingMs?: number;
}

/** The events of a `Lock` and their arguments. */
export interface LockEvents {
    /** A heartbeat failed (at most once per heartbeat period for one cause); `error.leaseAtRisk` says whether a retry will mend it. */
    error: [error: LockError];
    /** The lease is about to lapse without a successful heartbeat. */
    danger: [info: { remainingMs: number }];
    /** The lock is no longer ours (`code`: `LockLost` or `LeaseExpired`). */
    lost: [error: LockError];
}

/** A listener of the lock event `E`. */
export type LockListener<E extends keyof LockEvents> = (...args: LockEvents[E]) => void;

/** An `acquireLock` callback: an error with a `code`, or the lock. */
export type AcquireCallback<L> = (error: LockError, lock: L) => void;

export declare class ValidationError extends Error {
    name: "ValidationError";
    details: Array<{ message: string; path: string[]; type: string; context: { label: string; key?: string; value?: unknown; limit?: number } }>;
}

/**
 * A held lock (an `EventEmitter` at run time). `T` is the type of `fencingToken`: `number`
 * for FailOpen and Fifo locks, `undefined` for FailClosed locks, which have none.
 */
export declare class Lock<T extends number | undefined = number> {
    /** FailOpen and Fifo: +1 on every acquisition of this lock id, never reset. FailClosed: undefined. */
    readonly fencingToken: T;
    /** Aborted, with the reason, when the lock is lost. */
    readonly signal: AbortSignal;
    /** True once the lock is known to be lost. */
    readonly lost: boolean;
    /**
     * Milliseconds left on the lease at the moment of the read, by this process's monotonic
     * clock, counted from when the last successful write was sent: `0` once the lock is lost,
     * lapsed or released; `Infinity` for a held FailClosed lock. Check it before each step of
     * the work done under the lock, and pass `fencingToken` to every write.
     */
    readonly leaseRemainingMs: number;
    /** FailClosed, FailOpen: the data stored with the lock, if any. */
    readonly data?: string | Buffer;
    release(callback: (error: LockError) => void): void;
    release(): Promise<void>;
    /** FailClosed, FailOpen: writes new data at once, if the lock is still ours (`code` `LockLost` if not). */
    update(options: UpdateOptions, callback: (error: LockError) => void): void;
    update(options: UpdateOptions): Promise<void>;
    /**
     * FailClosed, FailOpen: the `ConditionCheck` entry of a `TransactWriteItems` that holds
     * exactly while this acquisition holds the lock item (FailOpen: its fencing token, not
     * released; FailClosed: its `guid`). DocumentClient shape by default; `{ marshalled: true }`
     * for the low-level client. Throws `code` `LockLost` once the lock is released, lost or lapsed,
     * and `code` `StronglyConsistentGlobalTableLimit` on a global table with multi-Region strong
     * consistency, which has no transactions.
     */
    conditionCheck(options?: { marshalled?: false }): { ConditionCheck: ConditionCheck<any> };
    conditionCheck(options: { marshalled: true }): { ConditionCheck: ConditionCheck<{ [type: string]: string | Uint8Array }> };
    [Symbol.asyncDispose](): Promise<void>;

    /** `"error"`: a heartbeat failed; `"danger"`: the lease is about to lapse; `"lost"`: the lock is no longer ours. */
    on<E extends keyof LockEvents>(event: E, listener: LockListener<E>): this;
    once<E extends keyof LockEvents>(event: E, listener: LockListener<E>): this;
    addListener<E extends keyof LockEvents>(event: E, listener: LockListener<E>): this;
    prependListener<E extends keyof LockEvents>(event: E, listener: LockListener<E>): this;
    prependOnceListener<E extends keyof LockEvents>(event: E, listener: LockListener<E>): this;
    off<E extends keyof LockEvents>(event: E, listener: LockListener<E>): this;
    removeListener<E extends keyof LockEvents>(event: E, listener: LockListener<E>): this;
    removeAllListeners(event?: keyof LockEvents): this;
    listeners<E extends keyof LockEvents>(event: E): Array<LockListener<E>>;
    rawListeners<E extends keyof LockEvents>(event: E): Array<LockListener<E>>;
    listenerCount(event: keyof LockEvents): number;
    emit<E extends keyof LockEvents>(event: E, ...args: LockEvents[E]): boolean;
    eventNames(): Array<keyof LockEvents>;
    setMaxListeners(n: number): this;
    getMaxListeners(): number;
}

/** Where `listLocks`, `showLock`, `forceRelease` and `checkTable` look: the key comes from the table. */
export interface TableOptions {
    dynamodb?: DynamoDBOptions | DynamoDBSdkV3Client;
    lockTable: string;
}

/** One lock item, as a person reads it. */
export interface LockListing {
    /** The partition value; on a FailClosed or FailOpen table with a sort key, `{ [partitionKey]: v, [sortKey]: v }` (`showLock` and `forceRelease` take it as `id`). */
    id: string | number | Buffer | { [key: string]: string | number | Buffer };
    /** "Session": the item of a client's session (`session: true`), which keeps the locks that name it. */
    kind: "FailClosed" | "FailOpen" | "Fifo" | "Semaphore" | "ReadWriteLock" | "Session";
    /**
     * Judged when read, by this host's clock against the writer's: "held"; "expired" (a lease ran out: the holder's last recorded renewal is older than its lease, or the lock's session expired, ended or is gone); "released" (a Session: ended). FailClosed is held until its item is deleted.
     * A lock whose item records no renewal time reads as "held" (`renewedUnixMs` undefined).
     */
    state: "held" | "expired" | "released";
    owner?: string;
    fencingToken?: number;
    /** FailClosed: always (the item is the lock); FailOpen and Fifo: not released. A lapsed lease still counts as held here: see `state`. */
    held: boolean;
    /** The item's lease; for a lock held through a session, a placeholder: the session's lease is `sessionLeaseDurationMs`. */
    leaseDurationMs?: number;
    /** The item's `guid` in hex: a FailOpen holder that heartbeats changes it every period. */
    guid?: string;
    lockAcquiredTimeUnixMs?: number;
    /** When a holder of this package last wrote the item (`lockWrittenUnixMs`, Unix ms, the writer's clock), for people. Undefined when unknown (the original library's writes drop it). Waiters' writes leave it alone. */
    lastWrittenUnixMs?: number;
    /** FailOpen, Fifo, Session, held: the holder's last recorded renewal (the later of `lastWrittenUnixMs` and `lockAcquiredTimeUnixMs`), and how long before the read that was. */
    renewedUnixMs?: number;
    silentMs?: number;
    /** The first waiter in line, while its mark is fresh (younger than the lease): its random id, its owner, and when it last marked the item. */
    waiter?: string;
    waiterOwner?: string;
    waiterMarkedUnixMs?: number;
    /** The session the lock is held through, if any: its lease is the session's item's. */
    session?: string;
    /** A lock held through a session, unreleased: whether the session is live, expired, ended or its item is gone; its last renewal, silence and lease. */
    sessionState?: "live" | "expired" | "ended" | "gone";
    sessionRenewedUnixMs?: number;
    sessionSilentMs?: number;
    sessionLeaseDurationMs?: number;
    /** A Session item: its id (what its locks name in `session`); `listLocks`: how many unreleased locks name it. */
    sessionId?: string;
    locks?: number;
    /** Fifo: the resource's queue entries whose waiters still renew them. */
    waiters?: number;
    /** Fifo, `showLock`: the resource's queue, in order. */
    queue?: FifoQueueEntry[];
    /** Semaphore: the permits its id counts, and those its holders hold together. */
    permits?: number;
    permitsHeld?: number;
    /** Semaphore and ReadWriteLock: the holders on the head (its `state` is "held" while any holder is, "expired" once every one is, "released" with none). */
    holders?: SemaphoreHolder[];
}

/** A holder of a Semaphore's or ReadWriteLock's permits as `showLock` and `listLocks` list it. */
export interface SemaphoreHolder {
    /** The hex of the `guid` it was granted with: its attribute is `holder.<key>`. */
    key: string;
    /** The hex of the `guid` its last heartbeat wrote. */
    guid: string;
    owner: string;
    /** Semaphore: the permits it holds. */
    permits?: number;
    /** ReadWriteLock: its hold. */
    mode?: "shared" | "exclusive";
    leaseDurationMs: number;
    /** Its last heartbeat (Unix ms, its writer's clock), and how long before the read that was. */
    renewedUnixMs?: number;
    silentMs?: number;
    /** "expired": not renewed for longer than its lease; a waiter that needs its permits removes it. */
    state: "held" | "expired";
}

/** A Fifo queue entry as `showLock` lists it. */
export interface FifoQueueEntry {
    position: number;
    owner?: string;
    /** The fencing token its waiter is granted with. */
    ticket?: number;
    /** A Semaphore's waiter, when its entry records it: the permits it asks for (a ReadWriteLock's: `mode`). */
    permits?: number;
    mode?: "shared" | "exclusive";
    /** "waiting": renewed within its lease; "expired": not renewed for longer than its lease; "finished": granted or given up. */
    state: "waiting" | "expired" | "finished";
    leaseDurationMs?: number;
    renewedUnixMs?: number;
    silentMs?: number;
}

/** What `pruneLocks` deleted (or, with `dryRun`, would delete), what it left because it changed since it was read, and how many released locks it kept. */
export interface PruneResult {
    deleted: LockListing[];
    changed: LockListing[];
    kept: number;
}

/** Every lock in a table, sorted by id (Fifo queue entries are counted in their resource's `waiters`). */
export declare function listLocks(options: TableOptions): AsyncIterable<LockListing>;
/** One lock item as one consistent read finds it; `sortValue` on a table with a sort key (Fifo: the head when omitted). */
export declare function showLock(options: TableOptions & { id: LockListing["id"]; sortValue?: string | number | Buffer }): Promise<LockListing | null>;
/** Frees a dead holder's lock on the version read (`code` `LockChanged` if it changed meanwhile). */
/**
 * Ends a lock's hold on purpose. By default it revokes: the holder hears "lost" at its next
 * heartbeat or session renewal, and the lock is free `freeAfterMs` after the revocation; a
 * FailClosed lock is refused (`HolderCannotBeTold`): its holder cannot be told; so is a
 * Semaphore's or ReadWriteLock's id (`NotSupported`): a waiter reclaims a dead holder's
 * permits. `now: true` frees it at once, and a live holder may still be writing (`warning`).
 */
export declare function forceRelease(options: TableOptions & { id: string | number | Buffer; sortValue?: string | number | Buffer; now?: boolean }): Promise<{ action: "revoked" | "deleted" | "released" | "already-free" | "absent"; lock: LockListing | null; freeAfterMs?: number; warning?: string }>;
/**
 * Deletes the items of ended sessions and, with `resetTokens`, released FailOpen items and released Fifo heads without queue entries (their fencing tokens start again for the next holder), each on the version read. FailClosed items are never deleted.
 */
export declare function pruneLocks(options: TableOptions & { dryRun?: boolean; resetTokens?: boolean }): Promise<PruneResult>;
/** Whether a table can keep a lock: key schema, TTL, billing, global-table mode, and the problems found. */
export declare function checkTable(options: TableOptions & { partitionKey?: string; sortKey?: string }): Promise<{
    table: string;
    status: string;
    partitionKey: { name: string; type: "S" | "N" | "B" };
    sortKey?: { name: string; type: "S" | "N" | "B" };
    billingMode: string;
    ttl: { status: string; attribute?: string; error?: string };
    global?: { replicas: string[]; consistency: "EVENTUAL" | "STRONG" };
    problems: string[];
    /** What this table cannot do that locks can use (a global table with multi-Region strong consistency: no TTL, no transactions). */
    limits: string[];
    ok: boolean;
}>;

/** A `TransactWriteItems` condition on a lock item (`lock.conditionCheck()`). */
export interface ConditionCheck<V> {
    TableName: string;
    Key: { [attribute: string]: V };
    ConditionExpression: string;
    ExpressionAttributeNames: { [name: string]: string };
    ExpressionAttributeValues: { [name: string]: V };
}

export interface CloseOptions {
    /** Release every held lock (each on its own); otherwise their heartbeats stop and leases lapse. Default: false. */
    releaseLocks?: boolean;
}

/** What `close()` did with one held lock. */
export interface CloseOutcome {
    /** The id the lock was acquired with. */
    id: unknown;
    fencingToken: number | undefined;
    /** True if released; false if abandoned (no `releaseLocks`) or if its release failed. */
    released: boolean;
    /** Why the release failed. */
    error?: LockError;
}

/** Requests of one DynamoDB operation by outcome. */
export interface RequestCounts {
    ok: number;
    /** The write's condition did not hold. */
    conditionFailed: number;
    /** Throughput exceeded, throttled, HTTP 429. */
    throttled: number;
    /** Any other failure, timeouts included. */
    error: number;
}

/**
 * A histogram of one latency since the client was made: `counts[i]` counts the samples above
 * `boundsMs[i - 1]` and at most `boundsMs[i]`; the last count, those above the last bound
 * (`+Inf`). The bounds are the same for every client, so counts add up across a fleet.
 */
export interface LatencyHistogram {
    /** 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000. */
    boundsMs: number[];
    /** One more than `boundsMs`. */
    counts: number[];
    /** The sum of every sample, in ms. */
    sumMs: number;
}

/** One latency: percentiles of its latest 1024 samples, and a histogram of them all. */
export interface LatencyMetrics {
    count: number;
    p50Ms: number;
    p99Ms: number;
    histogram: LatencyHistogram;
}

/** Counters (since the client was made) and gauges (now) of one client. */
export interface Metrics {
    kind: "FailClosed" | "FailOpen" | "Fifo";
    acquisitions: {
        succeeded: number;
        failed: number;
        /** Failed acquisitions by error `code`. */
        byCode: { [code: string]: number };
        /** Acquisitions that found the lock held (FailClosed, FailOpen): the `waiting` channel. */
        waited: number;
        /** Of those, the ones granted the lock: the `handed-over` channel. */
        handedOver: number;
        /** Gauge: acquisitions under way now (started, neither granted nor failed yet). */
        pending: number;
        /** Gauge: of those, the ones that found the lock held and wait for it now. */
        waiting: number;
    };
    /** Time from `acquireLock` to the lock, of successful acquisitions. */
    waits: LatencyMetrics;
    /** Time from the lock to its release or loss, of released and lost locks. */
    holds: LatencyMetrics;
    releases: { succeeded: number; failed: number };
    /**
     * Heartbeat writes sent (a heartbeat's retries and the writes sent beside a slow one
     * included), those of them that were retries, and failed writes (each failure, and each
     * write still unanswered after half of what was left of the lease). `"error"` events are
     * fewer: at most one per heartbeat period for one cause.
     */
    heartbeats: { sent: number; retried: number; failed: number };
    /** Locks held now; locks lost since the client was made. */
    locks: { held: number; lost: number };
    /** Requests sent, by DynamoDB operation (`GetItem`, `PutItem`, `UpdateItem`, `DeleteItem`); with a user `dynamodb` object, its `get`, `put` and `delete` calls. */
    requests: { [operation: string]: RequestCounts };
    /**
     * Requests the lock protocol sent (every attempt), by why: taking locks (`acquiring`),
     * waiting for held ones (re-reads, the first-in-line mark, a Fifo waiter's reads and queue
     * upkeep), keeping held ones (`heartbeats`, a Fifo queue entry's too) and giving them up
     * (`releasing`, hand-overs included). Data updates, `getLock` and table administration are
     * not among them.
     */
    requestsByPurpose: { acquiring: number; waiting: number; heartbeats: number; releasing: number };
    /** Requests answered with a throttle, all operations. */
    throttles: number;
}

/** Message of the `dynamodb-lock-native:acquired` diagnostics channel. */
export interface AcquiredMessage {
    id: unknown;
    kind: "FailClosed" | "FailOpen" | "Fifo";
    fencingToken: number | undefined;
    /** From `acquireLock` to the lock, in ms. */
    waitMs: number;
}

/** Message of the `dynamodb-lock-native:waiting` diagnostics channel: an acquisition found the lock held. */
export interface WaitingMessage {
    id: unknown;
    kind: "FailClosed" | "FailOpen" | "Fifo";
    /** From `acquireLock` to finding the lock held, in ms. */
    waitMs: number;
}

/** Message of the `dynamodb-lock-native:handed-over` diagnostics channel: an acquisition that waited was granted the lock. */
export interface HandedOverMessage {
    id: unknown;
    kind: "FailClosed" | "FailOpen" | "Fifo";
    fencingToken: number | undefined;
    /** From `acquireLock` to the lock, in ms. */
    waitMs: number;
    /** From the `waiting` message to the lock, in ms. */
    waitedMs: number;
}

/** Message of the `released`, `heartbeat-failed` and `lost` diagnostics channels. */
export interface LockMessage {
    id: unknown;
    kind: "FailClosed" | "FailOpen" | "Fifo";
    fencingToken: number | undefined;
    /** Since the lock was acquired, in ms. */
    heldMs: number;
    /** `heartbeat-failed` and `lost`: the error. */
    error?: LockError;
}

export interface CampaignOptions {
    /** Aborting it ends the campaign: a leader is deposed and releases the lock. */
    signal?: AbortSignal;
}

/** This process leads: `term` is the lock's fencing token, higher than every earlier leader's. */
export interface Election {
    term: number;
    /** Aborted when this leadership ends; its `reason` is an error with `code: "Deposed"` and `reason`. */
    signal: AbortSignal;
}

/** Why a leadership ended. */
export interface Deposition {
    term: number;
    /** `"danger"`: the lease nears its end without a heartbeat; `"lost"`: the lock is no longer ours; `"resigned"`: `resign()`, the signal or `close()`. */
    reason: "danger" | "lost" | "resigned";
    /** `"danger"`: lease left, in ms. */
    remainingMs?: number;
    /** `"lost"`: why. */
    error?: LockError;
}

/**
 * A campaign for leadership: it acquires the lock, leads while it holds it, and campaigns again
 * when it loses it, until `resign()`, its signal or `close()`. Iterating it yields every
 * election; leaving the loop early resigns.
 */
export declare class Campaign extends EventEmitter implements AsyncIterable<Election> {
    /** The current leadership, or undefined while not leading. */
    readonly leader: Election | undefined;
    /** True until the campaign has ended. */
    readonly active: boolean;
    /** Settles when the campaign has ended (and its lock is released). */
    readonly done: Promise<void>;
    /** Gives up leadership, releasing the lock, and stops campaigning. */
    resign(): Promise<void>;
    resign(callback: () => void): void;
    [Symbol.asyncIterator](): AsyncIterator<Election>;

    on(event: "elected", listener: (election: Election) => void): this;
    on(event: "deposed", listener: (deposition: Deposition) => void): this;
    /** An acquisition failed for another reason than a rival (an outage); the campaign goes on. */
    on(event: "error", listener: (error: LockError) => void): this;
    on(event: "end", listener: () => void): this;
    on(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** What every client has besides `acquireLock`. */
export interface ClientControl {
    /**
     * Closes the client: pending acquisitions fail with `ClientClosed`, heartbeats stop, and with
     * `releaseLocks` every held lock is released. Later acquisitions fail with `ClientClosed`.
     */
    close(options: CloseOptions, callback: (error: LockError | undefined, outcomes: CloseOutcome[]) => void): void;
    close(callback: (error: LockError | undefined, outcomes: CloseOutcome[]) => void): void;
    close(options?: CloseOptions): Promise<CloseOutcome[]>;
    /** A snapshot of the client's counters and gauges. */
    metrics(): Metrics;
}

/** A FailClosed lock: no lease, so no fencing token. */
export type FailClosedLock = Lock<undefined>;

/**
 * Permits of a Semaphore's id: `fencingToken` is the grant's ticket, unique per id and rising
 * in grant order. `update()` rejects and `conditionCheck()` throws: a semaphore's hold has no
 * data and shares its item with the other holders.
 */
export interface SemaphoreLock extends Lock<number> {
    /** The permits this hold takes (a ReadWriteLock's: 1 shared, 2^40 exclusive). */
    readonly permits: number;
}

/** A ReadWriteLock's hold, shared or exclusive. */
export interface ReadWriteHold extends SemaphoreLock {
    readonly mode: "shared" | "exclusive";
}

export type LockId<K extends string | number = string | number> = K | Buffer | Uint8Array | { [key: string]: string | number | Buffer | Uint8Array };

/**
 * What FailClosed and FailOpen clients share. A type only: the module exports no `LockClient`
 * value (construct `FailClosed` or `FailOpen`).
 */
export interface LockClient<PartitionTableKeyType extends string | number = string | number, L = Lock<number | undefined>> extends ClientControl {
    close(options: CloseOptions, callback: (error: LockError | undefined, outcomes: CloseOutcome[]) => void): void;
    close(callback: (error: LockError | undefined, outcomes: CloseOutcome[]) => void): void;
    close(options?: CloseOptions): Promise<CloseOutcome[]>;
    metrics(): Metrics;
    acquireLock(id: LockId<PartitionTableKeyType>, callback: AcquireCallback<L>): void;
    acquireLock(id: LockId<PartitionTableKeyType>, options: AcquireOptions, callback: AcquireCallback<L>): void;
    acquireLock(id: LockId<PartitionTableKeyType>, options?: AcquireOptions): Promise<L>;
    /** The lock item as one consistent read finds it (no write), or `null` if there is none. */
    getLock(id: LockId<PartitionTableKeyType>, callback: (error: LockError, info: LockInfo | null) => void): void;
    getLock(id: LockId<PartitionTableKeyType>): Promise<LockInfo | null>;
}

/** A lock without a lease: a crashed holder's lock stays held. Callable with or without `new`. */
export interface FailClosed<PartitionTableKeyType extends string | number = string | number> extends LockClient<PartitionTableKeyType, FailClosedLock> {}
export declare const FailClosed: {
    new <PartitionTableKeyType extends string | number = string | number>(config: FailClosedConfig): FailClosed<PartitionTableKeyType>;
    <PartitionTableKeyType extends string | number = string | number>(config: FailClosedConfig): FailClosed<PartitionTableKeyType>;
    readonly prototype: FailClosed<any>;
};

/** A lock with a lease, renewed by heartbeats. Callable with or without `new`. */
export interface FailOpen<PartitionTableKeyType extends string | number = string | number> extends LockClient<PartitionTableKeyType, Lock> {
    /** Leader election over the lock `id`; needs `heartbeatPeriodMs`. */
    campaign(id: LockId<PartitionTableKeyType>, options?: CampaignOptions): Campaign;
}
export declare const FailOpen: {
    new <PartitionTableKeyType extends string | number = string | number>(config: FailOpenConfig): FailOpen<PartitionTableKeyType>;
    <PartitionTableKeyType extends string | number = string | number>(config: FailOpenConfig): FailOpen<PartitionTableKeyType>;
    readonly prototype: FailOpen<any>;
};

/**
 * A fair lock: each resource is granted in the order of the waiters' tickets, and the ticket
 * is `lock.fencingToken`. An array of ids acquires every resource with one ticket, without
 * deadlock whatever the order. Callable with or without `new`.
 */
export interface Fifo extends ClientControl {
    /** Leader election over the resource `id`: candidates are elected in the order they campaigned. */
    campaign(id: FifoLockId, options?: CampaignOptions): Campaign;
    acquireLock(id: FifoLockId | FifoLockId[], callback: AcquireCallback<Lock>): void;
    acquireLock(id: FifoLockId | FifoLockId[], options: FifoAcquireOptions, callback: AcquireCallback<Lock>): void;
    acquireLock(id: FifoLockId | FifoLockId[], options?: FifoAcquireOptions): Promise<Lock>;
    /** The resource's lock (its head item) as one consistent read finds it, or `null`. */
    getLock(id: FifoLockId, callback: (error: LockError, info: LockInfo | null) => void): void;
    getLock(id: FifoLockId): Promise<LockInfo | null>;
}
export declare const Fifo: {
    new (config: FifoConfig): Fifo;
    (config: FifoConfig): Fifo;
    readonly prototype: Fifo;
};

/**
 * A counting semaphore on Fifo's queue and table: at most `permits` permits of an id held at
 * once, each acquisition taking one or more, granted in ticket order (a waiting request holds
 * back later ones, so a large one is not starved). One id per acquisition. A crashed holder's
 * permits go to the waiter next in line a lease after it last saw the holder's heartbeat.
 * Callable with or without `new`.
 */
export interface Semaphore extends ClientControl {
    acquireLock(id: FifoLockId, callback: AcquireCallback<SemaphoreLock>): void;
    acquireLock(id: FifoLockId, options: SemaphoreAcquireOptions, callback: AcquireCallback<SemaphoreLock>): void;
    acquireLock(id: FifoLockId, options?: SemaphoreAcquireOptions): Promise<SemaphoreLock>;
    /** The id's head as one consistent read finds it, or `null`: `released` is false while any holder is on it, `heldByThisClient` true when one of them is this client's (`showLock` lists the holders). */
    getLock(id: FifoLockId, callback: (error: LockError, info: LockInfo | null) => void): void;
    getLock(id: FifoLockId): Promise<LockInfo | null>;
}
export declare const Semaphore: {
    new (config: SemaphoreConfig): Semaphore;
    (config: SemaphoreConfig): Semaphore;
    readonly prototype: Semaphore;
};

/**
 * Shared and exclusive holds on Fifo's queue and table: any number of shared holders or one
 * exclusive holder per id, granted in ticket order (a waiting exclusive request holds back
 * later shared ones, so writers are not starved). Callable with or without `new`.
 */
export interface ReadWriteLock extends ClientControl {
    acquireLock(id: FifoLockId, callback: AcquireCallback<ReadWriteHold>): void;
    acquireLock(id: FifoLockId, options: ReadWriteLockAcquireOptions, callback: AcquireCallback<ReadWriteHold>): void;
    acquireLock(id: FifoLockId, options?: ReadWriteLockAcquireOptions): Promise<ReadWriteHold>;
    /** The id's head as one consistent read finds it, or `null`, as `Semaphore.getLock` reads it. */
    getLock(id: FifoLockId, callback: (error: LockError, info: LockInfo | null) => void): void;
    getLock(id: FifoLockId): Promise<LockInfo | null>;
}
export declare const ReadWriteLock: {
    new (config: ReadWriteLockConfig): ReadWriteLock;
    (config: ReadWriteLockConfig): ReadWriteLock;
    readonly prototype: ReadWriteLock;
};

/**
 * The module as one object, for `import DynamoDBLockClient from "dynamodb-lock-native"` (with
 * or without `esModuleInterop`) and `require("dynamodb-lock-native").default`. A namespace, so
 * that its types are named through it too (`DynamoDBLockClient.FailOpen`,
 * `DynamoDBLockClient.Lock`), as code written against `@types/dynamodb-lock-client` names them.
 */
declare namespace dynamodbLockNative {
    export import AcquireCallback = self.AcquireCallback;
    export import AcquireOptions = self.AcquireOptions;
    export import AcquiredMessage = self.AcquiredMessage;
    export import Campaign = self.Campaign;
    export import CampaignOptions = self.CampaignOptions;
    export import ClientControl = self.ClientControl;
    export import CloseOptions = self.CloseOptions;
    export import TableOptions = self.TableOptions;
    export import LockListing = self.LockListing;
    export import listLocks = self.listLocks;
    export import showLock = self.showLock;
    export import forceRelease = self.forceRelease;
    export import checkTable = self.checkTable;
    export import pruneLocks = self.pruneLocks;
    export import PruneResult = self.PruneResult;
    export import FifoQueueEntry = self.FifoQueueEntry;
    export import ConditionCheck = self.ConditionCheck;
    export import CloseOutcome = self.CloseOutcome;
    export import CreateTableOptions = self.CreateTableOptions;
    export import CreateTableResult = self.CreateTableResult;
    export import Deposition = self.Deposition;
    export import DynamoDBInput = self.DynamoDBInput;
    export import DynamoDBObject = self.DynamoDBObject;
    export import DynamoDBOptions = self.DynamoDBOptions;
    export import DynamoDBSdkV3Client = self.DynamoDBSdkV3Client;
    export import Election = self.Election;
    export import FailClosed = self.FailClosed;
    export import FailClosedConfig = self.FailClosedConfig;
    export import FailClosedLock = self.FailClosedLock;
    export import FailOpen = self.FailOpen;
    export import FailOpenConfig = self.FailOpenConfig;
    export import Fifo = self.Fifo;
    export import FifoAcquireOptions = self.FifoAcquireOptions;
    export import FifoConfig = self.FifoConfig;
    export import FifoLockId = self.FifoLockId;
    export import ReadWriteHold = self.ReadWriteHold;
    export import ReadWriteLock = self.ReadWriteLock;
    export import ReadWriteLockAcquireOptions = self.ReadWriteLockAcquireOptions;
    export import ReadWriteLockConfig = self.ReadWriteLockConfig;
    export import Semaphore = self.Semaphore;
    export import SemaphoreAcquireOptions = self.SemaphoreAcquireOptions;
    export import SemaphoreConfig = self.SemaphoreConfig;
    export import SemaphoreHolder = self.SemaphoreHolder;
    export import SemaphoreLock = self.SemaphoreLock;
    export import Lock = self.Lock;
    export import LockClient = self.LockClient;
    export import LockData = self.LockData;
    export import HandedOverMessage = self.HandedOverMessage;
    export import LatencyHistogram = self.LatencyHistogram;
    export import LatencyMetrics = self.LatencyMetrics;
    export import LockError = self.LockError;
    export import LockEvents = self.LockEvents;
    export import LockId = self.LockId;
    export import LockInfo = self.LockInfo;
    export import LockListener = self.LockListener;
    export import LockMessage = self.LockMessage;
    export import Metrics = self.Metrics;
    export import RequestCounts = self.RequestCounts;
    export import StaticCredentials = self.StaticCredentials;
    export import UpdateOptions = self.UpdateOptions;
    export import ValidationError = self.ValidationError;
    export import WaitingMessage = self.WaitingMessage;
    export import createTable = self.createTable;
}
export default dynamodbLockNative;
