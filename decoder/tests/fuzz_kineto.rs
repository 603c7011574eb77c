//! Seeded mutations of the real Kineto traces (truncation, bit flips, wrongly typed fields, NaN
//! tokens): the importer never panics, every event whose bytes the mutation left intact is
//! imported, and a trace that lost events says where (file and offset). A few mutants also go
//! through `tprof summary` under an address-space limit: no abort, no panic, no hang.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tprof_decoder::input::kineto;
use tprof_decoder::input::Notes;
use tprof_decoder::model::*;

/// What an event becomes, as the test reads the original JSON: (kind, name, start ns).
type Key = (char, String, u64);

fn expected(e: &Value) -> Option<Key> {
    if e["ph"] != "X" {
        return None;
    }
    let ts = e["ts"].as_f64()?;
    let kind = match e["cat"].as_str()? {
        "kernel" | "Kernel" => 'K',
        "cuda_runtime" | "cuda_driver" | "Runtime" | "Driver" => 'A',
        "user_annotation" | "cpu_op" | "Operator" => 'R',
        _ => return None,
    };
    let start = if ts > 0.0 { (ts * 1000.0).round() as u64 } else { 0 };
    Some((kind, e["name"].as_str()?.to_string(), start))
}

#[derive(Default)]
struct Imported(HashMap<Key, usize>);
impl Imported {
    fn add(&mut self, k: Key) {
        *self.0.entry(k).or_default() += 1;
    }
}
impl TraceSink for Imported {
    fn handle_kernel(&mut self, k: &Kernel) {
        self.add(('K', k.name.to_string(), k.start));
    }
    fn handle_api(&mut self, a: &Api) {
        self.add(('A', a.name.to_string(), a.start));
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.add(('R', r.name.to_string(), r.start));
    }
}

/// The trace rewritten one event per line: the text and each event's byte span and expectation.
struct Canonical {
    text: Vec<u8>,
    spans: Vec<(usize, usize, Option<Key>)>,
}

fn canonical(path: &Path) -> Canonical {
    let mut json = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap()).read_to_end(&mut json).unwrap();
    let doc: Value = serde_json::from_slice(&json).unwrap();
    let mut text = b"{\"schemaVersion\":1,\"traceEvents\":[\n".to_vec();
    let mut spans = Vec::new();
    for (i, e) in doc["traceEvents"].as_array().unwrap().iter().enumerate() {
        if i > 0 {
            text.extend_from_slice(b",\n");
        }
        let s = text.len();
        text.extend_from_slice(serde_json::to_string(e).unwrap().as_bytes());
        spans.push((s, text.len(), expected(e)));
    }
    text.extend_from_slice(b"\n],\"distributedInfo\":");
    text.extend_from_slice(serde_json::to_string(&doc["distributedInfo"]).unwrap().as_bytes());
    text.extend_from_slice(b"}\n");
    Canonical { text, spans }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A mutant and the byte ranges it changed (a truncation changes everything after the cut).
fn mutate(c: &Canonical, rng: &mut Rng, kind: usize) -> (Vec<u8>, Vec<(usize, usize)>, String) {
    let mut t = c.text.clone();
    match kind {
        0 => {
            let cut = 40 + rng.below(t.len() - 40);
            t.truncate(cut);
            (t, vec![(cut, usize::MAX)], format!("truncated at {cut}"))
        }
        1 => {
            let mut changed = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(t.len());
                t[at] ^= 1 << rng.below(8);
                changed.push((at, at + 1));
            }
            let what = format!("bit flips at {changed:?}");
            (t, changed, what)
        }
        _ => {
            // A wrongly typed field or a NaN in one event.
            let (s, e, _) = c.spans[rng.below(c.spans.len())];
            let ev = String::from_utf8(t[s..e].to_vec()).unwrap();
            let swaps: [(&str, &str); 4] = [
                ("\"ph\":\"X\"", "\"ph\":null"),
                ("\"name\":\"", "\"name\":7,\"x\":\""),
                ("\"dur\":", "\"dur\":NaN,\"x\":"),
                ("\"ts\":", "\"ts\":Infinity,\"x\":"),
            ];
            let (from, to) = swaps[rng.below(swaps.len())];
            let new = ev.replacen(from, to, 1);
            t.splice(s..e, new.bytes());
            (t, vec![(s, e)], format!("event at {s}: {from} -> {to}"))
        }
    }
}

