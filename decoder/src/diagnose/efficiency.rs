//! The efficiency headline: per rank and overall, the share of wall time the GPU spent on useful
//! compute, and where the rest went (communication, waiting for other ranks, copies, data
//! loading, launch overhead, synchronization, idle).

use serde::Serialize;

use super::facts::Split;
use super::job::Job;
use crate::model::Ns;

/// Shares of wall time (0..1; they add up to 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Breakdown {
    pub compute: f64,
    pub comm: f64,
    pub wait: f64,
    pub memcpy: f64,
    pub data: f64,
    pub launch: f64,
    pub sync: f64,
    pub idle: f64,
}

impl Breakdown {
    pub fn of(s: &Split) -> Breakdown {
        let t = s.total();
        let f = |x: Ns| if t == 0 { 0.0 } else { x as f64 / t as f64 };
        Breakdown {
            compute: f(s.compute_ns),
            comm: f(s.comm_ns),
            wait: f(s.wait_ns),
            memcpy: f(s.memcpy_ns),
            data: f(s.data_ns),
            launch: f(s.launch_ns),
            sync: f(s.sync_ns),
            idle: f(s.idle_ns),
        }
    }
    /// (name, share) pairs in display order.
    pub fn parts(&self) -> [(&'static str, f64); 8] {
        [
            ("compute", self.compute),
            ("comm", self.comm),
            ("wait", self.wait),
            ("memcpy", self.memcpy),
            ("data", self.data),
            ("launch", self.launch),
            ("sync", self.sync),
            ("idle", self.idle),
        ]
    }
}

/// One row: a rank, or the whole job.
#[derive(Debug, Clone, Serialize)]
pub struct EfficiencyRow {
    /// None for the overall row.
    pub rank: Option<u32>,
    pub label: String,
    /// Wall time analysed (ns; the sum over ranks for the overall row).
    pub wall_ns: Ns,
    /// Share of wall time the GPU spent on useful compute.
    pub useful: f64,
    pub breakdown: Breakdown,
    /// The same split in ns.
    pub ns: Split,
    /// False when no GPU activity with times was recorded.
    pub gpu_times: bool,
}

/// The headline.
#[derive(Debug, Clone, Serialize)]
pub struct Efficiency {
    pub overall: EfficiencyRow,
    pub ranks: Vec<EfficiencyRow>,
}

pub fn compute(job: &Job) -> Efficiency {
    let mut total = Split::default();
    let mut ranks = Vec::new();
    for r in &job.ranks {
        total.add(&r.split);
        let b = Breakdown::of(&r.split);
        ranks.push(EfficiencyRow {
            rank: Some(r.rank),
            label: r.label.clone(),
            wall_ns: r.split.total(),
            useful: b.compute,
            breakdown: b,
            ns: r.split,
            gpu_times: r.gpu_times,
        });
    }
    ranks.sort_by_key(|r| r.rank);
    let b = Breakdown::of(&total);
    Efficiency {
        overall: EfficiencyRow {
            rank: None,
            label: "all".into(),
            wall_ns: total.total(),
            useful: b.compute,
            breakdown: b,
            ns: total,
            gpu_times: job.ranks.iter().any(|r| r.gpu_times),
        },
        ranks,
    }
}
