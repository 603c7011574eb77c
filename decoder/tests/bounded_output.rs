//! Issue #14 items 5 and 7, through the built `tprof` binary: outputs are replaced atomically (a failed
//! or interrupted write keeps the old file and leaves no temporary file; a replacement is said), and
//! names from the input are capped in every output (a multi-megabyte kernel name gives small outputs,
//! names that differ only past the cap stay distinct).

mod ring_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use ring_support::{launch, tprof, MONO0, T0};
use tprof_format::{FileHeader, Record, RingGeometry, RingWriter, StrId};

fn header() -> FileHeader {
    FileHeader { cmdline: vec!["names".into()], ..ring_support::header(77, "capped", 0, 1) }
}

/// A ring whose kernels are named by `names` (string ids 10, 11, ...): each launched once per step
/// for 5 steps, inside an NVTX range `step` (id 2).
fn ring_with_kernels(path: &Path, names: &[String], dict_bytes: u64) {
    let geom = RingGeometry { chunk_bytes: 65536, chunk_count: 16, dict_bytes };
    let mut w = RingWriter::create(path, header(), geom).unwrap();
    w.define_string(StrId(1), "cudaLaunchKernel");
    w.define_string(StrId(2), "step");
    w.append(&Record::ClockSync { ticks: MONO0, mono_ns: MONO0, wall_ns: T0 });
    let mut t = MONO0 + 1_000;
    let mut corr = 1;
    for _step in 0..5 {
        w.append(&Record::NvtxPush { tid: 1, domain: StrId(0), name: StrId(2), ts: t });
        for k in 0..names.len() as u32 {
            launch(&mut w, StrId(1), StrId(10 + k), t, 47_000, corr);
            corr += 1;
            t += 60_000;
        }
        w.append(&Record::NvtxPop { tid: 1, domain: StrId(0), ts: t });
        t += 1_000;
    }
    w.append(&Record::ClockSync { ticks: t, mono_ns: t, wall_ns: T0 + t - MONO0 });
    w.close(t).unwrap();
    // The writer keeps strings to 64 KiB; a hostile file holds longer ones: write the names as
    // dictionary entries by hand ([len u32][crc u32][varint id + bytes], 4-byte aligned, after the
    // two the writer wrote).
    let mut bytes = std::fs::read(path).unwrap();
    let used = u64::from_le_bytes(bytes[80..88].try_into().unwrap()) as usize;
    let mut pos = 4096 + used;
    for (k, name) in names.iter().enumerate() {
        let mut payload = vec![10 + k as u8];
        payload.extend_from_slice(name.as_bytes());
        bytes[pos..pos + 4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes[pos + 4..pos + 8].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        bytes[pos + 8..pos + 8 + payload.len()].copy_from_slice(&payload);
        pos += (8 + payload.len() + 3) & !3;
    }
    assert!(pos + 4 <= 4096 + dict_bytes as usize);
    std::fs::write(path, bytes).unwrap();
}

/// The longest run of one repeated byte in `bytes` (how much of a huge name leaked out).
fn longest_run(bytes: &[u8], b: u8) -> usize {
    bytes.split(|&x| x != b).map(<[u8]>::len).max().unwrap_or(0)
}

#[test]
fn multi_megabyte_kernel_names_are_capped_in_every_output() {
    let d = tempfile::tempdir().unwrap();
    let ring = d.path().join("names.tprof");
    // Two 3 MB names that differ only in their last byte, and one short name.
    let huge = 3 << 20;
    let names = vec!["k".repeat(huge) + "A", "k".repeat(huge) + "B", "_Z4gemmv".to_string()];
    ring_with_kernels(&ring, &names, 7 << 20);
    let r = ring.to_str().unwrap();
    let o = |n: &str| d.path().join(n).display().to_string();
    let (code, out, err) = tprof(&["summary", r, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.len() < 64 << 10, "summary --json is {} bytes", out.len());
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    let kernels = s["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 3, "the two long names stay distinct: {out:.2000}");
    let long: Vec<&str> = kernels.iter().filter_map(|k| k["name"].as_str()).filter(|n| n.len() > 100).collect();
    assert_eq!(long.len(), 2);
    for n in &long {
        assert!(n.len() <= 4096, "{} bytes", n.len());
        assert!(n.contains(&format!("[{} bytes, #", huge + 1)), "the original length is noted: {}", &n[4000..]);
    }
    assert_ne!(long[0], long[1]);
    assert!(kernels.iter().any(|k| k["name"] == "gemm()" && k["count"] == 5), "short names are untouched");
    let (code, text, err) = tprof(&["summary", r]);
    assert_eq!(code, 0, "{err}");
    assert!(text.len() < 64 << 10, "summary is {} bytes", text.len());
    let (code, out, err) = tprof(&["diagnose", r, "--json", "--all"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.len() < 256 << 10, "diagnose is {} bytes", out.len());
    let (code, out, err) = tprof(&["dump", "--json", r]);
    assert_eq!(code, 0, "{err}");
    assert!(longest_run(out.as_bytes(), b'k') < 4096, "dump shows capped names");
    let mut outputs = vec![("report", o("r.html"))];
    for (f, name) in [("perfetto", "t.pftrace"), ("chrome", "t.json"), ("kineto", "kin"), ("parquet", "pq")] {
        outputs.push((f, o(name)));
    }
    outputs.push(("folded", o("t.folded")));
    outputs.push(("flamegraph", o("t.svg")));
    for (what, path) in &outputs {
        let (code, _, err) = if *what == "report" {
            tprof(&["report", r, "-o", path])
        } else {
            tprof(&["export", r, "--format", what, "-o", path])
        };
        assert_eq!(code, 0, "{what}: {err}");
        let files: Vec<PathBuf> = if Path::new(path).is_dir() {
            std::fs::read_dir(path).unwrap().map(|e| e.unwrap().path()).collect()
        } else {
            vec![PathBuf::from(path)]
        };
        let total: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
        assert!(total < 1 << 20, "{what}: {total} bytes for a {} MB input", (3 * huge) >> 20);
        for f in &files {
            assert!(longest_run(&std::fs::read(f).unwrap(), b'k') < 4096, "{what}: {} holds a whole name", f.display());
        }
    }
}

/// Files in `dir` whose names say they are temporary outputs.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn outputs_are_replaced_whole_or_not_at_all() {
    let d = tempfile::tempdir().unwrap();
    let ring = d.path().join("r.tprof");
    ring_with_kernels(&ring, &["_Z4gemmv".to_string()], 65536);
    let r = ring.to_str().unwrap();
    for (what, name) in [
        ("perfetto", "t.pftrace"),
        ("chrome", "t.json.gz"),
        ("folded", "t.folded"),
        ("flamegraph", "t.svg"),
        ("report", "r.html"),
    ] {
        let out = d.path().join(name);
        let o = out.to_str().unwrap();
        let args: Vec<&str> =
            if what == "report" { vec!["report", r, "-o", o] } else { vec!["export", r, "--format", what, "-o", o] };
        let (code, first, err) = tprof(&args);
        assert_eq!(code, 0, "{what}: {err}");
        assert!(!first.contains("replaced") && !err.contains("replaced"), "{what}: nothing to replace yet: {first}");
        let written = std::fs::read(&out).unwrap();
        // An existing file (world-readable, hard-linked elsewhere) is replaced by a new private file,
        // and the last line says so; the link keeps the old contents.
        std::fs::write(&out, b"old").unwrap();
        std::fs::set_permissions(&out, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        let link = d.path().join(format!("{name}.link"));
        std::fs::hard_link(&out, &link).unwrap();
        let (code, second, err) = tprof(&args);
        assert_eq!(code, 0, "{what}: {err}");
        assert!((second.clone() + &err).contains("replaced the existing file"), "{what}: {second}{err}");
        assert_eq!(std::fs::read(&link).unwrap(), b"old", "{what}: written through the old file");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&out).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600, "{what}");
        if what != "report" && what != "chrome" {
            assert_eq!(std::fs::read(&out).unwrap(), written, "{what}: the same bytes as the first run");
        }
        assert!(temporaries(d.path()).is_empty(), "{what}: {:?}", temporaries(d.path()));
    }
    // A write that fails part-way keeps the old file and leaves no temporary file: a flame graph of
    // an input with no GPU time fails after the output was opened.
    let cpu_only = d.path().join("cpu.tprof");
    ring_with_kernels(&cpu_only, &[], 65536);
    let svg = d.path().join("t.svg");
    std::fs::write(&svg, b"old svg").unwrap();
    let (code, _, err) =
        tprof(&["export", cpu_only.to_str().unwrap(), "--format", "flamegraph", "-o", svg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no GPU time to draw"), "{err}");
    assert_eq!(std::fs::read(&svg).unwrap(), b"old svg");
    assert!(temporaries(d.path()).is_empty(), "{:?}", temporaries(d.path()));
    // A folder that cannot be written: one line, nothing changed.
    let (code, _, err) = tprof(&["export", r, "--format", "chrome", "-o", "/proc/tprof-no-such/t.json"]);
    assert_ne!(code, 0);
    assert_eq!(err.lines().filter(|l| l.contains("tprof:")).count(), 1, "{err}");
}

#[test]
fn a_flame_graph_of_an_undecodable_input_names_the_file_and_the_damage() {
    // Issue #14 item 8: it used to say only "no GPU time to draw".
    let d = tempfile::tempdir().unwrap();
    let ring = d.path().join("broken.tprof");
    ring_with_kernels(&ring, &["_Z4gemmv".to_string()], 65536);
    let mut bytes = std::fs::read(&ring).unwrap();
    let chunk = 4096 + 65536;
    bytes[chunk + 40] ^= 0x10;
    std::fs::write(&ring, bytes).unwrap();
    let svg = d.path().join("f.svg");
    let r = ring.to_str().unwrap();
    let (code, _, err) = tprof(&["export", r, "--format", "flamegraph", "-o", svg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no GPU time to draw"), "{err}");
    let named = err.lines().any(|l| l.contains(r) && l.contains(&format!("offset {chunk}")));
    assert!(named, "the file and the damaged chunk's offset are named: {err}");
    assert!(!svg.exists());
}

#[test]
fn an_interrupted_export_keeps_the_old_file_and_leaves_no_temporary() {
    let d = tempfile::tempdir().unwrap();
    let (rings, _, _) = tprof_decoder::testkit::bench_job::generate(&d.path().join("job"), 3_000_000, 2, 2);
    let out = d.path().join("t.json");
    std::fs::write(&out, b"old").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tprof"))
        .arg("export")
        .args(&rings)
        .args(["--format", "chrome", "-o"])
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the temporary file exists (the export is writing), then interrupt it.
    let t0 = std::time::Instant::now();
    while temporaries(d.path()).is_empty() {
        assert!(t0.elapsed().as_secs() < 60, "the export never started writing");
        assert!(child.try_wait().unwrap().is_none(), "the export ended before it could be interrupted");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    assert_eq!(std::fs::read(&out).unwrap(), b"old");
    assert!(temporaries(d.path()).is_empty(), "{:?}", temporaries(d.path()));
}
