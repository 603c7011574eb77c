//! cupti-sys against NVIDIA's own CUPTI headers, every version installed.
//!
//! For each CUPTI include directory found (the CUDA 12 wheel in `.venv/lib/python3*/site-packages`
//! and every `.venv/conformance/nvidia-cuda-cupti*` from `scripts/setup-conformance.sh`), a C
//! program is generated from cupti-sys's own tables (every constant, record field offset and size,
//! fixed-offset field, callback id, API version), compiled with `cc` against that directory, run,
//! and each value it prints is compared with the Rust value. Nothing is copied by hand: the names
//! come from cupti-sys, the numbers from the compiler on both sides.
//!
//! No header directory found is a failure (CI installs them) unless `TPROF_CONFORMANCE=0`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use cupti_sys::abi::{CTypes, Coverage};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// One CUPTI header set: its name for messages and the include path it needs.
struct HeaderSet {
    label: String,
    /// The CUDA major of this CUPTI.
    major: u32,
    cupti_include: PathBuf,
    /// `cuda.h`, `builtin_types.h`: the runtime wheel of the same major version.
    cuda_include: PathBuf,
    /// `crt/host_defines.h` (the CUDA 12 runtime wheel lacks it; any CUDA 13 crt works).
    crt_include: Option<PathBuf>,
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// `<root>/nvidia/<pkg>/include` directories holding `file` below `root`.
fn include_dirs_with(root: &Path, file: &str) -> Vec<PathBuf> {
    subdirs(&root.join("nvidia")).into_iter().map(|p| p.join("include")).filter(|p| p.join(file).is_file()).collect()
}

/// Version triple of a conformance folder name `<dist>-<x.y.z>`.
fn folder_version(dir: &Path) -> Option<Vec<u32>> {
    let name = dir.file_name()?.to_str()?;
    let v = name.rsplit('-').next()?;
    v.split('.').map(|p| p.parse().ok()).collect()
}

fn conformance_folders(prefix: &str) -> Vec<PathBuf> {
    let root = repo_root().join(".venv/conformance");
    subdirs(&root)
        .into_iter()
        .filter(|d| {
            d.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.strip_prefix(prefix)
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            })
        })
        .collect()
}

/// The runtime include dir for CUDA `major`.`minor`, from the conformance folders, else the main
/// venv's wheels.
fn cuda_include_for(major: u32, minor: u32) -> Option<PathBuf> {
    let dist = if major == 12 { "nvidia-cuda-runtime-cu12" } else { "nvidia-cuda-runtime" };
    let mut candidates: Vec<(Vec<u32>, PathBuf)> = conformance_folders(dist)
        .into_iter()
        .filter_map(|d| {
            let v = folder_version(&d).filter(|v| v.first() == Some(&major) && v.len() > 1)?;
            Some((v, include_dirs_with(&d, "cuda.h").into_iter().next()?))
        })
        .collect();
    candidates.sort();
    // The same minor release, else the newest (a newer runtime's headers declare what older
    // CUPTI headers refer to).
    let fitting = candidates.iter().find(|(v, _)| v[1] == minor).or(candidates.last());
    fitting.map(|c| c.1.clone()).or_else(|| {
        let pkg = if major == 12 { "cuda_runtime" } else { "cu13" };
        venv_site_packages()
            .map(|sp| sp.join("nvidia").join(pkg).join("include"))
            .filter(|p| p.join("cuda.h").is_file())
    })
}

fn venv_site_packages() -> Option<PathBuf> {
    let lib = repo_root().join(".venv/lib");
    subdirs(&lib)
        .into_iter()
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3")))
        .map(|p| p.join("site-packages"))
        .find(|p| p.is_dir())
}

fn crt_include() -> Option<PathBuf> {
    let crt = "crt/host_defines.h";
    conformance_folders("nvidia-cuda-crt")
        .into_iter()
        .rev()
        .flat_map(|d| include_dirs_with(&d, crt))
        .next()
        .or_else(|| venv_site_packages().map(|sp| sp.join("nvidia/cu13/include")).filter(|p| p.join(crt).is_file()))
}

