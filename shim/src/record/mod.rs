//! Floor 2, the hot path: what an intercepted call touches to record itself. One thread-local block
//! per thread ([`thread`]), taken once per call and handed to the per-thread buffers ([`recorder`]),
//! the call counters ([`call_counters`]), the correlation ids ([`correlation`]) and the reentrancy
//! fence ([`reentrancy`]); names become small ids once ([`interning`]). No lock, no allocation, no
//! syscall after a thread's first call. The only import circle of the crate is here, on purpose:
//! `thread` holds the TLS block whose fields `recorder` and `call_counters` define.

pub mod call_counters;
pub mod correlation;
pub mod interning;
pub mod launch;
pub mod recorder;
pub mod reentrancy;
pub mod thread;
