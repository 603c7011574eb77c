//! What each node's NIC counters say while its collectives across nodes run: the host sampler's
//! machine-wide samples (one process per host: sysfs `statistics/*_bytes`, InfiniBand
//! `port_*_data`) of the node's network ports (the topology's), against their line rate. A NIC near
//! its line rate while NCCL sends far below it carries other traffic; a NIC far below its line rate
//! while NCCL is slow is idle, so the link or the layout is to blame, not the load.
//!
//! Per sample interval: the bytes of the busier direction, and the share of the interval that
//! NCCL's network transfers from the node cover (the proxy operations of the node's ranks, merged). The rate
//! while they run is the mean over intervals they cover (>= 80%) when there are enough of them,
//! else the weighted least-squares line rate(coverage) at full coverage; the rate while none runs
//! likewise at no coverage. Only sampled bytes are used; nothing is extrapolated past the samples.

use super::job::Job;
use crate::host::events::{HostMetric as M, HostScope as S};
use crate::host::HostSeries;
use crate::intervals::union;
use crate::model::Ns;
use crate::nccl_plugin::topology::TopologySummary;

/// Intervals covered at least this much count as "while collectives ran" (at most this little: "idle").
const COVERED: f64 = 0.8;
const UNCOVERED: f64 = 0.05;
/// Sampled time a direct estimate needs.
const MIN_NS: u64 = 200_000_000;

/// One node's network ports as its counters saw them.
#[derive(Debug, Clone, PartialEq)]
pub struct NicLoad {
    pub host: String,
    /// The ports followed (the sampler's names: `mlx5_0/1`, `eth0`).
    pub ports: Vec<String>,
    /// Their line rates summed, GB/s.
    pub line_gbps: f64,
    /// GB/s through them (the busier direction) while the node's collectives across nodes ran.
    pub busy_gbps: Option<f64>,
    /// GB/s through them while none ran.
    pub idle_gbps: Option<f64>,
}

impl NicLoad {
    /// Share of the line rate in use while collectives ran.
    pub fn busy_share(&self) -> Option<f64> {
        self.busy_gbps.filter(|_| self.line_gbps > 0.0).map(|b| b / self.line_gbps)
    }
}

/// The NIC load of every node whose sampling rank recorded NIC counters of its network ports.
pub fn nic_loads(job: &Job, topo: &TopologySummary) -> Vec<NicLoad> {
    let mut out: Vec<NicLoad> = Vec::new();
    for r in &job.ranks {
        let s = &r.host_series;
        let nics = s.ids(S::Nic, M::TxBytes);
        if nics.is_empty() {
            continue;
        }
        let Some(host) = topo.host_of(r.rank) else { continue };
        let Some(node) = topo.node(host) else { continue };
        if out.iter().any(|l| l.host == host) {
            continue;
        }
        // The ports that carry traffic to other nodes: InfiniBand ones that are up, else Ethernet.
        let ib = node.nics.iter().any(|n| n.kind == "ib" && n.rate_gbps > 0.0);
        let ports: Vec<(u32, String, f64)> = node
            .nics
            .iter()
            .filter(|n| n.rate_gbps > 0.0 && n.kind == if ib { "ib" } else { "eth" })
            .filter_map(|n| {
                let want = if n.kind == "ib" { format!("{}/{}", n.name, n.port) } else { n.name.clone() };
                let id = nics.iter().copied().find(|&id| s.name(S::Nic, id) == Some(want.as_str()))?;
                Some((id, want, n.rate_gbps))
            })
            .collect();
        if ports.is_empty() {
            continue;
        }
        // When NCCL used the network from this node: its ranks' proxy operations (one host, one clock).
        let spans = union(
            job.ranks
                .iter()
                .filter(|q| topo.host_of(q.rank) == Some(host))
                .flat_map(|q| q.nccl.network_spans())
                .collect(),
        );
        let ids: Vec<u32> = ports.iter().map(|p| p.0).collect();
        let (busy, idle) = rates(s, &ids, &spans, r.window);
        out.push(NicLoad {
            host: host.to_string(),
            ports: ports.iter().map(|p| p.1.clone()).collect(),
            line_gbps: ports.iter().map(|p| p.2).sum(),
            busy_gbps: busy,
            idle_gbps: idle,
        });
    }
    out
}

/// Time of the sorted, disjoint `spans` inside `[a, b]`.
fn covered(spans: &[(Ns, Ns)], a: Ns, b: Ns) -> u64 {
    let from = spans.partition_point(|s| s.1 <= a);
    spans[from..].iter().take_while(|s| s.0 < b).map(|s| s.1.min(b).saturating_sub(s.0.max(a))).sum()
}