#[test]
fn mutated_real_traces_keep_every_intact_event() {
    let dir = tprof_decoder::testkit::kineto_traces_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut cli_runs = 0;
    for f in &files {
        let c = canonical(f);
        let total = c.spans.iter().filter(|s| s.2.is_some()).count();
        for round in 0..24 {
            let (text, changed, what) = mutate(&c, &mut rng, round % 3);
            // Changes are in the original's offsets (a splice replaces one event's bytes; the
            // others are unchanged, only moved): an event is intact when it overlaps none.
            let intact = |s: usize, e: usize| changed.iter().all(|&(a, b)| e <= a || s >= b);
            let path = tmp.path().join(format!("m{round}.json"));
            std::fs::write(&path, &text).unwrap();
            let mut got = Imported::default();
            let mut notes = Notes::default();
            let r = kineto::feed(&path, ProcId(0), &mut got, &mut notes);
            let mut want: HashMap<Key, usize> = HashMap::new();
            for (s, e, k) in &c.spans {
                if let Some(k) = k {
                    if intact(*s, *e) {
                        *want.entry(k.clone()).or_default() += 1;
                    }
                }
            }
            let kept: usize = want.values().sum();
            match r {
                Ok(_) => {
                    for (k, n) in &want {
                        let have = got.0.get(k).copied().unwrap_or(0);
                        assert!(
                            have >= *n,
                            "{}: {what}: intact event {k:?} x{n} imported x{have}; notes {notes:?}",
                            f.display()
                        );
                    }
                    let imported: usize = got.0.values().sum();
                    if imported < total {
                        let said =
                            notes.iter().any(|n| n.path.as_deref() == Some(&path) && n.message.contains("offset"));
                        assert!(said, "{what}: {imported} of {total} events and no note with an offset: {notes:?}");
                    }
                }
                Err(e) => {
                    assert_eq!(kept, 0, "{what}: rejected ({e}) though {kept} events are intact");
                    let msg = e.to_string();
                    assert!(msg.contains(&*path.to_string_lossy()) && msg.contains("offset"), "{msg}");
                }
            }
            if round % 8 == 1 {
                cli_summary(&path, &what);
                cli_runs += 1;
            }
            std::fs::remove_file(&path).unwrap();
        }
    }
    assert!(cli_runs >= files.len() * 3);
}

/// `tprof summary` of a mutant under 1 GiB of address space and 60 s: exits 0 (damage in the
/// notes, with the file and an offset) or 1, never a signal or a panic.
fn cli_summary(path: &Path, what: &str) {
    let out = Command::new("timeout")
        .args(["60", "prlimit", "--as=1073741824", env!("CARGO_BIN_EXE_tprof"), "summary", "--json"])
        .arg(path)
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(matches!(code, Some(0 | 1)), "{what}: tprof summary ended {:?}: {err}", out.status);
    assert!(!err.contains("panicked"), "{what}: {err}");
    if code == Some(0) {
        let s: Value = serde_json::from_slice(&out.stdout).unwrap();
        for n in s["notes"].as_array().unwrap() {
            let n = n.to_string();
            if n.contains("damage") || n.contains("ends early") {
                assert!(n.contains(&*path.to_string_lossy()) && n.contains("offset"), "{what}: {n}");
            }
        }
    } else {
        assert!(err.contains(&*path.to_string_lossy()), "{what}: {err}");
    }
}
