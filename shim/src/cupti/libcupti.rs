//! Finding and loading `libcupti` at run time (never linked), and resolving its entry points.
//!
//! Search order: `TPROF_CUPTI_PATH`; a libcupti the program already loaded (tprof then shares that
//! object); then, for the CUPTI major of the loaded `libcudart` first (CUPTI must come from the
//! runtime's toolkit) and the other majors after: beside the loaded `libcudart` (and its toolkit's
//! `extras/CUPTI/lib64`); the pip wheel folders (`<site-packages>/nvidia/cuda_cupti/lib`,
//! `<site-packages>/nvidia/cu13/lib`) of every loaded library under a `site-packages`;
//! `$CUDA_HOME`/`$CUDA_PATH` (`extras/CUPTI/lib64`, `lib64`), `/usr/local/cuda`; then the loader's
//! default search for `libcupti.so.<major>` and `libcupti.so`.

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};

use cupti_sys as sys;

use crate::base::config::config;
use crate::base::dynamic_loader::{self, loaded_objects};

/// The CUPTI entry points tprof uses (resolved once; immutable afterwards).
pub struct CuptiApi {
    pub path: String,
    pub version: u32,
    /// What `cuptiGetVersion` returned (`version` means something only on success).
    pub version_result: sys::CUptiResult,
    pub subscribe: sys::FnSubscribe,
    pub unsubscribe: sys::FnUnsubscribe,
    pub enable: sys::FnActivityEnable,
    pub disable: sys::FnActivityDisable,
    pub register_callbacks: sys::FnActivityRegisterCallbacks,
    pub register_timestamp_callback: sys::FnActivityRegisterTimestampCallback,
    pub flush_all: sys::FnActivityFlushAll,
    pub get_next_record: sys::FnActivityGetNextRecord,
    pub get_num_dropped: sys::FnActivityGetNumDroppedRecords,
    pub push_external_id: sys::FnActivityPushExternalCorrelationId,
    pub pop_external_id: sys::FnActivityPopExternalCorrelationId,
    pub flush_period: Option<sys::FnActivityFlushPeriod>,
    pub get_callback_name: Option<sys::FnGetCallbackName>,
    pub set_thread_id_type: Option<sys::FnSetThreadIdType>,
    pub get_timestamp: Option<sys::FnGetTimestamp>,
}

// SAFETY: the struct holds only C function pointers and immutable data; CUPTI's entry points are
// callable from any thread.
unsafe impl Sync for CuptiApi {}
// SAFETY: as above.
unsafe impl Send for CuptiApi {}

impl CuptiApi {
    /// The name of a result code, from cupti-sys's table: never `cuptiGetResultString`, which
    /// CUPTI 13.2 without a driver recurses in until the stack overflows.
    pub fn result_name(&self, r: sys::CUptiResult) -> String {
        sys::result_name(r).to_string()
    }
}

/// The CUPTI major versions tprof can use, newest first.
const MAJORS: [u32; 2] = [13, 12];

/// The major version in a `lib<name>.so.<major>[.…]` file name.
fn soname_major(file: &str, stem: &str) -> Option<u32> {
    file.strip_prefix(stem)?.split('.').next()?.parse().ok()
}

/// Which CUPTI major to prefer: that of the loaded `libcudart` (CUPTI must match the runtime's
/// toolkit), else the newest.
fn preferred_major(loaded: &[PathBuf]) -> u32 {
    loaded
        .iter()
        .filter_map(|p| p.file_name()?.to_str().and_then(|f| soname_major(f, "libcudart.so.")))
        .find(|m| MAJORS.contains(m))
        .unwrap_or(MAJORS[0])
}

/// File names to try, the preferred major first, then the others, then the unversioned name.
fn names(preferred: u32) -> Vec<String> {
    let mut out = vec![format!("libcupti.so.{preferred}")];
    out.extend(MAJORS.iter().filter(|&&m| m != preferred).map(|m| format!("libcupti.so.{m}")));
    out.push("libcupti.so".into());
    out
}

