//! Seeded fuzzing of real ring files (issue #14, "Done when"): simtrain runs on the simulated GPU under
//! the shim; its rings are then mutated (truncation, bit flips, length and id fields set to extremes
//! behind valid checksums, duplicated and reordered chunks) and every command is run on them under an
//! address-space limit and a timeout. It checks: no abort, no panic (exit 101), no hang; damage gives
//! exit 1 from check / info / dump with the file and an offset named, the analyses exit 0 or 1 and
//! name the damage's offset; and no intact chunk is lost (its records decode as in the original, and
//! `dump` shows at least the records of the intact chunks).
//!
//! The seed is printed; `TPROF_FUZZ_SEED=N` replays it, `TPROF_FUZZ_SECS` sets the time spent
//! mutating (default 40 s, two workers).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tprof_e2e::diagnose::{tprof_bin, tprof_lib};
use tprof_e2e::programs::{exclusive, require_mock_libs, require_program, run, sim_command, simtrain_libs, TempDir};
use tprof_format::chunk::{chunk_crc, commit_word, CHUNK_HEADER_BYTES};
use tprof_format::codec::peek_frame;
use tprof_format::{Decoded, Record, RingReader};

/// Address-space limit of every command (as in decoder/tests/hostile_input.rs).
const AS_LIMIT: &str = "--as=1073741824";
/// A command running longer than this is a hang.
const COMMAND_TIMEOUT_S: &str = "30";

/// xorshift64*: small, seeded, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One intact chunk of an original ring: where it lies and what it decodes to.
#[derive(Clone)]
struct Chunk {
    seq: u64,
    offset: usize,
    /// Header + committed payload.
    bytes: usize,
    records: Vec<Record>,
    /// Offsets (in the file) of the frames of its payload.
    frames: Vec<usize>,
}

/// An original ring and its decode.
struct Original {
    bytes: Vec<u8>,
    chunks: Vec<Chunk>,
    chunk_bytes: usize,
    chunk_count: usize,
    ring_offset: usize,
    /// (offset, payload length) of each dictionary entry.
    dict: Vec<(usize, usize)>,
}

fn records_of(r: &RingReader, c: &tprof_format::ChunkRef) -> Vec<Record> {
    r.chunk_records(c).filter_map(|i| if let Ok(Decoded::Record(rec)) = i { Some(rec) } else { None }).collect()
}

fn load(path: &Path) -> Original {
    let bytes = std::fs::read(path).unwrap();
    let r = RingReader::from_bytes(path, bytes.clone()).unwrap();
    assert!(r.damage().is_empty(), "{}: the original is damaged: {:?}", path.display(), r.damage());
    let chunks = r
        .chunks()
        .iter()
        .map(|c| {
            let start = c.offset as usize + CHUNK_HEADER_BYTES;
            let mut frames = Vec::new();
            let mut pos = 0;
            while pos < c.len as usize {
                frames.push(start + pos);
                pos += peek_frame(&bytes[start + pos..start + c.len as usize]).unwrap().1;
            }
            Chunk {
                seq: c.seq,
                offset: c.offset as usize,
                bytes: CHUNK_HEADER_BYTES + c.len as usize,
                records: records_of(&r, c),
                frames,
            }
        })
        .collect();
    let h = r.header();
    let mut dict = Vec::new();
    let mut pos = h.dict_offset as usize;
    while pos + 8 <= h.ring_offset as usize {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        dict.push((pos, len));
        pos += (8 + len + 3) & !3;
    }
    Original {
        chunks,
        chunk_bytes: h.chunk_bytes as usize,
        chunk_count: h.chunk_count as usize,
        ring_offset: h.ring_offset as usize,
        dict,
        bytes,
    }
}

/// A mutated file: its bytes, what was done, and the seqs of the chunks it leaves intact.
struct Case {
    bytes: Vec<u8>,
    what: String,
    intact: Vec<u64>,
}

fn reseal(bytes: &mut [u8], c: &Chunk) {
    let len = (c.bytes - CHUNK_HEADER_BYTES) as u32;
    let crc = chunk_crc(&bytes[c.offset + 16..c.offset + 32], &bytes[c.offset + 32..c.offset + c.bytes]);
    bytes[c.offset + 8..c.offset + 16].copy_from_slice(&commit_word(len, crc).to_le_bytes());
}

/// Chunks untouched by changes to the byte ranges `hit`.
fn untouched(o: &Original, hit: &[(usize, usize)]) -> Vec<u64> {
    o.chunks
        .iter()
        .filter(|c| hit.iter().all(|&(a, b)| b <= c.offset || a >= c.offset + c.bytes))
        .map(|c| c.seq)
        .collect()
}

