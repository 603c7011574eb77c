//! What one rank amounted to, in the shape the rules need: per-step aggregates and short lists
//! (collectives, sync call names, memory failures), never every event.

use serde::Serialize;

use crate::model::{CollOp, Ns, Origin, ProcId};

/// Where the wall time of a window went (ns). The parts add up to the window's length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Split {
    /// GPU computing (kernels that are not communication).
    pub compute_ns: Ns,
    /// Communication kernels not overlapped by compute (transfer time).
    pub comm_ns: Ns,
    /// Part of the exposed communication spent waiting for a late rank.
    pub wait_ns: Ns,
    /// Copies / memsets not overlapped by kernels.
    pub memcpy_ns: Ns,
    /// GPU idle at step starts while the host thread was outside CUDA (input pipeline).
    pub data_ns: Ns,
    /// GPU idle between kernels while the host was launching (or in CUDA calls).
    pub launch_ns: Ns,
    /// GPU idle after the host blocked in a synchronization (the queue ran dry).
    pub sync_ns: Ns,
    /// GPU idle for no reason above (host work mid-step, the end of the run, a hang).
    pub idle_ns: Ns,
}

impl Split {
    pub fn total(&self) -> Ns {
        self.compute_ns
            + self.comm_ns
            + self.wait_ns
            + self.memcpy_ns
            + self.data_ns
            + self.launch_ns
            + self.sync_ns
            + self.idle_ns
    }
    pub fn add(&mut self, o: &Split) {
        self.compute_ns += o.compute_ns;
        self.comm_ns += o.comm_ns;
        self.wait_ns += o.wait_ns;
        self.memcpy_ns += o.memcpy_ns;
        self.data_ns += o.data_ns;
        self.launch_ns += o.launch_ns;
        self.sync_ns += o.sync_ns;
        self.idle_ns += o.idle_ns;
    }
}

/// One step of one rank. Host times are the step's range (or markers); GPU times cover the work
/// launched inside it (the host may run ahead of the GPU).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepFacts {
    pub index: u64,
    pub host_start: Ns,
    pub host_end: Ns,
    /// Start of the first GPU operation launched in this step.
    pub gpu_start: Option<Ns>,
    /// Start of the next step's first GPU operation (or the end of the window).
    pub gpu_end: Ns,
    /// Where the step's GPU window went (idle gaps are owned by the step whose work ended them).
    pub split: Split,
    /// Kernel launch calls on the host.
    pub launches: u64,
    /// Compute kernels.
    pub kernels: u64,
    pub median_kernel_ns: Ns,
    /// Median idle gap between consecutive compute kernels of the step.
    pub median_gap_ns: Ns,
    /// Synchronizing calls (stream / device / event sync, synchronous copies) on the host.
    pub sync_calls: u64,
    pub sync_blocked_ns: Ns,
}

impl StepFacts {
    pub fn gpu_window_ns(&self) -> Ns {
        self.gpu_start.map(|s| self.gpu_end.saturating_sub(s)).unwrap_or(0)
    }
}

/// One data-moving collective of one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollFact {
    /// Communicator id (same on every rank; 0 = unknown, e.g. imported traces).
    pub comm: u64,
    pub seq: u64,
    #[serde(serialize_with = "op_name")]
    pub op: CollOp,
    pub bytes: u64,
    pub count: u64,
    pub datatype: u8,
    pub nranks: u32,
    /// The host call, when recorded.
    pub host: Option<(Ns, Ns)>,
    /// The kernel, when it ran to completion.
    pub gpu: Option<(Ns, Ns)>,
    /// Kernel time not overlapped by compute kernels.
    pub exposed_ns: Ns,
    pub step: Option<u64>,
    pub device: u32,
    pub stream: u64,
    /// This rank's rank in the communicator.
    #[serde(skip)]
    pub comm_rank: u32,
    /// The peer (communicator rank) of a send / receive, the root of a rooted collective, else -1.
    #[serde(skip)]
    pub peer: i32,
}

