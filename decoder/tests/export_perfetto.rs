//! Perfetto export, read back with a small protobuf reader written here (the e2e test checks it
//! with the official schema): slices rebuilt per track as Perfetto matches BEGIN / END (sorted by
//! time, END closes the innermost open slice) equal tprof's kernels; flows link launches to GPU work.
mod export_support;

use std::collections::{HashMap, HashSet};

use export_support::*;
use tprof_decoder::export::select::Selection;
use tprof_decoder::export::ExportFormat;

enum V<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], i: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let x = b[*i];
        *i += 1;
        v |= ((x & 0x7f) as u64) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn fields(b: &[u8]) -> Vec<(u32, V<'_>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i);
        let (field, wire) = ((key >> 3) as u32, key & 7);
        let v = match wire {
            0 => V::Int(varint(b, &mut i)),
            1 => {
                let v = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
                i += 8;
                V::Int(v)
            }
            2 => {
                let n = varint(b, &mut i) as usize;
                i += n;
                V::Bytes(&b[i - n..i])
            }
            5 => {
                i += 4;
                V::Int(0)
            }
            w => panic!("wire type {w}"),
        };
        out.push((field, v));
    }
    out
}

fn int(v: &V) -> u64 {
    match v {
        V::Int(x) => *x,
        V::Bytes(_) => panic!("not an int"),
    }
}

fn bytes<'a>(v: &V<'a>) -> &'a [u8] {
    match v {
        V::Bytes(b) => b,
        V::Int(_) => panic!("not bytes"),
    }
}

#[derive(Default)]
struct Decoded {
    /// track uuid -> name (for named tracks)
    track_names: HashMap<u64, String>,
    process_names: Vec<String>,
    /// (track, name, category iid, start, end)
    slices: Vec<(u64, String, u64, u64, u64)>,
    flow_out: HashSet<u64>,
    flow_in: HashSet<u64>,
    counters: usize,
}

fn decode(path: &std::path::Path) -> Decoded {
    let data = std::fs::read(path).unwrap();
    let mut d = Decoded::default();
    let mut names: HashMap<u64, String> = HashMap::new();
    // (ts, order, track, is_begin, name, cat)
    let mut evs: Vec<(u64, usize, u64, bool, String, u64)> = Vec::new();
    for (n, (f, pkt)) in fields(&data).iter().enumerate() {
        assert_eq!(*f, 1, "Trace.packet");
        let pf = fields(bytes(pkt));
        let mut ts = 0;
        for (f, v) in &pf {
            match f {
                8 => ts = int(v),
                12 => {
                    for (f, e) in fields(bytes(v)) {
                        if f == 2 {
                            let ef = fields(bytes(&e));
                            let iid = ef.iter().find(|x| x.0 == 1).map(|x| int(&x.1)).unwrap();
                            let name = ef
                                .iter()
                                .find(|x| x.0 == 2)
                                .map(|x| String::from_utf8(bytes(&x.1).to_vec()).unwrap())
                                .unwrap();
                            names.insert(iid, name);
                        }
                    }
                }
                60 => {
                    let tf = fields(bytes(v));
                    let uuid = tf.iter().find(|x| x.0 == 1).map(|x| int(&x.1)).unwrap();
                    if let Some((_, n)) = tf.iter().find(|x| x.0 == 2) {
                        d.track_names.insert(uuid, String::from_utf8(bytes(n).to_vec()).unwrap());
                    }
                    if let Some((_, p)) = tf.iter().find(|x| x.0 == 3) {
                        for (f, v) in fields(bytes(p)) {
                            if f == 6 {
                                d.process_names.push(String::from_utf8(bytes(&v).to_vec()).unwrap());
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some((_, te)) = pf.iter().find(|x| x.0 == 11) {
            let (mut ty, mut track, mut name, mut cat) = (0, 0, String::new(), 0);
            for (f, v) in fields(bytes(te)) {
                match f {
                    9 => ty = int(&v),
                    11 => track = int(&v),
                    10 => name = names.get(&int(&v)).cloned().expect("interned name defined before use"),
                    3 => cat = int(&v),
                    47 => {
                        d.flow_out.insert(int(&v));
                    }
                    48 => {
                        d.flow_in.insert(int(&v));
                    }
                    _ => {}
                }
            }
            match ty {
                1 => evs.push((ts, n, track, true, name, cat)),
                2 => evs.push((ts, n, track, false, name, cat)),
                4 => d.counters += 1,
                _ => {}
            }
        }
    }
    evs.sort_by_key(|e| (e.0, e.1));
    let mut open: HashMap<u64, Vec<(u64, String, u64)>> = HashMap::new();
    for (ts, _, track, begin, name, cat) in evs {
        if begin {
            open.entry(track).or_default().push((ts, name, cat));
        } else {
            let (s, name, cat) = open.get_mut(&track).and_then(|v| v.pop()).expect("END without BEGIN");
            d.slices.push((track, name, cat, s, ts));
        }
    }
    assert!(open.values().all(|v| v.is_empty()), "unterminated slices");
    d
}

fn kernel_spans(d: &Decoded) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = d.slices.iter().filter(|s| s.2 == 1).map(|s| (s.3 as i64, s.4 as i64)).collect();
    v.sort_unstable();
    v
}

#[test]
fn synthetic_job_tracks_slices_and_flows() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = synth_job(dir.path());
    let t = truth(&files);
    let out = dir.path().join("t.perfetto-trace");
    let report = run_export(&files, ExportFormat::Perfetto, &out, Selection::default());
    let d = decode(&out);
    assert_eq!(kernel_spans(&d), spans(&t, "kernel", |_| true));
    assert_eq!(d.flow_out.intersection(&d.flow_in).count(), t.linked_launches());
    assert!(d.process_names.contains(&"rank 3 · host1 · pid 1003".to_string()), "{:?}", d.process_names);
    assert!(d.track_names.values().any(|n| n == "GPU 0 stream 7"));
    // NVTX steps rebuilt with their durations.
    let mut steps: Vec<u64> = d.slices.iter().filter(|s| s.1 == "step").map(|s| s.4 - s.3).collect();
    let mut want: Vec<u64> = t.ranges.iter().map(|r| r.end - r.start).collect();
    steps.sort_unstable();
    want.sort_unstable();
    assert_eq!(steps, want);
    assert_eq!(report.written.events as usize, d.slices.len() + d.counters);
}

#[test]
fn real_kineto_trace_slices_nest_exactly() {
    let path = kineto_dir().join("nccl_parser_config_nccl_data.json.gz");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.perfetto-trace");
    run_export(std::slice::from_ref(&path), ExportFormat::Perfetto, &out, Selection::default());
    let t = truth(&[path]);
    let d = decode(&out);
    assert_eq!(kernel_spans(&d), spans(&t, "kernel", |_| true));
    // Every CPU operator / annotation comes back with its own duration (ties at equal start times
    // are written outer-first, so no END closes the wrong slice).
    let mut got: Vec<u64> = d.slices.iter().filter(|s| s.2 == 7 || s.2 == 8 || s.2 == 9).map(|s| s.4 - s.3).collect();
    let mut want: Vec<u64> = t.ranges.iter().map(|r| r.end - r.start).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got.len(), want.len());
    let wrong = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(wrong, 0, "{wrong} of {} ranges came back with another duration", want.len());
    assert_eq!(d.flow_out.intersection(&d.flow_in).count(), t.linked_launches());
}
