//! Sessions under paused time, over the in-memory store.