impl CollFact {
    /// A point-to-point transfer: matched with the peer's counterpart, not across all ranks.
    pub fn is_p2p(&self) -> bool {
        self.op.is_p2p()
    }
}

fn op_name<S: serde::Serializer>(op: &CollOp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(op.name())
}

impl CollFact {
    /// When the rank got there: the kernel start, else the host call start.
    pub fn arrival(&self) -> Option<Ns> {
        self.gpu.map(|g| g.0).or(self.host.map(|h| h.0))
    }
}

/// A synchronizing host call name, with what it cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SyncCallStat {
    pub name: String,
    /// Calls inside steps.
    pub calls: u64,
    /// Host time blocked in them.
    pub blocked_ns: Ns,
    /// GPU idle that followed because the host was blocked when the GPU ran out of work.
    pub gpu_idle_ns: Ns,
}

/// Copies from / to pageable host memory.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PageableStat {
    pub copies: u64,
    pub bytes: u64,
    pub gpu_ns: Ns,
    /// Copy time not overlapped by kernels.
    pub exposed_ns: Ns,
    /// The host calls that issued them.
    pub calls: Vec<String>,
}

/// Kernel families (for hotspots and AMP detection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Gemm,
    Attention,
    Softmax,
    Norm,
    Elementwise,
    Reduction,
    Optimizer,
    AmpCheck,
    Communication,
    Other,
}

impl Family {
    /// From a (mangled or plain) kernel name.
    pub fn of(name: &str) -> Family {
        let n = name.to_ascii_lowercase();
        let has = |pats: &[&str]| pats.iter().any(|p| n.contains(p));
        if crate::model::is_comm_kernel(name) {
            Family::Communication
        } else if has(&["non_finite_check"]) {
            Family::AmpCheck
        } else if has(&["adam", "sgd", "lamb", "lion", "adagrad", "rmsprop", "multi_tensor_apply"]) {
            Family::Optimizer
        } else if has(&["flash", "fmha", "attention", "attn", "sdpa"]) {
            Family::Attention
        } else if has(&["softmax"]) {
            Family::Softmax
        } else if has(&[
            "layer_norm",
            "layernorm",
            "rms_norm",
            "rmsnorm",
            "batch_norm",
            "batchnorm",
            "group_norm",
            "gammabeta",
        ]) {
            Family::Norm
        } else if has(&["gemm", "xmma", "cutlass", "matmul", "cublas", "gemv", "wgrad", "dgrad", "conv"]) {
            Family::Gemm
        } else if has(&["reduce_kernel", "reduction", "reduce"]) {
            Family::Reduction
        } else if has(&[
            "elementwise",
            "vectorized",
            "unrolled",
            "functor",
            "fill",
            "copy_kernel",
            "pointwise",
            "triton_poi",
        ]) {
            Family::Elementwise
        } else {
            Family::Other
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Family::Gemm => "gemm",
            Family::Attention => "attention",
            Family::Softmax => "softmax",
            Family::Norm => "layer_norm",
            Family::Elementwise => "elementwise",
            Family::Reduction => "reduction",
            Family::Optimizer => "optimizer",
            Family::AmpCheck => "amp_check",
            Family::Communication => "communication",
            Family::Other => "other",
        }
    }
    /// Memory-bound families that fusion removes.
    pub fn fusible(self) -> bool {
        matches!(self, Family::Softmax | Family::Norm | Family::Elementwise | Family::Reduction)
    }
    pub const ALL: [Family; 10] = [
        Family::Gemm,
        Family::Attention,
        Family::Softmax,
        Family::Norm,
        Family::Elementwise,
        Family::Reduction,
        Family::Optimizer,
        Family::AmpCheck,
        Family::Communication,
        Family::Other,
    ];
}

/// GPU time of one kernel family on one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FamilyStat {
    pub family: Family,
    pub kernels: u64,
    pub total_ns: Ns,
    /// The family's most expensive kernel (raw name) and its time.
    pub top_kernel: String,
    pub top_kernel_ns: Ns,
}