fn mutate(o: &Original, rng: &mut Rng) -> Case {
    let mut b = o.bytes.clone();
    let len = b.len();
    let pick = |rng: &mut Rng| o.chunks[rng.below(o.chunks.len())].clone();
    match rng.below(9) {
        0 => {
            let cut = rng.below(len);
            b.truncate(cut);
            let intact = if cut < 4096 {
                Vec::new()
            } else {
                o.chunks.iter().filter(|c| c.offset + c.bytes <= cut).map(|c| c.seq).collect()
            };
            Case { bytes: b, what: format!("truncated to {cut} bytes"), intact }
        }
        1 => {
            // Bit flips, a third of them in the header page, a sixth in the dictionary.
            let n = 1 + rng.below(8);
            let mut hit = Vec::new();
            for _ in 0..n {
                let at = match rng.below(6) {
                    0 | 1 => rng.below(128),
                    2 => 4096 + rng.below(o.ring_offset - 4096),
                    _ => o.ring_offset + rng.below(len - o.ring_offset),
                };
                b[at] ^= 1 << rng.below(8);
                hit.push((at, at + 1));
            }
            let intact = untouched(o, &hit);
            Case {
                bytes: b,
                what: format!("bits flipped at {:?}", hit.iter().map(|h| h.0).collect::<Vec<_>>()),
                intact,
            }
        }
        2 => {
            let c = pick(rng);
            let v: u32 = [u32::MAX, (o.chunk_bytes - CHUNK_HEADER_BYTES + 1) as u32, 0x8000_0000][rng.below(3)];
            b[c.offset + 8..c.offset + 12].copy_from_slice(&v.to_le_bytes());
            let intact = untouched(o, &[(c.offset, c.offset + 32)]);
            Case { bytes: b, what: format!("chunk seq {} payload length set to {v}", c.seq), intact }
        }
        3 if !o.dict.is_empty() => {
            let (at, _) = o.dict[rng.below(o.dict.len())];
            let v: u32 = [u32::MAX, 0x7fff_fff0, (o.ring_offset - at) as u32][rng.below(3)];
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            Case { bytes: b, what: format!("dictionary entry at {at} length set to {v}"), intact: untouched(o, &[]) }
        }
        4 if !o.dict.is_empty() => {
            // A dictionary id at an extreme, behind a valid entry checksum.
            let (at, plen) = o.dict[rng.below(o.dict.len())];
            let ids: [&[u8]; 3] = [&[0xff, 0xff, 0xff, 0xff, 0x0f], &[0x80, 0x80, 0x80, 0x80, 0x08], &[0x00]];
            let id = ids[rng.below(3)];
            let n = id.len().min(plen);
            b[at + 8..at + 8 + n].copy_from_slice(&id[..n]);
            let crc = crc32fast_hash(&b[at + 8..at + 8 + plen]);
            b[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
            Case { bytes: b, what: format!("dictionary entry at {at} id bytes {id:02x?}"), intact: untouched(o, &[]) }
        }
        5 | 6 => {
            // A record's length or a field (ids, counts, times) set to an extreme, chunk CRC resealed:
            // the chunk passes its checksum and its content is hostile.
            let c = pick(rng);
            let f = c.frames[rng.below(c.frames.len())];
            let end = c.offset + c.bytes;
            let what = if rng.below(2) == 0 {
                let patch: &[u8] =
                    [&[0xffu8, 0xff, 0xff, 0xff, 0xff][..], &[0x00], &[0xff, 0x00, 0x00, 0x00, 0x00]][rng.below(3)];
                let n = patch.len().min(end - (f + 1));
                b[f + 1..f + 1 + n].copy_from_slice(&patch[..n]);
                format!("chunk seq {}: frame at {f} length bytes {:02x?}", c.seq, &patch[..n])
            } else {
                let at = (f + 2 + rng.below(8)).min(end - 1);
                let patch: &[u8] = [
                    &[0xffu8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01][..],
                    &[0xff, 0xff, 0xff, 0xff, 0x0f],
                    &[0x80],
                ][rng.below(3)];
                let n = patch.len().min(end - at);
                b[at..at + n].copy_from_slice(&patch[..n]);
                format!("chunk seq {}: field at {at} set to {:02x?}", c.seq, &patch[..n])
            };
            reseal(&mut b, &c);
            Case { bytes: b, what, intact: untouched(o, &[(c.offset, end)]) }
        }
        7 if o.chunks.len() >= 2 => {
            // A chunk copied over another slot.
            let (src, dst) = (pick(rng), pick(rng));
            let (s, d) = (src.offset, dst.offset);
            let copy = b[s..s + o.chunk_bytes].to_vec();
            b[d..d + o.chunk_bytes].copy_from_slice(&copy);
            let intact = if s == d { untouched(o, &[]) } else { untouched(o, &[(d, d + o.chunk_bytes)]) };
            Case { bytes: b, what: format!("chunk seq {} duplicated over seq {}", src.seq, dst.seq), intact }
        }
        _ if o.chunks.len() >= 2 => {
            // Two slots swapped (out of order): both chunks stay intact.
            let (x, y) = (pick(rng), pick(rng));
            if x.offset != y.offset {
                let (lo, hi) = (x.offset.min(y.offset), x.offset.max(y.offset));
                let (head, tail) = b.split_at_mut(hi);
                head[lo..lo + o.chunk_bytes].swap_with_slice(&mut tail[..o.chunk_bytes]);
            }
            Case { bytes: b, what: format!("chunks seq {} and {} swapped", x.seq, y.seq), intact: untouched(o, &[]) }
        }
        _ => Case { bytes: b, what: "unchanged".into(), intact: untouched(o, &[]) },
    }
}

fn crc32fast_hash(bytes: &[u8]) -> u32 {
    // The dictionary entry checksum is a plain CRC32 (IEEE), as the chunk's.
    chunk_crc(&[], bytes)
}

/// The analyses, each with the output it writes (under `dir`).
fn analyses(ring: &str, dir: &Path) -> Vec<(&'static str, Vec<String>)> {
    let o = |n: &str| dir.join(n).display().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        ("summary", s(&["summary", ring, "--json"])),
        ("diagnose", s(&["diagnose", ring, "--json"])),
        ("perfetto", s(&["export", ring, "--format", "perfetto", "-o", &o("t.pftrace")])),
        ("chrome", s(&["export", ring, "--format", "chrome", "-o", &o("t.json")])),
        ("kineto", s(&["export", ring, "--format", "kineto", "-o", &o("kineto")])),
        ("parquet", s(&["export", ring, "--format", "parquet", "-o", &o("parquet")])),
        ("folded", s(&["export", ring, "--format", "folded", "-o", &o("t.folded")])),
        ("flamegraph", s(&["export", ring, "--format", "flamegraph", "-o", &o("t.svg")])),
        ("report", s(&["report", ring, "-o", &o("r.html")])),
    ]
}

