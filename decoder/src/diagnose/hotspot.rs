//! `hotspot_kernel`: kernel families (attention, softmax, layer norm, gemm, elementwise...) that
//! dominate GPU time, with fusion advice; low tensor-core activity when counter samples exist.
//!
//! Severity: an estimate of what fusing the memory-bound families (softmax, norm, elementwise,
//! reductions) would give back: half of their time beyond a quarter of compute time (a well-fused
//! model still spends about that much on them).

use std::collections::BTreeMap;

use super::evidence::{Evidence, FamilyShare, HotspotKernelEvidence};
use super::facts::Family;
use super::job::Job;
use super::{Location, Verdict, VerdictKind};
use crate::model::Ns;
use crate::summary::demangle;
use crate::units::{millis, share};

/// Share of compute a well-fused model still spends on memory-bound kernels.
const FUSED_BASELINE: f64 = 0.25;
/// Tensor-core activity below this (0..1) is low for a gemm-heavy model.
const LOW_TENSOR: f64 = 0.2;

pub fn find(job: &Job) -> Option<Verdict> {
    let mut fam: BTreeMap<Family, (u64, Ns, String, Ns)> = BTreeMap::new();
    for r in &job.ranks {
        for f in &r.families {
            let e = fam.entry(f.family).or_insert((0, 0, String::new(), 0));
            e.0 += f.kernels;
            e.1 += f.total_ns;
            if f.top_kernel_ns > e.3 {
                e.2 = f.top_kernel.clone();
                e.3 = f.top_kernel_ns;
            }
        }
    }
    fam.remove(&Family::Communication);
    let compute: Ns = fam.values().map(|f| f.1).sum();
    if compute == 0 {
        return None;
    }
    let fusible: Ns = fam.iter().filter(|(k, _)| k.fusible()).map(|(_, f)| f.1).sum();
    let saving = 0.5 * (fusible as f64 - FUSED_BASELINE * compute as f64).max(0.0);
    let mut severity = job.fraction(saving as Ns);
    let mut rows: Vec<(Family, (u64, Ns, String, Ns))> = fam.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .1));
    let tensor: Vec<f64> = job.ranks.iter().filter_map(|r| r.tensor_activity).collect();
    let tensor_mean = (!tensor.is_empty()).then(|| tensor.iter().sum::<f64>() / tensor.len() as f64);
    let gemm_share = rows.iter().filter(|r| matches!(r.0, Family::Gemm | Family::Attention)).map(|r| r.1 .1).sum::<Ns>()
        as f64
        / compute as f64;
    let low_tensor = tensor_mean.is_some_and(|t| t < LOW_TENSOR) && gemm_share > 0.5;
    if low_tensor {
        // Tensor cores idle in gemm-heavy compute: up to half of the gemm time is recoverable.
        let gemm_ns: Ns = rows.iter().filter(|r| r.0 == Family::Gemm).map(|r| r.1 .1).sum();
        severity = severity.max(job.fraction(gemm_ns / 4));
    }
    if severity <= 0.0 {
        return None;
    }
    let top_fusible = rows.iter().find(|r| r.0.fusible());
    let (family, (_, ftime, kernel, _)) = if low_tensor { rows.first()? } else { top_fusible.or(rows.first())? };
    let mut v = Verdict::new(VerdictKind::HotspotKernel, severity);
    v.ranks = job.rank_ids(0..job.ranks.len());
    v.location = Location { kernel: Some(demangle(kernel)), ..Location::default() };
    let shares: Vec<String> = rows
        .iter()
        .take(5)
        .map(|(f, (_, t, _, _))| format!("{} {}", f.name(), share(*t as f64 / compute as f64)))
        .collect();
    let mut text = format!(
        "GPU compute time by family: {}. Memory-bound families (softmax, norm, elementwise, reductions) take {} of compute ({}); fusing them would save about {}.",
        shares.join(", "),
        share(fusible as f64 / compute as f64),
        millis(fusible),
        millis(saving as Ns)
    );
    if let Some(t) = tensor_mean {
        text.push_str(&format!(" Mean tensor-core activity: {}.", share(t)));
    }
    v.evidence = Evidence::HotspotKernel(HotspotKernelEvidence {
        estimated_saving_ns: saving as Ns,
        families: rows
            .iter()
            .map(|(f, (n, t, k, _))| FamilyShare {
                family: f.name(),
                kernels: *n,
                share: *t as f64 / compute as f64,
                top_kernel: demangle(k),
                total_ns: *t,
            })
            .collect(),
        fusible_ns: fusible,
        tensor_activity: tensor_mean,
        text,
    });
    v.summary = format!(
        "Hotspot: {} kernels take {} of GPU compute{}",
        family.name(),
        share(*ftime as f64 / compute as f64),
        if low_tensor { ", tensor cores mostly idle" } else { "" }
    );
    let mut advice = vec![
        "Fuse memory-bound chains: torch.compile(model) (Inductor fuses pointwise ops, norms and softmax into few kernels); JAX jit does this in XLA.".into(),
        "Use fused implementations: F.scaled_dot_product_attention / FlashAttention instead of matmul + softmax + matmul; fused LayerNorm / RMSNorm and bias+GeLU (apex, Transformer Engine, Liger kernels).".into(),
    ];
    if low_tensor || gemm_share > 0.5 {
        advice.push("Keep gemms on tensor cores: bf16/fp16 autocast, torch.backends.cuda.matmul.allow_tf32 = True for fp32, dimensions multiples of 8 (16 for fp8), batch enough rows per gemm.".into());
    }
    v.advice = advice;
    Some(v)
}
