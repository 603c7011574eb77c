//! `tprof info`, `tprof dump`, `tprof check`: thin commands over the format reader.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tprof_format::{type_name, Damage, Decoded, MarkerKind, Record, RingReader};

fn open(path: &Path) -> Result<RingReader, i32> {
    RingReader::open(path).map_err(|e| {
        eprintln!("tprof: {e}");
        1
    })
}

/// One line on stderr per damaged region: file, byte offset, what.
fn report_damage(path: &Path, d: &Damage) {
    eprintln!("tprof: {}: damage at offset {}: {}", path.display(), d.offset, d.what);
}

/// `writeln!` into a `String` (which cannot fail).
macro_rules! line {
    ($o:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($o, $($arg)*);
    }};
}

/// Replace `StrId(N)` in a record's debug text by the quoted name.
fn resolve(text: &str, r: &RingReader, inline: &BTreeMap<u32, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("StrId(") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 6..];
        match after.find(')').and_then(|j| after[..j].parse::<u32>().ok().map(|n| (j, n))) {
            Some((j, n)) => {
                let name = inline.get(&n).cloned().unwrap_or_else(|| r.name(tprof_format::StrId(n)).into_owned());
                out.push_str(&format!("{:?}", crate::bounded_names::cap(&name)));
                rest = &after[j + 1..];
            }
            None => {
                out.push_str("StrId(");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

pub fn info(path: &Path) -> i32 {
    let r = match open(path) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let h = r.header();
    let st = r.stats();
    let mut o = String::new();
    line!(o, "file:        {}", path.display());
    line!(o, "format:      version {}, writer {}, mode {}", h.version, h.writer, h.mode);
    line!(o, "process:     pid {} (ppid {}) on {}", h.pid, h.ppid, h.hostname);
    line!(o, "command:     {}", h.cmdline.join(" "));
    let opt = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
    line!(o, "rank:        {} (local {}, world {})", opt(h.rank), opt(h.local_rank), opt(h.world_size));
    if let Some(j) = &h.job_id {
        line!(o, "job:         {j}");
    }
    line!(
        o,
        "clock:       {} ({:.0} ticks/s), start wall {} ns",
        h.clock_source.name(),
        h.ticks_per_sec,
        h.start_wall_ns
    );
    line!(
        o,
        "ring:        {} chunks x {} bytes ({} intact, {} empty), dictionary {} bytes, {} strings",
        h.chunk_count,
        h.chunk_bytes,
        r.chunks().len(),
        r.empty_slots(),
        h.dict_bytes,
        r.strings().len()
    );
    line!(
        o,
        "state:       {}{}",
        if st.clean_close() { "closed cleanly" } else { "not closed (crash or still running)" },
        if st.wrapped() { ", wrapped (oldest events overwritten)" } else { "" }
    );
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let mut damage: Vec<Damage> = r.damage().to_vec();
    // What CUPTI reported dropped, as the ring's CuptiDropped markers tell it (rings of older writers
    // have the markers but not the header count).
    let mut cupti_dropped_marked = 0u64;
    for item in r.records() {
        match item {
            Ok(Decoded::Record(rec)) => {
                *counts.entry(rec.type_name()).or_default() += 1;
                if let Record::Marker { kind: MarkerKind::CuptiDropped, value, .. } = rec {
                    cupti_dropped_marked += value;
                }
                if let Some(t) = rec.timestamp() {
                    if t > 0 {
                        lo = lo.min(t);
                        hi = hi.max(t);
                    }
                }
            }
            Ok(Decoded::String { .. }) => *counts.entry("string").or_default() += 1,
            Ok(Decoded::Unknown { code, .. }) => *counts.entry(type_name(code)).or_default() += 1,
            Err(d) => damage.push(d),
        }
    }
    let total: u64 = counts.values().sum();
    line!(o, "records:     {total}");
    for (k, v) in &counts {
        line!(o, "  {k:<22} {v}");
    }
    if lo <= hi {
        let tc = r.tick_converter();
        let span = tc.to_mono_ns(hi).saturating_sub(tc.to_mono_ns(lo));
        line!(o, "time span:   {:.6} s (wall {} .. {})", span as f64 / 1e9, tc.to_wall_ns(lo), tc.to_wall_ns(hi));
    }
    let cupti_dropped = st.cupti_dropped.max(cupti_dropped_marked);
    line!(o, "dropped:     {} events (shim), {} records (CUPTI)", st.dropped_events, cupti_dropped);
    if damage.is_empty() {
        line!(o, "damage:      none");
        return super::stdout::status(super::stdout::print(&o), 0);
    }
    line!(o, "damage:      {}", damage.len());
    for d in &damage {
        line!(o, "  offset {}: {}", d.offset, d.what);
    }
    if let Err(code) = super::stdout::print(&o) {
        return code;
    }
    for d in &damage {
        report_damage(path, d);
    }
    1
}

/// One record as a flat JSON object: `type`, `wall_ns`, then its fields with names resolved
/// (`name`, `detail` and NVTX `domain` ids become strings; enums are their variant names).
fn record_json(
    rec: &tprof_format::Record,
    r: &tprof_format::RingReader,
    inline: &BTreeMap<u32, String>,
    wall_ns: Option<u64>,
) -> serde_json::Value {
    let mut obj = serde_json::Map::new();
    obj.insert("type".into(), rec.type_name().into());
    obj.insert("wall_ns".into(), wall_ns.into());
    if let Ok(serde_json::Value::Object(outer)) = serde_json::to_value(rec) {
        if let Some((_, serde_json::Value::Object(fields))) = outer.into_iter().next() {
            for (k, v) in fields {
                let resolved = match (&*k, &v) {
                    ("name" | "detail" | "domain", serde_json::Value::Number(n)) => {
                        let id = n.as_u64().unwrap_or(0) as u32;
                        let text =
                            inline.get(&id).cloned().unwrap_or_else(|| r.name(tprof_format::StrId(id)).into_owned());
                        serde_json::Value::String(crate::bounded_names::cap(&text).into_owned())
                    }
                    _ => v,
                };
                obj.insert(k, resolved);
            }
        }
    }
    serde_json::Value::Object(obj)
}

pub fn dump(path: &Path, json: bool) -> i32 {
    use std::io::Write;
    let r = match open(path) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let tc = r.tick_converter();
    let mut inline: BTreeMap<u32, String> = BTreeMap::new();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // Damage found while opening (header, dictionary, skipped chunks) comes first.
    let mut status = 0;
    for d in r.damage() {
        report_damage(path, d);
        status = 1;
    }
    for item in r.records() {
        let line = match item {
            Ok(Decoded::Record(rec)) => {
                let text = resolve(&format!("{rec:?}"), &r, &inline);
                let ts = rec.timestamp();
                if json {
                    record_json(&rec, &r, &inline, ts.map(|t| tc.to_wall_ns(t))).to_string()
                } else {
                    match ts {
                        Some(t) => format!("{:>20} {text}", tc.to_wall_ns(t)),
                        None => format!("{:>20} {text}", "-"),
                    }
                }
            }
            Ok(Decoded::String { id, bytes }) => {
                let s = String::from_utf8_lossy(bytes).into_owned();
                inline.insert(id.0, s.clone());
                if json {
                    serde_json::json!({"type": "string", "id": id.0, "text": s}).to_string()
                } else {
                    format!("{:>20} String {{ id: {}, text: {s:?} }}", "-", id.0)
                }
            }
            Ok(Decoded::Unknown { code, payload }) => {
                if json {
                    serde_json::json!({"type": "unknown", "code": code, "bytes": payload.len()}).to_string()
                } else {
                    format!("{:>20} Unknown {{ code: {code}, bytes: {} }}", "-", payload.len())
                }
            }
            Err(d) => {
                status = 1;
                report_damage(path, &d);
                continue;
            }
        };
        if let Err(e) = writeln!(out, "{line}") {
            return super::stdout::failed(&e);
        }
    }
    if let Err(e) = out.flush() {
        return super::stdout::failed(&e);
    }
    status
}

/// The ring files `check` verifies: files as given, directories searched for every ring under
/// them (as the analyses search them). A directory without rings counts as a failure.
fn check_targets(args: &[PathBuf], bad: &mut usize, lines: &mut Vec<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in args {
        if !a.is_dir() {
            out.push(a.clone());
            continue;
        }
        let mut notes = crate::input::Notes::default();
        let arg = a.display().to_string();
        match crate::input::discover(&[arg], &mut notes) {
            Ok(sources) => {
                let rings: Vec<PathBuf> =
                    sources.into_iter().filter(|s| s.kind == crate::input::SourceKind::Ring).map(|s| s.path).collect();
                if rings.is_empty() {
                    lines.push(format!("{}: no ring files in this directory", a.display()));
                    *bad += 1;
                }
                out.extend(rings);
            }
            Err(e) => {
                lines.push(e.to_string());
                *bad += 1;
            }
        }
        for n in notes.iter() {
            eprintln!("tprof: {n}");
        }
    }
    out
}

pub fn check(args: &[PathBuf]) -> i32 {
    let mut bad = 0;
    let mut lines = Vec::new();
    let files = check_targets(args, &mut bad, &mut lines);
    for l in lines {
        if let Err(code) = super::stdout::println(&l) {
            return code;
        }
    }
    // Each file's report goes out as it is made.
    let say = |text: String| super::stdout::println(&text);
    for f in &files {
        let r = match RingReader::open(f) {
            Ok(r) => r,
            Err(e) => {
                bad += 1;
                if let Err(code) = say(e.to_string()) {
                    return code;
                }
                continue;
            }
        };
        let mut damage: Vec<Damage> = r.damage().to_vec();
        let mut records = 0u64;
        for item in r.records() {
            match item {
                Ok(_) => records += 1,
                Err(d) => damage.push(d),
            }
        }
        let mut report = if damage.is_empty() {
            format!("{}: ok ({records} records, {} chunks)", f.display(), r.chunks().len())
        } else {
            bad += 1;
            format!("{}: DAMAGED ({records} records readable)", f.display())
        };
        for d in &damage {
            report.push_str(&format!("\n{}: offset {}: {}", f.display(), d.offset, d.what));
        }
        if let Err(code) = say(report) {
            return code;
        }
    }
    if bad > 0 {
        1
    } else {
        0
    }
}