/// Runs `tprof args` under the memory limit and the timeout: (exit code, stdout, stderr).
fn tprof(args: &[String]) -> (i32, String, String) {
    use std::os::unix::process::ExitStatusExt;
    let out = Command::new("prlimit")
        .arg(AS_LIMIT)
        .args(["timeout", "-s", "KILL", COMMAND_TIMEOUT_S])
        .arg(tprof_bin())
        .args(args)
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .expect("prlimit and timeout run tprof");
    let code = out.status.code().unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
    (code, String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Checks one mutated file; `Err` says what went wrong.
fn check_case(
    o: &Original,
    case: &Case,
    path: &Path,
    out_dir: &Path,
    rng: &mut Rng,
    ran: &[AtomicUsize],
) -> Result<(), String> {
    std::fs::write(path, &case.bytes).unwrap();
    let p = path.display().to_string();
    // In process: every intact chunk decodes to its original records.
    let mut damaged = false;
    let mut intact_records = 0;
    match RingReader::from_bytes(path, case.bytes.clone()) {
        Err(e) => {
            if !case.intact.is_empty() {
                return Err(format!("file refused although {} chunks are intact: {e}", case.intact.len()));
            }
            damaged = true;
        }
        Ok(r) => {
            damaged |= !r.damage().is_empty();
            let by_seq: BTreeMap<u64, &tprof_format::ChunkRef> = r.chunks().iter().map(|c| (c.seq, c)).collect();
            for seq in &case.intact {
                let want = &o.chunks.iter().find(|c| c.seq == *seq).unwrap().records;
                let Some(c) = by_seq.get(seq) else { return Err(format!("intact chunk seq {seq} lost")) };
                if records_of(&r, c) != *want {
                    return Err(format!("intact chunk seq {seq} decodes differently"));
                }
                intact_records += want.len();
            }
            damaged |= r.records().any(|i| i.is_err());
        }
    }
    let ring_cmds: [(&str, Vec<String>); 3] = [
        ("check", vec!["check".into(), p.clone()]),
        ("info", vec!["info".into(), p.clone()]),
        ("dump", vec!["dump".into(), "--json".into(), p.clone()]),
    ];
    let mut all = analyses(&p, out_dir);
    let mut chosen: Vec<(&str, Vec<String>)> = ring_cmds.into_iter().collect();
    for _ in 0..3 {
        let i = rng.below(all.len());
        chosen.push(all.swap_remove(i));
    }
    for (name, args) in chosen {
        let (code, stdout, stderr) = tprof(&args);
        let k =
            ["check", "info", "dump"].iter().chain(analyses("", out_dir).iter().map(|a| &a.0)).position(|n| *n == name);
        ran[k.unwrap()].fetch_add(1, Ordering::Relaxed);
        let said = format!("{stdout}{stderr}");
        let tail = |s: &str| s.chars().rev().take(600).collect::<String>().chars().rev().collect::<String>();
        if stderr.contains("panicked") || !(0..=1).contains(&code) {
            return Err(format!("{name}: exit {code}: {}", tail(&stderr)));
        }
        let names_damage = said.contains("offset") && said.contains(&p);
        match name {
            "check" | "info" | "dump" => {
                if damaged && (code != 1 || !names_damage) {
                    return Err(format!("{name}: damage but exit {code} / not named: {}", tail(&said)));
                }
                if !damaged && code != 0 {
                    return Err(format!("{name}: intact file but exit {code}: {}", tail(&said)));
                }
                if name == "dump" {
                    let shown = stdout.lines().filter(|l| l.starts_with('{')).count();
                    if shown < intact_records {
                        return Err(format!("dump shows {shown} records, the intact chunks hold {intact_records}"));
                    }
                }
            }
            _ => {
                if damaged && !said.contains("offset") {
                    return Err(format!("{name}: exit {code}, the damage is not named: {}", tail(&said)));
                }
            }
        }
    }
    Ok(())
}

fn real_rings(dir: &Path) -> Vec<PathBuf> {
    require_mock_libs(&simtrain_libs(2));
    let exe = require_program("simtrain");
    let truth = TempDir::new("fuzz-truth");
    let mut cmd = sim_command(&exe, &["--ranks", "2", "--steps", "100"], truth.path());
    // 1 MiB rings: 14 chunks of 64 KiB, which 100 steps wrap.
    cmd.env("LD_PRELOAD", tprof_lib()).env("TPROF_OUT", dir).env("TPROF_RING_MB", "1");
    let _guard = exclusive();
    run(cmd, Duration::from_secs(120)).assert_ok();
    let mut rings: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    rings.retain(|p| p.extension().is_some_and(|e| e == "tprof"));
    rings.sort();
    assert_eq!(rings.len(), 2, "{rings:?}");
    rings
}

#[test]
fn mutated_real_rings_never_crash_hang_or_lose_an_intact_chunk() {
    let seed: u64 = std::env::var("TPROF_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    let secs: u64 = std::env::var("TPROF_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    eprintln!("fuzz_rings: seed {seed} (replay with TPROF_FUZZ_SEED={seed}), {secs} s");
    let rings_dir = TempDir::new("fuzz-rings");
    let originals: Vec<Original> = real_rings(rings_dir.path()).iter().map(|p| load(p)).collect();
    for o in &originals {
        assert!(o.chunks.len() >= 8 && o.chunk_count >= 8, "{} chunks of {}", o.chunks.len(), o.chunk_count);
    }
    let ran: Vec<AtomicUsize> = (0..12).map(|_| AtomicUsize::new(0)).collect();
    let cases = AtomicUsize::new(0);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let work = TempDir::new("fuzz-work");
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|worker| {
                let (originals, ran, cases, work) = (&originals, &ran, &cases, &work);
                s.spawn(move || {
                    let mut rng = Rng(seed ^ (worker + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
                    let dir = work.path().join(format!("w{worker}"));
                    std::fs::create_dir_all(&dir).unwrap();
                    let path = dir.join("case.tprof");
                    let mut n = 0;
                    while Instant::now() < deadline {
                        let o = &originals[rng.below(originals.len())];
                        let case = mutate(o, &mut rng);
                        if let Err(e) = check_case(o, &case, &path, &dir, &mut rng, ran) {
                            return Some(format!("seed {seed}, worker {worker}, case {n} ({}): {e}", case.what));
                        }
                        n += 1;
                        cases.fetch_add(1, Ordering::Relaxed);
                    }
                    None
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().unwrap()).collect()
    });
    let names = [
        "check",
        "info",
        "dump",
        "summary",
        "diagnose",
        "perfetto",
        "chrome",
        "kineto",
        "parquet",
        "folded",
        "flamegraph",
        "report",
    ];
    let counts: Vec<String> =
        names.iter().zip(&ran).map(|(n, c)| format!("{n} {}", c.load(Ordering::Relaxed))).collect();
    eprintln!("fuzz_rings: {} mutated rings; runs: {}", cases.load(Ordering::Relaxed), counts.join(", "));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases.load(Ordering::Relaxed) >= 10, "too few cases in {secs} s");
}
