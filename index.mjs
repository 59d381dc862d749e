// ES module entry: the same classes as the CommonJS entry.
import lockClient from "./index.js";

export const { FailClosed, FailOpen, Lock, ValidationError } = lockClient;
export default lockClient;
