//! The proc-address table checked against NVIDIA's `cudaTypedefs.h` of CUDA 12.9 and 13.x (the pip
//! wheels in `.venv`): every entry's base name has `PFN_<base>_v<N>` typedefs, its version range is
//! one ABI's (from a PFN version up to the next one, or open), its wrappers take as many parameters
//! as the typedef, its per-thread flavour matches a `_ptsz` / `_ptds` typedef, and `cuda.h` exports
//! the names it wraps. A missing header fails the test unless `TPROF_CONFORMANCE=0`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::proc_address::{Entry, ENTRIES};

/// One `typedef CUresult (CUDAAPI *PFN_<base>_v<version>[_ptsz|_ptds])(<params>);`.
#[derive(Debug, Clone, PartialEq)]
struct Pfn {
    base: String,
    version: i32,
    /// `ptsz` / `ptds` for a per-thread default stream flavour.
    per_thread: Option<String>,
    params: usize,
}

/// Splits `cuMemcpyHtoD_v7000_ptds` into (`cuMemcpyHtoD`, 7000, Some("ptds")).
fn split_pfn_name(name: &str) -> Option<(String, i32, Option<String>)> {
    let (rest, per_thread) = match name.rsplit_once('_') {
        Some((r, s)) if s == "ptsz" || s == "ptds" => (r, Some(s.to_string())),
        _ => (name, None),
    };
    let (base, version) = rest.rsplit_once("_v")?;
    if base.is_empty() || version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((base.to_string(), version.parse().ok()?, per_thread))
}

/// Number of parameters of a C parameter list (the text between the parentheses).
fn count_params(list: &str) -> usize {
    let t = list.trim();
    if t.is_empty() || t == "void" {
        return 0;
    }
    let mut depth = 0i32;
    let mut n = 1;
    for c in t.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => n += 1,
            _ => {}
        }
    }
    n
}

fn parse_typedefs(text: &str) -> Vec<Pfn> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find("*PFN_") else { continue };
        if !line.trim_start().starts_with("typedef") {
            continue;
        }
        let after = &line[at + "*PFN_".len()..];
        let Some(close) = after.find(')') else { continue };
        let Some((base, version, per_thread)) = split_pfn_name(&after[..close]) else { continue };
        let Some(params) = after[close + 1..].trim_start().strip_prefix('(') else { continue };
        let mut depth = 1i32;
        let mut end = None;
        for (i, c) in params.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { continue };
        out.push(Pfn { base, version, per_thread, params: count_params(&params[..end]) });
    }
    out
}

/// `#define CUDA_VERSION 13050` of `cuda.h`.
fn cuda_version(cuda_h: &str) -> Option<i32> {
    cuda_h.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("#define") && w.next() == Some("CUDA_VERSION")).then(|| w.next()?.parse().ok())?
    })
}

/// True when `cuda.h` exports `name`: declared as a function, or the target of a name remapping
/// (`#define cuMemAlloc cuMemAlloc_v2`, `#define cuMemcpy __CUDA_API_PTDS(cuMemcpy)` for the
/// per-thread `cuMemcpy_ptds` when `per_thread` is given).
fn cuda_h_exports(cuda_h: &str, name: &str, per_thread: Option<&str>) -> bool {
    match per_thread {
        None => {
            cuda_h.contains(&format!("CUDAAPI {name}("))
                || cuda_h.lines().any(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.len() == 3 && w[0] == "#define" && w[2] == name
                })
        }
        Some(sfx) => {
            let Some(legacy) = name.strip_suffix(&format!("_{sfx}")) else { return false };
            let mac = if sfx == "ptsz" { "__CUDA_API_PTSZ" } else { "__CUDA_API_PTDS" };
            cuda_h.contains(&format!("{mac}({legacy})"))
        }
    }
}

fn s(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("?")
}

fn show_range(min: i32, until: Option<i32>) -> String {
    match until {
        Some(u) => format!("[{min}, {u})"),
        None => format!("[{min}, open)"),
    }
}