/// A libcupti the program already loaded (Kineto links it): tprof must use that very object, never a
/// second copy.
pub(crate) fn already_loaded(loaded: &[PathBuf]) -> Option<PathBuf> {
    loaded
        .iter()
        .find(|p| p.file_name().and_then(|f| f.to_str()).is_some_and(|f| f.starts_with("libcupti.so")))
        .cloned()
}

/// Candidate files, most specific first: every folder with the preferred major's name before any
/// other major's.
fn candidates() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let loaded = loaded_objects();
    for obj in &loaded {
        let file = obj.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        if let (true, Some(dir)) = (file.starts_with("libcudart.so"), obj.parent()) {
            dirs.push(dir.to_path_buf());
            if let Some(toolkit) = dir.parent() {
                dirs.push(toolkit.join("extras/CUPTI/lib64"));
                // pip: nvidia/cuda_runtime/lib/libcudart.so.12 -> nvidia/cuda_cupti/lib
                dirs.push(toolkit.join("../cuda_cupti/lib"));
            }
        }
    }
    for obj in &loaded {
        if let Some(site) = obj
            .ancestors()
            .find(|a| a.file_name().map(|n| n == "site-packages" || n == "dist-packages").unwrap_or(false))
        {
            dirs.push(site.join("nvidia/cuda_cupti/lib"));
            dirs.push(site.join("nvidia/cu13/lib"));
        }
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let home = PathBuf::from(home);
            dirs.push(home.join("extras/CUPTI/lib64"));
            dirs.push(home.join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/extras/CUPTI/lib64"));
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for n in names(preferred_major(&loaded)) {
        for d in &dirs {
            let p = d.join(&n);
            if seen.insert(p.clone()) {
                out.push(p);
            }
        }
    }
    out
}

fn open(path: &Path) -> Option<*mut c_void> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: dlopen with a NUL-terminated path; the handle is kept for the life of the process.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    (!h.is_null()).then_some(h)
}

/// Loads libcupti and resolves its entry points. Err: a short description of where it looked.
pub fn load() -> Result<CuptiApi, String> {
    let mut tried: Vec<String> = Vec::new();
    let explicit = config().cupti_path.as_ref();
    let mut handle = None;
    if let Some(p) = explicit {
        let p = p.clone();
        tried.push(p.display().to_string());
        handle = open(&p).map(|h| (h, p));
    }
    if handle.is_none() && explicit.is_none() {
        if let Some(p) = already_loaded(&loaded_objects()) {
            tried.push(p.display().to_string());
            handle = open(&p).map(|h| (h, p));
        }
    }
    if handle.is_none() && explicit.is_none() {
        for p in candidates() {
            if !p.exists() {
                continue;
            }
            tried.push(p.display().to_string());
            if let Some(h) = open(&p) {
                handle = Some((h, p));
                break;
            }
        }
        if handle.is_none() {
            for n in names(preferred_major(&loaded_objects())) {
                tried.push(n.clone());
                if let Some(h) = open(Path::new(&n)) {
                    handle = Some((h, PathBuf::from(n)));
                    break;
                }
            }
        }
    }
    let Some((h, path)) = handle else {
        return Err(if tried.is_empty() { "nowhere".into() } else { tried.join(", ") });
    };
    resolve(h, path.display().to_string())
}

