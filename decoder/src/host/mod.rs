//! Host resources beside the GPU: the shim's host samples (`HostSample` / `HostEntity` records)
//! as series ([`series`]), the quantities the summary, the diagnoses and the report use
//! ([`usage`]: CPU cores busy for the main process, its main thread and its workers, RSS, I/O,
//! network, machine CPU and memory), and the counter tracks of the exports ([`counters`]).

pub mod counters;
pub mod events;
pub mod series;
pub mod usage;

pub use events::{HostEntity, HostSample};
pub use series::HostSeries;
pub use usage::{HostStep, HostUsage, RankHost};
