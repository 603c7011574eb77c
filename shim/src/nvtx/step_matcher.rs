//! Training-step detection from NVTX range names.
//!
//! `TPROF_STEP_MARKER` is a list of patterns separated by `,` or `|`; `*` matches any run of
//! characters (`ProfilerStep#*`, `train*step`). Without it, a range is a step when its name is one of
//! `step`, `train_step`, `training_step`, `train-step`, `Step`, or starts with `ProfilerStep#`
//! (PyTorch's profiler), or is `step` / `Step` followed by a space or `#` and digits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use tprof_format::StrId;

const DEFAULT_EXACT: &[&str] = &["step", "train_step", "training_step", "train-step", "Step", "train step"];

/// A compiled matcher.
#[derive(Debug, Clone)]
pub struct StepMatcher {
    patterns: Option<Vec<String>>,
}

impl StepMatcher {
    pub fn new(spec: Option<&str>) -> StepMatcher {
        let patterns = spec
            .map(|s| s.split([',', '|']).map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect::<Vec<_>>());
        StepMatcher { patterns: patterns.filter(|p| !p.is_empty()) }
    }

    pub fn matches(&self, name: &[u8]) -> bool {
        match &self.patterns {
            Some(pats) => pats.iter().any(|p| glob(p.as_bytes(), name)),
            None => default_match(name),
        }
    }
}

fn default_match(name: &[u8]) -> bool {
    if DEFAULT_EXACT.iter().any(|e| e.as_bytes() == name) || name.starts_with(b"ProfilerStep#") {
        return true;
    }
    for prefix in [&b"step"[..], b"Step"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            if let Some(digits) = rest.strip_prefix(b" ").or_else(|| rest.strip_prefix(b"#")) {
                if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                    return true;
                }
            }
        }
    }
    false
}

/// `*`-glob match over bytes (iterative, with backtracking to the last star).
pub fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The step number in a name (`ProfilerStep#12` -> 12), if it ends with digits.
pub fn trailing_number(name: &[u8]) -> Option<u64> {
    let start = name.iter().rposition(|c| !c.is_ascii_digit()).map(|i| i + 1).unwrap_or(0);
    std::str::from_utf8(&name[start..]).ok()?.parse().ok()
}

fn matcher() -> &'static StepMatcher {
    static M: OnceLock<StepMatcher> = OnceLock::new();
    M.get_or_init(|| StepMatcher::new(crate::base::config::config().step_marker.as_deref()))
}

const CACHE: usize = 4096;
const KNOWN: u64 = 1 << 1;
const IS_STEP: u64 = 1;
/// Per interned name: `(id << 2) | KNOWN | is_step`, direct-mapped.
static VERDICTS: [AtomicU64; CACHE] = [const { AtomicU64::new(0) }; CACHE];

/// Whether the range name `id` (text `text`) is a step marker; cached per name.
pub fn is_step(id: StrId, text: &[u8]) -> bool {
    if id == StrId::NONE {
        return false;
    }
    let slot = &VERDICTS[id.0 as usize % CACHE];
    let v = slot.load(Ordering::Relaxed);
    if v & KNOWN != 0 && (v >> 2) as u32 == id.0 {
        return v & IS_STEP != 0;
    }
    let step = matcher().matches(text);
    slot.store(((id.0 as u64) << 2) | KNOWN | step as u64, Ordering::Relaxed);
    step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names() {
        let m = StepMatcher::new(None);
        for yes in ["step", "train_step", "ProfilerStep#3", "step 12", "Step#4"] {
            assert!(m.matches(yes.as_bytes()), "{yes}");
        }
        for no in ["forward", "steps", "stepper", "step x", "ProfilerStep", "optimizer.step"] {
            assert!(!m.matches(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn user_patterns_with_globs() {
        let m = StepMatcher::new(Some("iter*, train*step|exact"));
        assert!(m.matches(b"iteration 5"));
        assert!(m.matches(b"train_big_step"));
        assert!(m.matches(b"exact"));
        assert!(!m.matches(b"step"));
        assert!(glob(b"*", b""));
        assert!(glob(b"a*b*c", b"axxbyyc"));
        assert!(!glob(b"a*b*c", b"axxbyy"));
    }

    #[test]
    fn numbers() {
        assert_eq!(trailing_number(b"ProfilerStep#12"), Some(12));
        assert_eq!(trailing_number(b"step"), None);
    }
}