fn resolve(h: *mut c_void, path: String) -> Result<CuptiApi, String> {
    macro_rules! req {
        ($name:literal, $ty:ty) => {{
            // SAFETY: `h` is a live dlopen handle; the name is NUL-terminated.
            let p = unsafe { dynamic_loader::symbol(h, $name) };
            if p.is_null() {
                return Err(format!("{path} (it lacks {})", $name.to_string_lossy()));
            }
            // SAFETY: the symbol is the CUPTI function of that name, whose C signature is $ty.
            unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
        }};
    }
    macro_rules! opt {
        ($name:literal, $ty:ty) => {{
            // SAFETY: `h` is a live dlopen handle; the name is NUL-terminated.
            let p = unsafe { dynamic_loader::symbol(h, $name) };
            // SAFETY: the symbol is the CUPTI function of that name, whose C signature is $ty.
            (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, $ty>(p) })
        }};
    }
    let get_version: sys::FnGetVersion = req!(c"cuptiGetVersion", sys::FnGetVersion);
    let mut version = 0u32;
    // SAFETY: cuptiGetVersion writes one u32 into our variable.
    let version_result = unsafe { get_version(&mut version) };
    Ok(CuptiApi {
        version_result,
        version,
        subscribe: req!(c"cuptiSubscribe", sys::FnSubscribe),
        unsubscribe: req!(c"cuptiUnsubscribe", sys::FnUnsubscribe),
        enable: req!(c"cuptiActivityEnable", sys::FnActivityEnable),
        disable: req!(c"cuptiActivityDisable", sys::FnActivityDisable),
        register_callbacks: req!(c"cuptiActivityRegisterCallbacks", sys::FnActivityRegisterCallbacks),
        register_timestamp_callback: req!(
            c"cuptiActivityRegisterTimestampCallback",
            sys::FnActivityRegisterTimestampCallback
        ),
        flush_all: req!(c"cuptiActivityFlushAll", sys::FnActivityFlushAll),
        get_next_record: req!(c"cuptiActivityGetNextRecord", sys::FnActivityGetNextRecord),
        get_num_dropped: req!(c"cuptiActivityGetNumDroppedRecords", sys::FnActivityGetNumDroppedRecords),
        push_external_id: req!(c"cuptiActivityPushExternalCorrelationId", sys::FnActivityPushExternalCorrelationId),
        pop_external_id: req!(c"cuptiActivityPopExternalCorrelationId", sys::FnActivityPopExternalCorrelationId),
        flush_period: opt!(c"cuptiActivityFlushPeriod", sys::FnActivityFlushPeriod),
        get_callback_name: opt!(c"cuptiGetCallbackName", sys::FnGetCallbackName),
        set_thread_id_type: opt!(c"cuptiSetThreadIdType", sys::FnSetThreadIdType),
        get_timestamp: opt!(c"cuptiGetTimestamp", sys::FnGetTimestamp),
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_end_with_the_default_names_in_known_folders() {
        let c = candidates();
        assert!(c.iter().any(|p| p.ends_with("extras/CUPTI/lib64/libcupti.so.12")));
    }

    #[test]
    fn the_runtime_major_decides_which_cupti_comes_first() {
        let loaded = |names: &[&str]| names.iter().map(PathBuf::from).collect::<Vec<_>>();
        let rt13 =
            loaded(&["/x/libc.so.6", "/sp/nvidia/cu13/lib/libcudart.so.13", "/sp/nvidia/cuda_cupti/lib/libz.so"]);
        assert_eq!(preferred_major(&rt13), 13);
        assert_eq!(names(13), ["libcupti.so.13", "libcupti.so.12", "libcupti.so"]);
        let rt12 = loaded(&["/sp/nvidia/cuda_runtime/lib/libcudart.so.12.9.79"]);
        assert_eq!(preferred_major(&rt12), 12);
        assert_eq!(names(12)[0], "libcupti.so.12");
        assert_eq!(preferred_major(&loaded(&["/a/libcudart.so"])), 13, "unknown major: newest first");
        let with_cupti = loaded(&["/a/libcudart.so.12", "/b/libcupti.so.12.9.1"]);
        assert_eq!(already_loaded(&with_cupti), Some(PathBuf::from("/b/libcupti.so.12.9.1")));
        assert_eq!(already_loaded(&rt12), None);
    }
}