/// (GB/s while `spans` run, GB/s while none runs) through the NICs `ids`, inside `window` when set.
fn rates(s: &HostSeries, ids: &[u32], spans: &[(Ns, Ns)], window: (Ns, Ns)) -> (Option<f64>, Option<f64>) {
    let grid = s.get((S::Nic, ids[0], M::TxBytes));
    let inside = |t: Ns| window.1 <= window.0 || (window.0..=window.1).contains(&t);
    // (interval ns, coverage, bytes)
    let mut iv: Vec<(f64, f64, f64)> = Vec::new();
    for w in grid.windows(2) {
        let (a, b) = (w[0].0, w[1].0);
        if b <= a || !inside(a) || !inside(b) {
            continue;
        }
        let dir = |m: M| ids.iter().map(|&id| s.delta((S::Nic, id, m), a, b)).sum::<f64>();
        let bytes = dir(M::TxBytes).max(dir(M::RxBytes));
        iv.push(((b - a) as f64, covered(spans, a, b) as f64 / (b - a) as f64, bytes));
    }
    let mean = |keep: &dyn Fn(f64) -> bool| {
        let (ns, bytes) = iv.iter().filter(|v| keep(v.1)).fold((0.0, 0.0), |acc, v| (acc.0 + v.0, acc.1 + v.2));
        (ns >= MIN_NS as f64).then(|| bytes / ns)
    };
    let fit = fit(&iv);
    let busy = mean(&|c| c >= COVERED).or(fit.map(|(o, n)| (o + n).max(0.0)));
    let idle = mean(&|c| c <= UNCOVERED).or(fit.map(|(o, _)| o.max(0.0)));
    (busy, idle)
}

/// rate = o + n * coverage, least squares weighted by interval length; None when the coverage
/// hardly varies (the line is not determined).
fn fit(iv: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let w: f64 = iv.iter().map(|v| v.0).sum();
    if w < MIN_NS as f64 {
        return None;
    }
    let mc = iv.iter().map(|v| v.0 * v.1).sum::<f64>() / w;
    let mr = iv.iter().map(|v| v.2).sum::<f64>() / w;
    let var = iv.iter().map(|v| v.0 * (v.1 - mc).powi(2)).sum::<f64>() / w;
    if var < 0.01 {
        return None;
    }
    let cov = iv.iter().map(|v| v.0 * (v.1 - mc) * (v.2 / v.0 - mr)).sum::<f64>() / w;
    let n = cov / var;
    Some((mr - n * mc, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 Hz samples of a NIC carrying `other` bytes/ns always and `nccl` more while covered.
    fn series(n: usize, covered_every: usize, other: f64, nccl: f64) -> (HostSeries, Vec<(Ns, Ns)>) {
        let mut s = HostSeries::default();
        let mut spans = Vec::new();
        let (mut tx, step) = (0.0, 100_000_000u64);
        for i in 0..n {
            let t = i as u64 * step;
            for (m, v) in [(M::TxBytes, tx), (M::RxBytes, tx / 2.0)] {
                s.series.entry((S::Nic, 0, m)).or_default().push((t, v as u64));
            }
            let on = i % covered_every == 0;
            if on {
                spans.push((t, t + step));
            }
            tx += step as f64 * (other + if on { nccl } else { 0.0 });
        }
        s.finish();
        (s, spans)
    }

    #[test]
    fn rate_while_collectives_run_and_while_none_does() {
        // Every other interval covered: 20 GB/s of NCCL on 3 GB/s of other traffic.
        let (s, spans) = series(40, 2, 3.0, 20.0);
        let (busy, idle) = rates(&s, &[0], &spans, (0, 0));
        assert!((busy.unwrap() - 23.0).abs() < 1e-6, "{busy:?}");
        assert!((idle.unwrap() - 3.0).abs() < 1e-6, "{idle:?}");
    }

    #[test]
    fn always_covered_gives_the_busy_rate_only() {
        let (s, spans) = series(20, 1, 5.0, 10.0);
        let (busy, idle) = rates(&s, &[0], &spans, (0, 0));
        assert!((busy.unwrap() - 15.0).abs() < 1e-6, "{busy:?}");
        assert_eq!(idle, None, "no interval without collectives");
    }

    #[test]
    fn too_few_samples_say_nothing() {
        let (s, spans) = series(2, 1, 5.0, 10.0);
        assert_eq!(rates(&s, &[0], &spans, (0, 0)), (None, None));
    }

    #[test]
    fn half_covered_intervals_are_fitted() {
        // Coverage alternating 30% / 70%: no interval qualifies directly, the line gives 4 + 16.
        let mut s = HostSeries::default();
        let mut spans = Vec::new();
        let step = 100_000_000u64;
        let mut tx = 0.0;
        for i in 0..30u64 {
            let t = i * step;
            s.series.entry((S::Nic, 0, M::TxBytes)).or_default().push((t, tx as u64));
            s.series.entry((S::Nic, 0, M::RxBytes)).or_default().push((t, 0));
            let c = if i % 2 == 0 { 0.3 } else { 0.7 };
            spans.push((t, t + (c * step as f64) as u64));
            tx += step as f64 * (4.0 + 16.0 * c);
        }
        s.finish();
        let (busy, idle) = rates(&s, &[0], &spans, (0, 0));
        assert!((busy.unwrap() - 20.0).abs() < 1e-3, "{busy:?}");
        assert!((idle.unwrap() - 4.0).abs() < 1e-3, "{idle:?}");
    }
}
