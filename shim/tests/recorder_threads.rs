//! 8 threads x 1 M events through the real recording path (per-thread buffers -> writer thread ->
//! ring file): every event decodes exactly once and in per-thread order, or is counted as dropped.

use std::collections::HashMap;

use tprof_format::{ApiDomain, Decoded, Record, RingReader, StrId};

const THREADS: u64 = 8;
const PER_THREAD: u64 = 1_000_000;

#[test]
fn eight_threads_one_million_events_each_exactly_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("TPROF_OUT", dir.path());
    std::env::set_var("TPROF_RING_MB", "512");
    std::env::set_var("TPROF_CUPTI", "0");
    tprof::lifecycle::ensure_init();
    assert_eq!(tprof::base::switch::state(), tprof::base::switch::ENABLED);
    let name = tprof::record::interning::intern("test_event");
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    tprof::record::recorder::emit(Record::Api {
                        tid: t as u32,
                        domain: ApiDomain::Runtime,
                        name,
                        start: tprof::base::ticks::now(),
                        end: 0,
                        result: 0,
                        correlation: 0,
                        detail: StrId::NONE,
                        stream: 0,
                        arg: i,
                    });
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    tprof::lifecycle::shutdown_for_tests();
    let path = tprof::base::process::ring_path().unwrap().clone();
    let r = RingReader::open(&path).unwrap();
    assert!(r.damage().is_empty(), "{:?}", r.damage());
    assert!(r.stats().clean_close());
    assert!(!r.stats().wrapped(), "ring must be large enough for this test");
    let mut last: HashMap<u32, u64> = HashMap::new();
    let mut count: HashMap<u32, u64> = HashMap::new();
    for item in r.records() {
        if let Decoded::Record(Record::Api { tid, arg, name: n, .. }) = item.unwrap() {
            assert_eq!(n, name);
            if let Some(&prev) = last.get(&tid) {
                assert!(arg > prev, "thread {tid}: event {arg} after {prev} (order or duplicate)");
            }
            last.insert(tid, arg);
            *count.entry(tid).or_default() += 1;
        }
    }
    let decoded: u64 = count.values().sum();
    let dropped = r.stats().dropped_events;
    eprintln!("decoded {decoded}, dropped {dropped}");
    assert_eq!(decoded + dropped, THREADS * PER_THREAD, "every event is decoded or counted as dropped");
    assert_eq!(r.name(name), "test_event");
}
