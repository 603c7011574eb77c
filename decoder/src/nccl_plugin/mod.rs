//! What NCCL's profiler plugin (libtprof.so as `NCCL_PROFILER_PLUGIN`) recorded: communicators as
//! NCCL initialised them, every collective and point-to-point task with the algorithm, protocol and
//! channels NCCL chose, and the proxy operations (network sends and receives per channel and peer).
//! [`model`] holds the decoded events, [`table`] the per-communicator view the summary prints.

pub mod analysis;
pub mod model;
pub mod render;
pub mod table;
pub mod topology;

pub use model::{NcclComm, NcclPluginEvent, NcclProxyOp, NcclTask};
pub use topology::{NcclSetting, TopoGpu, TopoGpuPath, TopoNic};
