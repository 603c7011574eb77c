//! Salvage of damaged Kineto traces (issue #14 item 6): each kind of damage loses only the event it
//! is in, says where it was, and the events around it are imported.

use super::*;

#[derive(Default)]
struct Count {
    kernels: Vec<Kernel>,
    counters: Vec<CounterSample>,
    ends: usize,
}
impl TraceSink for Count {
    fn handle_kernel(&mut self, k: &Kernel) {
        self.kernels.push(k.clone());
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        self.counters.push(c.clone());
    }
    fn handle_process_end(&mut self, _: ProcId) {
        self.ends += 1;
    }
}

/// A trace of `n` kernels `k0..k{n-1}` (k_i at ts 10*i+1 us), one per line.
fn kernels(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"ph":"X","cat":"kernel","name":"k{i}","pid":0,"tid":7,"ts":{},"dur":2,"args":{{"stream":7,"correlation":{i}}}}}"#, 10 * i + 1))
        .collect()
}

fn doc(events: &[String]) -> String {
    format!("{{\"schemaVersion\":1,\"traceEvents\":[\n{}\n],\"distributedInfo\":{{\"rank\":2}}}}", events.join(",\n"))
}

fn import(text: &str) -> (Result<ProcessInfo, InputError>, Count, Vec<String>) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.json");
    std::fs::write(&p, text).unwrap();
    let mut c = Count::default();
    let mut notes = Notes::default();
    let r = feed(&p, ProcId(0), &mut c, &mut notes);
    (r, c, notes.iter().map(|n| n.message.clone()).collect())
}

fn names(c: &Count) -> Vec<String> {
    c.kernels.iter().map(|k| k.name.to_string()).collect()
}

fn all_but(n: usize, lost: &[usize]) -> Vec<String> {
    (0..n).filter(|i| !lost.contains(i)).map(|i| format!("k{i}")).collect()
}

#[test]
fn one_corrupt_byte_one_percent_in_loses_one_event() {
    let ev = kernels(1000);
    let text = doc(&ev);
    // Event 10 (1% in): its opening quote of "cat" becomes garbage.
    let at = text.find("\"k10\"").unwrap() - "\"cat\":\"kernel\",\"name\":".len() - 1;
    for garbage in [b'#', b'{', b'}', b'"', b'[', 0xff] {
        let mut bytes = text.clone().into_bytes();
        bytes[at] = garbage;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let (r, c, notes) = import(&text);
        let info = r.unwrap();
        assert_eq!(info.rank, Some(2), "distributedInfo after the events is still read");
        assert_eq!(names(&c), all_but(1000, &[10]), "garbage {garbage:#x}: {notes:?}");
        // (A '}' there ends the event early: `{"ph":"X"}` is then a slice without a timestamp.)
        let damage: Vec<&String> = notes.iter().filter(|n| !n.contains("without a timestamp")).collect();
        assert_eq!(damage.len(), 1, "{notes:?}");
        assert!(damage[0].starts_with("damage at offset "), "{notes:?}");
        let offset: usize = damage[0]["damage at offset ".len()..].split(':').next().unwrap().parse().unwrap();
        let start = text.find("{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k11\"").unwrap();
        assert!(offset >= at - 30 && offset < start, "offset {offset} not in event 10 ({at}): {notes:?}");
    }
}

#[test]
fn a_numeric_string_time_is_read_as_the_number() {
    let mut ev = kernels(5);
    ev[2] = ev[2].replace("\"ts\":21", "\"ts\":\"12\"");
    ev[3] = ev[3].replace("\"dur\":2", "\"dur\":\" 3.5 \"");
    let (r, c, notes) = import(&doc(&ev));
    r.unwrap();
    assert_eq!(names(&c), all_but(5, &[]));
    let k = |n: &str| c.kernels.iter().find(|k| &*k.name == n).map(|k| (k.start, k.end)).unwrap();
    assert_eq!(k("k2"), (12_000, 14_000));
    assert_eq!(k("k3"), (31_000, 34_500));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0]
            .starts_with("2 events with a time or duration written as a string, read as a number (the first at offset"),
        "{notes:?}"
    );
}

#[test]
fn a_mistyped_field_skips_only_its_event() {
    for (field, bad) in [
        ("\"name\":\"k3\"", "\"name\":7"),
        ("\"ph\":\"X\"", "\"ph\":null"),
        ("\"ts\":31", "\"ts\":\"soon\""),
        ("\"ts\":31", "\"ts\":[31]"),
        ("\"cat\":\"kernel\"", "\"cat\":{}"),
        ("\"args\":{\"stream\":7,\"correlation\":3}", "\"args\":\"none\""),
    ] {
        let mut ev = kernels(7);
        ev[3] = ev[3].replacen(field, bad, 1);
        assert_ne!(ev[3], kernels(7)[3]);
        let (r, c, notes) = import(&doc(&ev));
        r.unwrap();
        assert_eq!(names(&c), all_but(7, &[3]), "{bad}: {notes:?}");
        let at = doc(&ev).find(bad).unwrap() + bad.find(':').unwrap() + 1;
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with(&format!("damage at offset {at}: ")), "{bad}: {notes:?}");
    }
}