fn header_sets() -> Vec<HeaderSet> {
    let crt = crt_include();
    let mut sets = Vec::new();
    let mut add = |label: String, cupti_include: PathBuf, major: u32, minor: u32| {
        if let Some(cuda_include) = cuda_include_for(major, minor) {
            sets.push(HeaderSet { label, major, cupti_include, cuda_include, crt_include: crt.clone() });
        } else {
            panic!("{label}: no CUDA {major} runtime headers (cuda.h) found: run scripts/setup-conformance.sh");
        }
    };
    if let Some(sp) = venv_site_packages() {
        let inc = sp.join("nvidia/cuda_cupti/include");
        if inc.join("cupti.h").is_file() {
            add(format!("venv cuda_cupti ({})", sp.display()), inc, 12, 99);
        }
    }
    for d in conformance_folders("nvidia-cuda-cupti").into_iter().chain(conformance_folders("nvidia-cuda-cupti-cu12")) {
        let Some(v) = folder_version(&d) else { continue };
        for inc in include_dirs_with(&d, "cupti.h") {
            let label = d.file_name().unwrap().to_string_lossy().into_owned();
            add(label, inc, v[0], v.get(1).copied().unwrap_or(0));
        }
    }
    sets
}

/// What the C program prints, keyed by a line label, and what Rust says it must be.
struct Expectations {
    c: String,
    rust: BTreeMap<String, i64>,
    /// Labels whose header value must be at least (not equal to) the Rust value (prefix sizes).
    at_least: Vec<String>,
}

impl Expectations {
    fn new() -> Self {
        Expectations { c: String::new(), rust: BTreeMap::new(), at_least: Vec::new() }
    }
    /// `label` must print `rust`; `expr` is the C expression printed.
    fn expect(&mut self, label: String, c_expr: &str, rust: i64) {
        writeln!(self.c, "    printf(\"%s %lld\\n\", \"{label}\", (long long)({c_expr}));").unwrap();
        self.rust.insert(label, rust);
    }
}

/// Versions `base<N>` the header declares (`} base<N>;`; N = 1 for the bare name).
fn declared_versions(headers: &str, base: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let pat = format!("}} {base}");
    let mut rest = headers;
    while let Some(i) = rest.find(&pat) {
        let tail = &rest[i + pat.len()..];
        let digits: String = tail.chars().take_while(|c| c.is_ascii_digit()).collect();
        let after = tail[digits.len()..].trim_start();
        if after.starts_with(';') {
            found.push(if digits.is_empty() { 1 } else { digits.parse().unwrap() });
        }
        rest = tail;
    }
    found.sort_unstable();
    found.dedup();
    found
}

fn versioned_name(base: &str, v: u32) -> String {
    if v == 1 {
        base.to_string()
    } else {
        format!("{base}{v}")
    }
}

/// The C struct names a type stands for in this header set.
fn c_type_names(headers: &str, types: CTypes) -> Vec<String> {
    match types {
        CTypes::Exact(name) => vec![name.to_string()],
        CTypes::Versions { base, first } => declared_versions(headers, base)
            .into_iter()
            .filter(|&v| v >= first)
            .map(|v| versioned_name(base, v))
            .collect(),
    }
}

/// The `v<N> : CUDA Toolkit <releases>` lines of `cupti_version.h`, release -> N.
fn documented_api_versions(version_h: &str) -> BTreeMap<String, u32> {
    let mut map = BTreeMap::new();
    for line in version_h.lines() {
        let l = line.trim_start_matches([' ', '*']).trim();
        let Some(rest) = l.strip_prefix('v') else { continue };
        let Some((num, text)) = rest.split_once(':') else { continue };
        let Ok(n) = num.trim().parse::<u32>() else { continue };
        let Some(releases) = text.trim().strip_prefix("CUDA Toolkit ") else { continue };
        for r in releases.split(", ").flat_map(|p| p.split(" and ")) {
            map.entry(r.trim().to_string()).or_insert(n);
        }
    }
    map
}

/// The CUPTI headers that declare what cupti-sys mirrors (`cupti_activity.h` includes
/// `cupti_activity_deprecated.h`).
const HEADERS: &[&str] = &[
    "cupti_result.h",
    "cupti_version.h",
    "cupti_activity.h",
    "cupti_callbacks.h",
    "cupti_runtime_cbid.h",
    "cupti_driver_cbid.h",
];

fn read_headers(dir: &Path) -> String {
    let mut all = String::new();
    for f in HEADERS.iter().chain(&["cupti_activity_deprecated.h"]) {
        if let Ok(s) = std::fs::read_to_string(dir.join(f)) {
            all.push_str(&s);
        }
    }
    all
}