/// Every disagreement between the table and one CUDA version's headers.
fn check_against(entries: &[Entry], typedefs: &[Pfn], cuda_h: &str, version: i32) -> Vec<String> {
    let mut by_base: BTreeMap<&str, Vec<&Pfn>> = BTreeMap::new();
    for p in typedefs {
        by_base.entry(p.base.as_str()).or_default().push(p);
    }
    let mut problems = Vec::new();
    for e in entries.iter().filter(|e| e.min_version <= version) {
        let base = s(e.base);
        let what =
            format!("{base} {} ({}, {} parameters)", show_range(e.min_version, e.until_version), s(e.legacy), e.arity);
        let Some(pfns) = by_base.get(base) else {
            problems.push(format!("{what}: no PFN_{base}_v* typedef"));
            continue;
        };
        let mut abis: Vec<&Pfn> = pfns.iter().copied().filter(|p| p.per_thread.is_none()).collect();
        abis.sort_by_key(|p| p.version);
        let versions: Vec<i32> = abis.iter().map(|p| p.version).collect();
        let Some(abi) = abis.iter().find(|p| p.version == e.min_version) else {
            problems.push(format!("{what}: {} is not a PFN_{base} version (those are {versions:?})", e.min_version));
            continue;
        };
        let next = versions.iter().copied().find(|&v| v > e.min_version);
        let until_ok = match (e.until_version, next) {
            (Some(u), Some(n)) => u == n,
            (None, None) => true,
            // The next ABI is newer than these headers.
            (Some(u), None) => u > version,
            (None, Some(_)) => false,
        };
        if !until_ok {
            problems.push(format!(
                "{what}: the ABI of PFN_{base}_v{} is valid for {} (PFN_{base} versions {versions:?})",
                e.min_version,
                show_range(e.min_version, next)
            ));
        }
        if e.arity != abi.params {
            problems.push(format!(
                "{what}: the wrapper takes {} parameters, PFN_{base}_v{} has {}",
                e.arity, e.min_version, abi.params
            ));
        }
        // Per-thread typedefs whose version lies in this ABI's range belong to it.
        let in_range = |v: i32| v >= e.min_version && next.is_none_or(|n| v < n);
        let twins: Vec<&Pfn> = pfns.iter().copied().filter(|p| p.per_thread.is_some() && in_range(p.version)).collect();
        match e.per_thread {
            Some(pt) => {
                let pt = s(pt);
                let sfx = pt.rsplit_once('_').map(|(_, x)| x).unwrap_or("");
                match twins.iter().find(|p| p.per_thread.as_deref() == Some(sfx)) {
                    None => {
                        problems.push(format!("{what}: per-thread wrapper {pt} but no PFN_{base}_v*_{sfx} typedef"))
                    }
                    Some(p) if p.params != e.arity => problems.push(format!(
                        "{what}: per-thread wrapper {pt} takes {} parameters, PFN_{base}_v{}_{sfx} has {}",
                        e.arity, p.version, p.params
                    )),
                    Some(_) => {}
                }
                if !cuda_h_exports(cuda_h, pt, Some(sfx)) {
                    problems.push(format!("{what}: cuda.h exports no {pt}"));
                }
            }
            None => {
                if let Some(p) = twins.first() {
                    problems.push(format!(
                        "{what}: PFN_{base}_v{}_{} exists but the entry has no per-thread wrapper",
                        p.version,
                        p.per_thread.as_deref().unwrap_or("")
                    ));
                }
            }
        }
        if !cuda_h_exports(cuda_h, s(e.legacy), None) {
            problems.push(format!("{what}: cuda.h exports no {}", s(e.legacy)));
        }
    }
    problems
}

/// `<repo>/.venv/lib/python3*/site-packages/nvidia/<package>/include`.
fn wheel_include(package: &str) -> Option<PathBuf> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/lib");
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(lib).ok()?.flatten().map(|d| d.path()).collect();
    pythons.sort();
    pythons
        .into_iter()
        .map(|p| p.join("site-packages/nvidia").join(package).join("include"))
        .find(|p| p.join("cudaTypedefs.h").is_file() && p.join("cuda.h").is_file())
}

