// ES module entry: the same classes as the CommonJS entry.
import lockClient from "./index.js";

export const { FailClosed, FailOpen, Fifo, Semaphore, ReadWriteLock, Lock, ValidationError, createTable, Campaign, listLocks, showLock, forceRelease, checkTable, pruneLocks } = lockClient;
export default lockClient;