/// A failed device allocation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocFailure {
    pub ts: Ns,
    pub device: u32,
    pub bytes: u64,
    /// The process's reservation on the device when it failed.
    pub reserved: u64,
    pub step: Option<u64>,
}

/// Device memory of one rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemFacts {
    pub allocs: u64,
    pub frees: u64,
    pub alloc_bytes: u64,
    pub peak_reserved: u64,
    pub peak_device: u32,
    /// Device capacity when a counter reported it.
    pub capacity: Option<u64>,
    pub failures: Vec<AllocFailure>,
    /// Reservation at the end of each step (index, bytes), for growth.
    pub reserved_by_step: Vec<(u64, u64)>,
    /// Allocation / free calls inside steps, and the host time they took.
    pub step_alloc_calls: u64,
    pub step_alloc_ns: Ns,
    /// GPU idle time inside steps while the host was in allocation calls (what the churn costs).
    #[serde(skip)]
    pub step_alloc_idle_ns: Ns,
}

/// AMP (GradScaler) evidence.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AmpFacts {
    /// Steps that ran the non-finite check.
    pub checked_steps: Vec<u64>,
    /// Of those, steps without optimizer kernels after the check.
    pub skipped_steps: Vec<u64>,
    /// GPU window time of the skipped steps.
    pub skipped_ns: Ns,
    pub optimizer_kernel: Option<String>,
}

/// The watchdog's marker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HangMarker {
    pub ts: Ns,
    pub pending_ns: u64,
    pub what: Option<String>,
}

/// Everything the rules know about one rank.
#[derive(Debug, Clone, Serialize)]
pub struct RankFacts {
    pub proc: ProcId,
    /// The rank, or the process index when the trace carries none.
    pub rank: u32,
    pub label: String,
    pub path: String,
    pub host: String,
    pub origin: Origin,
    /// GPU activity with times was recorded.
    pub gpu_times: bool,
    pub span: (Ns, Ns),
    /// The analysed window (the steps, or the whole trace).
    pub window: (Ns, Ns),
    pub split: Split,
    pub steps: Vec<StepFacts>,
    pub colls: Vec<CollFact>,
    pub syncs: Vec<SyncCallStat>,
    /// Small (<= 1 KiB) device-to-host copies inside steps (`.item()`-like).
    pub small_d2h: u64,
    pub pageable: PageableStat,
    pub families: Vec<FamilyStat>,
    pub memory: MemFacts,
    pub amp: AmpFacts,
    pub hang_markers: Vec<HangMarker>,
    /// Last CUDA / NCCL host call (name, start).
    pub last_call: Option<(String, Ns)>,
    /// Last kernel to start (name, start, end).
    pub last_kernel: Option<(String, Ns, Ns)>,
    /// Mean tensor-core activity (0..1) when a counter reported it.
    pub tensor_activity: Option<f64>,
    /// The main device.
    pub device: u32,
    /// The process wrote a clean-exit marker.
    pub exited: bool,
    /// GPU clock / temperature / power samples (`slowdown` compares them before and after).
    pub health: Vec<HealthSample>,
    /// Its pid and host samples (empty without the host sampler).
    pub pid: u32,
    #[serde(skip)]
    pub host_series: crate::host::HostSeries,
    /// The NCCL profiler plugin's and the topology probe's records.
    #[serde(skip)]
    pub nccl: crate::nccl_plugin::table::RankNccl,
}

/// One sample of a GPU health counter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HealthSample {
    pub ts: Ns,
    /// `tprof_format::counter_names::{SM_CLOCK, TEMP, POWER}`.
    pub name: &'static str,
    pub value: f64,
}

impl HealthSample {
    /// The health counter `name` is, if any.
    pub fn kind(name: &str) -> Option<&'static str> {
        use tprof_format::counter_names::{POWER, SM_CLOCK, TEMP};
        [SM_CLOCK, TEMP, POWER].into_iter().find(|k| *k == name)
    }
}

impl RankFacts {
    pub fn window_ns(&self) -> Ns {
        self.window.1.saturating_sub(self.window.0)
    }
}