#[test]
fn parser_reads_names_versions_and_parameter_counts() {
    let text = "typedef CUresult (CUDAAPI *PFN_cuCtxSynchronize_v2000)(void);\n\
                typedef CUresult (CUDAAPI *PFN_cuCtxSynchronize_v13000)(CUcontext ctx);\n\
                typedef CUresult (CUDAAPI *PFN_cuMemcpyHtoD_v7000_ptds)(CUdeviceptr_v2 dstDevice, const void *srcHost, size_t ByteCount);\n\
                typedef CUresult (CUDAAPI *PFN_cuLaunchHostFunc_v10000)(CUstream hStream, void (*fn)(void *, int), void *userData);\n\
                #define PFN_cuCtxSynchronize PFN_cuCtxSynchronize_v2000\n";
    let p = parse_typedefs(text);
    let got: Vec<(&str, i32, Option<&str>, usize)> =
        p.iter().map(|p| (p.base.as_str(), p.version, p.per_thread.as_deref(), p.params)).collect();
    assert_eq!(
        got,
        vec![
            ("cuCtxSynchronize", 2000, None, 0),
            ("cuCtxSynchronize", 13000, None, 1),
            ("cuMemcpyHtoD", 7000, Some("ptds"), 3),
            ("cuLaunchHostFunc", 10000, None, 3),
        ]
    );
    assert_eq!(cuda_version("#define CUDA_VERSION 13050\n"), Some(13050));
}

#[test]
fn a_range_that_ignores_a_newer_abi_is_reported() {
    let typedefs = parse_typedefs(
        "typedef CUresult (CUDAAPI *PFN_cuCtxSynchronize_v2000)(void);\n\
         typedef CUresult (CUDAAPI *PFN_cuCtxSynchronize_v13000)(CUcontext ctx);\n",
    );
    let cuda_h = "CUresult CUDAAPI cuCtxSynchronize(void);\nCUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx);\n";
    let open = Entry {
        base: b"cuCtxSynchronize",
        min_version: 2000,
        until_version: None,
        legacy: b"cuCtxSynchronize",
        per_thread: None,
        arity: 0,
    };
    let problems = check_against(std::slice::from_ref(&open), &typedefs, cuda_h, 13000);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("[2000, 13000)"), "{problems:?}");
    let wrong_arity = Entry { min_version: 13000, legacy: b"cuCtxSynchronize_v2", ..open };
    let problems = check_against(std::slice::from_ref(&wrong_arity), &typedefs, cuda_h, 13000);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("takes 0 parameters, PFN_cuCtxSynchronize_v13000 has 1"), "{problems:?}");
}

#[test]
fn table_matches_cuda_typedefs_of_12_9_and_13() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (package, what) in [("cuda_runtime", "CUDA 12.9 (nvidia-cuda-runtime-cu12)"), ("cu13", "CUDA 13 (nvidia-cu13)")]
    {
        let Some(dir) = wheel_include(package) else {
            let msg = format!(
                "{what}: no .venv/lib/python3*/site-packages/nvidia/{package}/include/cudaTypedefs.h \
                 (run `bash scripts/setup-python.sh`; TPROF_CONFORMANCE=0 skips this check)"
            );
            if std::env::var("TPROF_CONFORMANCE").as_deref() == Ok("0") {
                eprintln!("skipped: {msg}");
                continue;
            }
            panic!("{msg}");
        };
        let typedefs = std::fs::read_to_string(dir.join("cudaTypedefs.h")).expect("read cudaTypedefs.h");
        let cuda_h = std::fs::read_to_string(dir.join("cuda.h")).expect("read cuda.h");
        let version = cuda_version(&cuda_h).unwrap_or_else(|| panic!("{what}: no CUDA_VERSION in cuda.h"));
        let typedefs = parse_typedefs(&typedefs);
        assert!(typedefs.len() > 500, "{what}: only {} PFN typedefs parsed", typedefs.len());
        for p in check_against(ENTRIES, &typedefs, &cuda_h, version) {
            problems.push(format!("CUDA {version}: {p}"));
        }
        checked += 1;
    }
    assert!(problems.is_empty(), "the proc-address table disagrees with cudaTypedefs.h:\n{}", problems.join("\n"));
    if checked == 0 {
        eprintln!("no header checked (TPROF_CONFORMANCE=0)");
    }
}
