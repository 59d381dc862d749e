//! Exhaustive model checking of the dynamodb-lock-native lock protocol: `explore` visits every
//! reachable state of a model; `ops` is the store's conditional operations; `lock` is
//! FailClosed, FailOpen and Fifo clients over them; `run` holds the configurations and the report.

pub mod explore;
pub mod lock;
pub mod ops;
pub mod run;
