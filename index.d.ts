/// <reference types="node" />

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
    /** How often the first waiter in line re-reads a held lock, in ms. Default: 10 (FailOpen: lease/4 if shorter). */
    rereadPeriodMs?: number;
    /** `"sdk"`: the native core does the I/O; `"object"`: call `dynamodb.get/put/delete`. Default: `"auto"`. */
    transport?: "auto" | "sdk" | "object";
}

export interface FailClosedConfig extends GenericConfig {
    /** Pause between attempts on a held lock, in ms. */
    acquirePeriodMs: number;
}

export interface FailOpenConfig extends GenericConfig {
    /** Period of heartbeats that renew the lease, in ms. No heartbeats without it. */
    heartbeatPeriodMs?: number;
    /** The lease: how long after its last heartbeat a lock may be taken over, in ms. */
    leaseDurationMs: number;
    /** Let the holder's `lockAcquiredTimeUnixMs` shorten a waiter's wait. Default: false. */
    trustLocalTime?: boolean;
    /** `"danger"` is emitted when this little of the lease is left without a heartbeat, in ms. Default: lease/3. */
    dangerMarginMs?: number;
    /** Cap on this client's heartbeat requests per second. Default: none. */
    maxHeartbeatsPerSecond?: number;
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
    /** How often the waiter next in line reads the head of a holder in another process, in ms (others: every quarter lease, at most 250 ms). Default: 10. */
    rereadPeriodMs?: number;
    /** Longest wait for one DynamoDB answer, in ms. Default: 5000. */
    requestTimeoutMs?: number;
    /** `"danger"` is emitted when this little of the lease is left without a heartbeat, in ms. Default: lease/3. */
    dangerMarginMs?: number;
    /** The attribute DynamoDB's TTL reads (Unix seconds) on queue entries. Default: `"ttl"`. */
    ttlAttribute?: string;
}

export interface FifoAcquireOptions {
    /** How long to wait for the turn, in ms: 0 fails at once if anyone is ahead, `Infinity` waits without end. Default: 60000. */
    waitMs?: number;
    /** Aborting it cancels the acquisition; an aborted acquisition leaves neither a lock nor a queue entry. */
    signal?: AbortSignal;
}

/** A Fifo lock id: the resource's partition value. */
export type FifoLockId = string | number | Buffer | Uint8Array;

export interface AcquireOptions {
    /** Aborting it cancels the acquisition; an aborted acquisition leaves no lock behind. */
    signal?: AbortSignal;
}

/** Errors carry a `code`: `FailedToAcquireLock`, `FailedToReleaseLock`, an AWS error name, ... */
export interface LockError extends Error {
    code: string;
    /** The DynamoDB error behind `FailedToAcquireLock` and `FailedToReleaseLock`. */
    originalError?: LockError;
    /** `FailedToAcquireLock`, `FailedToReleaseLock`: the lock id as given to `acquireLock`. */
    lockId?: unknown;
    /** `FailedToAcquireLock`, `FailedToReleaseLock`: the `owner` of the item that holds the lock, when known. */
    owner?: string;
    /** The chain of causes behind the message (e.g. `CredentialsError`), or an abort's reason. */
    cause?: unknown;
}

/** The events of a `Lock` and their arguments. */
export interface LockEvents {
    /** A heartbeat failed (at most once per heartbeat period for one cause). */
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
    release(callback: (error: LockError) => void): void;
    release(): Promise<void>;
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
    listenerCount(event: keyof LockEvents): number;
}

/** A FailClosed lock: no lease, so no fencing token. */
export type FailClosedLock = Lock<undefined>;

export type LockId<K extends string | number = string | number> = K | Buffer | Uint8Array | { [key: string]: string | number | Buffer | Uint8Array };

export declare class LockClient<PartitionTableKeyType extends string | number = string | number, L = Lock<number | undefined>> {
    acquireLock(id: LockId<PartitionTableKeyType>, callback: AcquireCallback<L>): void;
    acquireLock(id: LockId<PartitionTableKeyType>, options: AcquireOptions, callback: AcquireCallback<L>): void;
    acquireLock(id: LockId<PartitionTableKeyType>, options?: AcquireOptions): Promise<L>;
}

/** A lock without a lease: a crashed holder's lock stays held. Callable with or without `new`. */
export interface FailClosed<PartitionTableKeyType extends string | number = string | number> extends LockClient<PartitionTableKeyType, FailClosedLock> {}
export declare const FailClosed: {
    new <PartitionTableKeyType extends string | number = string | number>(config: FailClosedConfig): FailClosed<PartitionTableKeyType>;
    <PartitionTableKeyType extends string | number = string | number>(config: FailClosedConfig): FailClosed<PartitionTableKeyType>;
    readonly prototype: FailClosed<any>;
};

/** A lock with a lease, renewed by heartbeats. Callable with or without `new`. */
export interface FailOpen<PartitionTableKeyType extends string | number = string | number> extends LockClient<PartitionTableKeyType, Lock> {}
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
export interface Fifo {
    acquireLock(id: FifoLockId | FifoLockId[], callback: AcquireCallback<Lock>): void;
    acquireLock(id: FifoLockId | FifoLockId[], options: FifoAcquireOptions, callback: AcquireCallback<Lock>): void;
    acquireLock(id: FifoLockId | FifoLockId[], options?: FifoAcquireOptions): Promise<Lock>;
}
export declare const Fifo: {
    new (config: FifoConfig): Fifo;
    (config: FifoConfig): Fifo;
    readonly prototype: Fifo;
};

/**
 * The module as one object, for `import DynamoDBLockClient from "dynamodb-lock-native"` (with
 * or without `esModuleInterop`) and `require("dynamodb-lock-native").default`.
 */
declare const dynamodbLockNative: {
    FailClosed: typeof FailClosed;
    FailOpen: typeof FailOpen;
    Fifo: typeof Fifo;
    Lock: typeof Lock;
    ValidationError: typeof ValidationError;
};
export default dynamodbLockNative;
