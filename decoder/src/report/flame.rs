//! The flame graph: NVTX range stacks -> kernels, weighted by GPU time (microseconds), merged over
//! ranks, drawn by inferno without its JavaScript (frames keep their `<title>` tooltips).

use std::collections::HashMap;

use super::collect::ProcReport;

/// Folded lines (`a;b;kernel us`) of every process, merged, heaviest first.
pub fn folded_lines(procs: &[ProcReport]) -> Vec<String> {
    let mut all: HashMap<&str, u64> = HashMap::new();
    for p in procs {
        for (k, ns) in &p.folded {
            *all.entry(k.as_str()).or_default() += ns;
        }
    }
    let mut v: Vec<(&str, u64)> = all.into_iter().filter(|(_, ns)| *ns >= 1000).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.into_iter().map(|(k, ns)| format!("{k} {}", ns / 1000)).collect()
}

/// The flame graph as an inline `<svg>` element (no XML prolog), or None without kernel times.
pub fn svg(procs: &[ProcReport], width: usize) -> Option<String> {
    let lines = folded_lines(procs);
    if lines.is_empty() {
        return None;
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = "GPU time by NVTX range and kernel".into();
    opts.count_name = "us".into();
    opts.name_type = "".into();
    opts.image_width = Some(width);
    opts.no_javascript = true;
    opts.deterministic = true;
    opts.hash = true;
    opts.font_type = "system-ui, sans-serif".into();
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(|s| s.as_str()), &mut out).ok()?;
    let s = String::from_utf8(out).ok()?;
    let start = s.find("<svg")?;
    let mut svg = s[start..].to_string();
    // Drop inferno's comment (it names web pages); the page must not even mention them.
    while let (Some(a), Some(b)) = (svg.find("<!--"), svg.find("-->")) {
        if b < a {
            break;
        }
        svg.replace_range(a..b + 3, "");
    }
    // Without inferno's script, its `onload="init(evt)"` hook would be an error in the page.
    Some(svg.replace(" onload=\"init(evt)\"", ""))
}