fn build_program(set: &HeaderSet) -> Expectations {
    let headers = read_headers(&set.cupti_include);
    let mut e = Expectations::new();
    for table in cupti_sys::C_CONSTANTS {
        for c in *table {
            e.expect(format!("constant {}", c.name), c.name, c.value);
        }
    }
    for r in cupti_sys::C_RECORDS {
        let names = c_type_names(&headers, r.c_types);
        assert!(
            !names.is_empty(),
            "{}: no C struct for {} ({:?}) in {}",
            set.label,
            r.rust_name,
            r.c_types,
            set.cupti_include.display()
        );
        for t in names {
            let label = format!("sizeof {t} (for {})", r.rust_name);
            e.expect(label.clone(), &format!("sizeof({t})"), r.size as i64);
            if r.coverage == Coverage::Prefix {
                e.at_least.push(label);
            }
            for f in r.fields {
                e.expect(
                    format!("offsetof {t}.{} ({}.{})", f.c_name, r.rust_name, f.rust_name),
                    &format!("offsetof({t}, {})", f.c_name),
                    f.offset as i64,
                );
                e.expect(
                    format!("sizeof {t}.{} ({}.{})", f.c_name, r.rust_name, f.rust_name),
                    &format!("sizeof((({t} *)0)->{})", f.c_name),
                    f.size as i64,
                );
            }
        }
    }
    for f in cupti_sys::C_FIELDS_AT {
        let names = c_type_names(&headers, f.c_types);
        assert!(!names.is_empty(), "{}: no C struct for {} ({:?})", set.label, f.rust_name, f.c_types);
        for t in names {
            e.expect(
                format!("offsetof {t}.{} ({})", f.c_name, f.rust_name),
                &format!("offsetof({t}, {})", f.c_name),
                f.offset as i64,
            );
            e.expect(
                format!("sizeof {t}.{} ({})", f.c_name, f.rust_name),
                &format!("sizeof((({t} *)0)->{})", f.c_name),
                f.size as i64,
            );
        }
    }
    e
}

