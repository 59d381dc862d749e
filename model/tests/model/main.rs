//! The model checker's tests, one binary so that they share the machine's cores: the
//! explorer and the lease-timing model (`bounded`), each model of clients with its properties
//! and broken variants, and the simulator.

mod bounded;
mod fifo_machines;
mod machines;
mod session;
