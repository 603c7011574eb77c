//! Bus bandwidth of collectives, as nccl-tests defines it: bytes x bus factor / time. The shim's
//! metrics file and the decoder's summary and diagnoses compute it alike.

use crate::record::CollOp;

/// The nccl-tests bus-bandwidth factor of `op` on `nranks` ranks.
pub fn bus_factor(op: CollOp, nranks: u32) -> f64 {
    let n = nranks.max(1) as f64;
    match op {
        CollOp::AllReduce => 2.0 * (n - 1.0) / n,
        CollOp::AllGather | CollOp::ReduceScatter | CollOp::AllToAll => (n - 1.0) / n,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_factors() {
        assert_eq!(bus_factor(CollOp::AllReduce, 2), 1.0);
        assert_eq!(bus_factor(CollOp::AllReduce, 8), 1.75);
        assert_eq!(bus_factor(CollOp::AllGather, 4), 0.75);
        assert_eq!(bus_factor(CollOp::ReduceScatter, 2), 0.5);
        assert_eq!(bus_factor(CollOp::AllToAll, 8), 0.875);
        assert_eq!(bus_factor(CollOp::Broadcast, 8), 1.0);
        assert_eq!(bus_factor(CollOp::Reduce, 8), 1.0);
        assert_eq!(bus_factor(CollOp::Send, 2), 1.0);
        assert_eq!(bus_factor(CollOp::Recv, 2), 1.0);
    }
}