fn compile_and_run(set: &HeaderSet, e: &Expectations, work: &Path) -> BTreeMap<String, i64> {
    let src = work.join("check.c");
    let exe = work.join("check");
    let program = format!(
        "#include <stddef.h>\n#include <stdio.h>\n{}\nint main(void)\n{{\n{}    return 0;\n}}\n",
        HEADERS.iter().map(|h| format!("#include <{h}>\n")).collect::<String>(),
        e.c
    );
    std::fs::write(&src, program).unwrap();
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.arg("-std=gnu11").arg("-w").arg("-I").arg(&set.cupti_include).arg("-I").arg(&set.cuda_include);
    if let Some(crt) = &set.crt_include {
        cc.arg("-idirafter").arg(crt);
    }
    let out = cc.arg("-o").arg(&exe).arg(&src).output().expect("run cc");
    assert!(
        out.status.success(),
        "{}: the generated program does not compile against {} (a name cupti-sys declares is missing there?):\n{}",
        set.label,
        set.cupti_include.display(),
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains("error"))
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let run = Command::new(&exe).output().expect("run the generated program");
    assert!(run.status.success(), "{}: generated program failed", set.label);
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (label, v) = l.rsplit_once(' ').unwrap();
            (label.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn skip_requested() -> bool {
    std::env::var("TPROF_CONFORMANCE").is_ok_and(|v| v == "0")
}

#[test]
fn constants_layouts_and_callback_ids_match_every_installed_cupti_header() {
    if skip_requested() {
        eprintln!("skipped: TPROF_CONFORMANCE=0");
        return;
    }
    let sets = header_sets();
    assert!(
        !sets.is_empty(),
        "no CUPTI headers found (.venv/lib/python3*/site-packages/nvidia/cuda_cupti/include, .venv/conformance/nvidia-cuda-cupti*): \
         run scripts/setup-python.sh and scripts/setup-conformance.sh, or set TPROF_CONFORMANCE=0 to skip"
    );
    let work = std::env::temp_dir().join(format!("tprof-real-headers-{}", std::process::id()));
    let mut mismatches = Vec::new();
    let mut checked = 0usize;
    for (i, set) in sets.iter().enumerate() {
        let dir = work.join(i.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let e = build_program(set);
        let header = compile_and_run(set, &e, &dir);
        for (label, &rust) in &e.rust {
            let Some(&c) = header.get(label) else {
                mismatches.push(format!("{}: {label}: not printed", set.label));
                continue;
            };
            checked += 1;
            let ok = if e.at_least.contains(label) { c >= rust } else { c == rust };
            if !ok {
                let rel = if e.at_least.contains(label) { ">= " } else { "" };
                mismatches.push(format!("{}: {label}: header {c}, Rust {rel}{rust}", set.label));
            }
        }
        eprintln!("{}: {} values compared ({})", set.label, e.rust.len(), set.cupti_include.display());
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(mismatches.is_empty(), "{} of {checked} values differ:\n{}", mismatches.len(), mismatches.join("\n"));
    eprintln!("{} header sets, {checked} values, all equal", sets.len());
}

#[test]
fn api_versions_match_cupti_version_h() {
    if skip_requested() {
        eprintln!("skipped: TPROF_CONFORMANCE=0");
        return;
    }
    let sets = header_sets();
    assert!(!sets.is_empty(), "no CUPTI headers found: run scripts/setup-conformance.sh, or set TPROF_CONFORMANCE=0");
    // The newest header documents every version before it.
    let mut documented = BTreeMap::new();
    for set in &sets {
        let text = std::fs::read_to_string(set.cupti_include.join("cupti_version.h")).unwrap();
        documented.extend(documented_api_versions(&text));
    }
    for v in cupti_sys::API_VERSIONS {
        let Some(&n) = documented.get(v.toolkit) else {
            panic!("{}: CUDA Toolkit {} is not in any cupti_version.h list", v.rust_name, v.toolkit);
        };
        assert_eq!(
            n, v.value,
            "{}: cupti_version.h says v{n} for CUDA Toolkit {}, Rust {}",
            v.rust_name, v.toolkit, v.value
        );
    }
}

/// `(name without its _v<digits> suffix, id)` of every callback id enumerator of a cbid header;
/// placeholders of removed functions (`reservedNNN`, `cudaNNN`, `cuNNN`) are left out.
fn cbid_enumerators(text: &str, prefix: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix(prefix) else { continue };
        let Some((name, value)) = rest.split_once('=') else { continue };
        let name = name.trim();
        let Ok(id) = value.trim().trim_end_matches(',').trim().parse::<u32>() else { continue };
        if ["INVALID", "SIZE", "FORCE_INT"].contains(&name) {
            continue;
        }
        let placeholder = ["reserved", "cuda", "cu"]
            .iter()
            .any(|p| name.strip_prefix(p).is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())));
        if placeholder {
            continue;
        }
        let stem = match name.rsplit_once("_v") {
            Some((stem, d)) if d.len() >= 4 && d.bytes().all(|b| b.is_ascii_digit()) => stem,
            _ => name,
        };
        out.push((stem.to_string(), id));
    }
    out
}

#[test]
fn every_callback_id_of_every_installed_cupti_header_is_named() {
    if skip_requested() {
        eprintln!("skipped: TPROF_CONFORMANCE=0");
        return;
    }
    let sets = header_sets();
    assert!(!sets.is_empty(), "no CUPTI headers found: run scripts/setup-python.sh and scripts/setup-conformance.sh");
    // The names every header of a major gives an id: where they differ (renamed within the major),
    // the table holds one of them.
    let mut names_of: BTreeMap<(u32, u32, u32), std::collections::BTreeSet<String>> = BTreeMap::new();
    let mut parsed = Vec::new();
    for set in &sets {
        for (domain, file, prefix) in [
            (cupti_sys::CUPTI_CB_DOMAIN_RUNTIME_API, "cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_"),
            (cupti_sys::CUPTI_CB_DOMAIN_DRIVER_API, "cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_"),
        ] {
            let path = set.cupti_include.join(file);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let ids = cbid_enumerators(&text, prefix);
            assert!(ids.len() > 300, "{}: only {} callback ids parsed", path.display(), ids.len());
            for (name, id) in &ids {
                names_of.entry((set.major.min(13), domain, *id)).or_default().insert(name.clone());
            }
            parsed.push((set.label.clone(), set.major, domain, ids));
        }
    }
    let mut wrong = Vec::new();
    let mut checked = 0usize;
    for (label, major, domain, ids) in &parsed {
        for (name, id) in ids {
            checked += 1;
            let got = cupti_sys::static_cbid_name(*domain, *id, *major);
            let accepted = &names_of[&(major.min(&13).to_owned(), *domain, *id)];
            let ok = got == Some(name.as_str()) || (accepted.len() > 1 && got.is_some_and(|g| accepted.contains(g)));
            if !ok {
                wrong.push(format!("{label}: domain {domain} id {id}: header {name}, table {got:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {checked} callback ids misnamed:\n{}", wrong.len(), wrong.join("\n"));
    eprintln!("{} header sets, {checked} callback ids, all named", sets.len());
}