#[test]
fn nan_and_infinity_tokens_do_not_reject_the_trace() {
    let mut ev = kernels(6);
    ev[1] = ev[1].replace("\"dur\":2", "\"dur\":NaN");
    ev[4] = ev[4].replace("\"ts\":41", "\"ts\":-Infinity");
    ev.push(r#"{"ph":"C","name":"mem","pid":1,"ts":5,"args":{"used":NaN,"free":Infinity,"n":3}}"#.into());
    let (r, c, notes) = import(&doc(&ev));
    r.unwrap();
    assert_eq!(names(&c), all_but(6, &[1, 4]), "{notes:?}");
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes.iter().all(|n| n.contains("is not a finite number")), "{notes:?}");
    // The counter event is intact JSON (as Python writes it): its samples are kept.
    let mut got: Vec<(String, f64)> = c.counters.iter().map(|s| (s.name.to_string(), s.value)).collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got.len(), 3);
    assert_eq!(got[1], ("mem.n".to_string(), 3.0));
    assert_eq!(got[0].1, f64::INFINITY);
    assert!(got[2].1.is_nan());
}

#[test]
fn damaged_separators_and_non_objects_lose_nothing_else() {
    let ev = kernels(8);
    let mut text = doc(&ev);
    // No comma after event 2, garbage between 4 and 5, a number as an element after 6.
    let e3 = text.find(&ev[3]).unwrap();
    text.replace_range(e3 - 2..e3 - 1, " ");
    let e5 = text.find(&ev[5]).unwrap();
    text.insert_str(e5, "@@ ");
    let e7 = text.find(&ev[7]).unwrap();
    text.insert_str(e7, "17, ");
    let (r, c, notes) = import(&text);
    r.unwrap();
    assert_eq!(names(&c), all_but(8, &[]), "{notes:?}");
    assert_eq!(notes.len(), 3, "{notes:?}");
}

#[test]
fn truncation_anywhere_keeps_the_events_before_it() {
    let ev = kernels(20);
    let text = doc(&ev);
    for cut in (60..text.len() - 1).step_by(37) {
        let whole = ev.iter().filter(|e| text.find(e.as_str()).unwrap() + e.len() <= cut).count();
        let (r, c, notes) = import(&text[..cut]);
        if whole == 0 {
            let err = r.map(|_| ()).unwrap_err().to_string();
            assert!(err.contains("t.json") && err.contains("offset"), "{err}");
            continue;
        }
        r.unwrap();
        assert_eq!(names(&c), all_but(whole, &[]), "cut at {cut}: {notes:?}");
        assert!(notes.iter().any(|n| n.contains("the JSON ends early at offset")), "{notes:?}");
    }
}

#[test]
fn top_level_keys_in_any_order_and_damage_before_the_events() {
    let ev = kernels(3);
    let body = ev.join(",");
    let front = format!(
        r#"{{"distributedInfo":{{"rank":5,"world_size":8}},"deviceProperties":[{{"id":0}}],"traceEvents":[{body}],"x":null}}"#
    );
    let (r, c, _) = import(&front);
    assert_eq!((r.unwrap().world_size, c.kernels.len(), c.ends), (Some(8), 3, 1));
    // A damaged key before the events: the events are found further on.
    let damaged = front.replace("\"deviceProperties\"", "\"devicePro\u{1}perties\"");
    let (r, c, notes) = import(&damaged);
    r.unwrap();
    assert_eq!(c.kernels.len(), 3, "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("control character")), "{notes:?}");
}

#[test]
fn an_event_across_many_reads_and_damage_at_a_read_boundary() {
    // A 3 MiB name spans several 1 MiB reads; damage sits right at the first read's end.
    let mut ev = kernels(50);
    ev[20] = ev[20].replace("\"k20\"", &format!("\"k20{}\"", "x".repeat(3 << 20)));
    let mut text = doc(&ev);
    let at = (1 << 20) - 1;
    let e = text.find(&ev[20][..40]).unwrap();
    assert!(e < at && at < e + ev[20].len());
    text.replace_range(at..at + 1, "\"");
    let (r, c, notes) = import(&text);
    r.unwrap();
    assert_eq!(names(&c), all_but(50, &[20]), "{notes:?}");
}
