//! Walks a Chrome / Kineto trace document as it streams in: the top-level object's keys in any
//! order (`traceEvents` before or after `distributedInfo`, `deviceProperties` and the rest), each
//! element of `traceEvents` parsed and handed on at once, nothing else held.
//!
//! Salvage: an element that is not a well-formed event object is skipped and counted, and parsing
//! resynchronises at the next event object of the array; an event with a wrongly typed field is
//! skipped alone; a document cut short keeps every event before the cut.

use std::path::Path;

use serde_json::Value;

use super::event::{parse_event, RawEvent};
use super::json::{expect, peek, skip_value, string, Fail, R};
use super::source::Window;
use crate::error::InputError;

/// Longest single event (or top-level value other than `traceEvents`) read: longer is damage.
pub(super) const MAX_VALUE: usize = 64 << 20;
/// Damaged places named one by one (the rest are counted).
pub(super) const DAMAGE_NOTES: usize = 20;

/// A damaged place in the JSON text.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Damage {
    pub offset: u64,
    pub what: String,
}

/// What walking the document found besides the events.
#[derive(Debug, Default)]
pub(super) struct Walked {
    pub distributed_info: Option<Value>,
    /// Elements of `traceEvents` seen, used or not.
    pub elements: usize,
    /// Events skipped as damaged (a damaged stretch resynchronised over counts once).
    pub skipped: usize,
    /// The first [`DAMAGE_NOTES`] damaged places.
    pub damage: Vec<Damage>,
    /// Fields read from a numeric string, and the offset of the first.
    pub repaired: usize,
    pub first_repaired: Option<u64>,
    /// Where the text ended early, if it did.
    pub truncated_at: Option<u64>,
    /// Damage outside `traceEvents` that ended the walk (offset, what).
    pub stopped: Option<Damage>,
    pub saw_trace_events: bool,
}

impl Walked {
    fn damaged(&mut self, offset: u64, what: impl Into<String>) {
        self.skipped += 1;
        if self.damage.len() < DAMAGE_NOTES {
            self.damage.push(Damage { offset, what: what.into() });
        }
    }
}

/// What one parse attempt on the window came to.
enum Step<T> {
    Done(T),
    Bad(u64, &'static str),
    /// The text ended inside the value.
    Eof,
    /// The value is longer than [`MAX_VALUE`].
    TooLong,
}

/// Runs `f` on the unparsed bytes, reading more until it needs no more; on success the window
/// moves past what `f` consumed.
fn with_more<T>(
    win: &mut Window,
    path: &Path,
    mut f: impl FnMut(&[u8], &mut usize) -> R<T>,
) -> Result<Step<T>, InputError> {
    loop {
        let mut i = 0;
        win.mark = win.pos;
        match f(win.rest(), &mut i) {
            Ok(v) => {
                win.pos += i;
                return Ok(Step::Done(v));
            }
            Err(Fail::Bad(at, what)) => return Ok(Step::Bad(win.offset_of(win.pos + at), what)),
            Err(Fail::More) => {
                if win.at_eof() {
                    return Ok(Step::Eof);
                }
                if win.rest().len() > MAX_VALUE {
                    return Ok(Step::TooLong);
                }
                win.fill(path)?;
            }
        }
    }
}

/// Receives each intact event: the event, its index in `traceEvents`, and the bytes it was parsed
/// from (its positions are relative to them).
pub(super) type OnEvent<'a> = dyn FnMut(&RawEvent, usize, &[u8]) + 'a;

/// Walks the whole document at `win`.
pub(super) fn walk(path: &Path, win: &mut Window, on_event: &mut OnEvent<'_>) -> Result<Walked, InputError> {
    let mut w = Walked::default();
    let mut ev = RawEvent::default();
    let mut first = true;
    match with_more(win, path, |b, i| expect(b, i, b'{', "not a JSON object"))? {
        Step::Done(()) => {}
        Step::Bad(offset, what) => {
            if !recover(path, win, &mut w, Damage { offset, what: what.into() })? {
                return Ok(w);
            }
            if !events_array(path, win, &mut w, &mut ev, on_event)? {
                return Ok(w);
            }
            first = false;
        }
        Step::Eof | Step::TooLong => {
            w.truncated_at = Some(win.bytes_seen());
            return Ok(w);
        }
    }
    loop {
        // A separator, then a key (or the end of the object).
        let next = with_more(win, path, |b, i| {
            let c = peek(b, i)?;
            if c == b'}' {
                *i += 1;
                return Ok(None);
            }
            if !first {
                expect(b, i, b',', "expected ',' or '}' between top-level keys")?;
            }
            if peek(b, i)? != b'"' {
                return Err(Fail::Bad(*i, "expected a key"));
            }
            let key = string(b, i)?.into_owned();
            expect(b, i, b':', "expected ':' after a key")?;
            Ok(Some(key))
        })?;
        first = false;
        let key = match next {
            Step::Done(Some(k)) => k,
            Step::Done(None) => return Ok(w),
            Step::Bad(offset, what) => {
                if !recover(path, win, &mut w, Damage { offset, what: what.into() })? {
                    return Ok(w);
                }
                "traceEvents".to_string()
            }
            Step::Eof | Step::TooLong => {
                w.truncated_at = Some(win.bytes_seen());
                return Ok(w);
            }
        };
        let at = win.offset_of(win.pos);
        let step = match key.as_str() {
            "traceEvents" => {
                if !events_array(path, win, &mut w, &mut ev, on_event)? {
                    return Ok(w);
                }
                continue;
            }
            "distributedInfo" => {
                let mut len = 0;
                let step = with_more(win, path, |b, i| {
                    peek(b, i)?;
                    let s = *i;
                    skip_value(b, i, 0)?;
                    len = *i - s;
                    Ok(())
                })?;
                if let Step::Done(()) = step {
                    w.distributed_info = serde_json::from_slice(&win.data()[win.pos - len..win.pos]).ok();
                }
                step
            }
            _ => with_more(win, path, |b, i| skip_value(b, i, 0))?,
        };
        let d = match step {
            Step::Done(()) => continue,
            Step::Bad(offset, what) => Damage { offset, what: format!("{what} (in \"{key}\")") },
            Step::TooLong => Damage { offset: at, what: format!("\"{key}\" is longer than {} MiB", MAX_VALUE >> 20) },
            Step::Eof => {
                w.truncated_at = Some(win.bytes_seen());
                return Ok(w);
            }
        };
        if !recover(path, win, &mut w, d)? {
            return Ok(w);
        }
        if !events_array(path, win, &mut w, &mut ev, on_event)? {
            return Ok(w);
        }
    }
}

/// Damage in the top-level object. Before the events: move on to the next `"traceEvents":` or
/// array of objects (true: the window is at its `[`). After them, the walk ends there.
fn recover(path: &Path, win: &mut Window, w: &mut Walked, d: Damage) -> Result<bool, InputError> {
    if w.saw_trace_events {
        w.stopped = Some(d);
        return Ok(false);
    }
    if w.damage.len() < DAMAGE_NOTES {
        w.damage.push(d.clone());
    }
    w.stopped = Some(d);
    const KEY: &[u8] = b"\"traceEvents\"";
    // From the byte after the damage (a damaged key must not be found again).
    win.pos = (win.mark + 1).min(win.len());
    loop {
        let rest = win.rest();
        let key = memchr::memmem::find(rest, KEY);
        let mut array = None;
        let mut j = 0;
        while let Some(k) = memchr::memchr(b'[', &rest[j..key.unwrap_or(rest.len())]) {
            let mut n = j + k + 1;
            while n < rest.len() && matches!(rest[n], b' ' | b'\n' | b'\r' | b'\t') {
                n += 1;
            }
            if n < rest.len() && rest[n] == b'{' {
                array = Some(j + k);
                break;
            }
            if n >= rest.len() && !win.at_eof() {
                break; // decided after the next read
            }
            j += k + 1;
        }
        if let Some(a) = array {
            win.pos += a;
            w.stopped = None;
            return Ok(true);
        }
        if let Some(k) = key {
            win.pos += k + KEY.len();
            if let Step::Done(()) = with_more(win, path, |b, i| expect(b, i, b':', "expected ':'"))? {
                w.stopped = None;
                return Ok(true);
            }
            continue;
        }
        // Keep the last bytes: the key may straddle two reads.
        win.pos = win.len().saturating_sub(KEY.len() + 64).max(win.pos);
        if !win.fill(path)? {
            return Ok(false);
        }
    }
}

/// The `traceEvents` array at the window; false when the text ended inside it.
fn events_array(
    path: &Path,
    win: &mut Window,
    w: &mut Walked,
    ev: &mut RawEvent,
    on_event: &mut OnEvent<'_>,
) -> Result<bool, InputError> {
    w.saw_trace_events = true;
    let open = with_more(win, path, |b, i| {
        expect(b, i, b'[', "\"traceEvents\" is not an array")?;
        Ok(peek(b, i)? == b']')
    })?;
    match open {
        Step::Done(true) => {
            win.pos += 1;
            return Ok(true);
        }
        Step::Done(false) => {}
        Step::Bad(offset, what) => {
            w.stopped = Some(Damage { offset, what: what.into() });
            return Ok(false);
        }
        Step::Eof | Step::TooLong => {
            w.truncated_at = Some(win.bytes_seen());
            return Ok(false);
        }
    }
    loop {
        // One element.
        let index = w.elements;
        w.elements += 1;
        let parsed = with_more(win, path, |b, i| {
            if peek(b, i)? != b'{' {
                return Err(Fail::Bad(*i, "an element of \"traceEvents\" that is not an object"));
            }
            parse_event(b, i, ev)
        })?;
        match parsed {
            Step::Done(()) => deliver(win, win.mark, w, ev, index, on_event),
            Step::Bad(off, what) => {
                w.damaged(off, what);
                win.pos = win.mark + 1;
                match resync(path, win, w, ev, on_event)? {
                    Resync::Event => {}
                    Resync::End => return Ok(true),
                    Resync::Eof => return Ok(false),
                }
            }
            Step::TooLong => {
                w.damaged(win.offset_of(win.mark), format!("an event longer than {} MiB", MAX_VALUE >> 20));
                win.pos = win.mark + 1;
                match resync(path, win, w, ev, on_event)? {
                    Resync::Event => {}
                    Resync::End => return Ok(true),
                    Resync::Eof => return Ok(false),
                }
            }
            Step::Eof => {
                w.truncated_at = Some(win.bytes_seen());
                return Ok(false);
            }
        }
        // The separator.
        loop {
            let sep = with_more(win, path, |b, i| {
                let c = peek(b, i)?;
                if c == b',' || c == b']' {
                    *i += 1;
                    Ok(c == b']')
                } else {
                    Err(Fail::Bad(*i, "expected ',' or ']' after an event"))
                }
            })?;
            match sep {
                Step::Done(false) => break,
                Step::Done(true) => return Ok(true),
                Step::Bad(off, what) => {
                    w.damaged(off, what);
                    match resync(path, win, w, ev, on_event)? {
                        Resync::Event => continue,
                        Resync::End => return Ok(true),
                        Resync::Eof => return Ok(false),
                    }
                }
                Step::Eof | Step::TooLong => {
                    w.truncated_at = Some(win.bytes_seen());
                    return Ok(false);
                }
            }
        }
    }
}

/// Hands an event parsed from the window at `at` on, or counts it as damaged.
fn deliver(win: &Window, at: usize, w: &mut Walked, ev: &RawEvent, index: usize, on_event: &mut OnEvent<'_>) {
    if let Some((pos, what)) = ev.bad {
        w.damaged(win.offset_of(at + pos), what);
        return;
    }
    if let Some(pos) = ev.repaired {
        w.repaired += 1;
        w.first_repaired.get_or_insert(win.offset_of(at + pos));
    }
    on_event(ev, index, &win.data()[at..]);
}

enum Resync {
    /// An event was found (and delivered); a separator comes next.
    Event,
    /// The end of the array was found (and consumed).
    End,
    Eof,
}

/// After damage: skips to the next event object of the array (a `{` not after `:` or `[` that
/// parses as an event followed by `,` or `]`), or to the array's end (`]` after `}`).
fn resync(
    path: &Path,
    win: &mut Window,
    w: &mut Walked,
    ev: &mut RawEvent,
    on_event: &mut OnEvent<'_>,
) -> Result<Resync, InputError> {
    let mut prev = b'{';
    loop {
        let mut j = win.pos;
        while j < win.len() {
            let c = win.data()[j];
            if c == b'{' && prev != b':' && prev != b'[' {
                win.pos = j;
                let index = w.elements;
                let tried = with_more(win, path, |b, i| {
                    parse_event(b, i, ev)?;
                    let c = peek(b, i)?;
                    Ok(c == b',' || c == b']')
                })?;
                match tried {
                    Step::Done(true) => {
                        w.elements += 1;
                        deliver(win, win.mark, w, ev, index, on_event);
                        return Ok(Resync::Event);
                    }
                    Step::Eof => {
                        w.truncated_at = Some(win.bytes_seen());
                        return Ok(Resync::Eof);
                    }
                    _ => {
                        // Not an event here (reading more may have moved the bytes): scan on after the brace.
                        win.pos = win.mark;
                        j = win.mark + 1;
                        prev = b'{';
                        continue;
                    }
                }
            }
            if c == b']' && prev == b'}' {
                win.pos = j + 1;
                return Ok(Resync::End);
            }
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                prev = c;
            }
            j += 1;
        }
        win.pos = win.len();
        if !win.fill(path)? {
            w.truncated_at = Some(win.bytes_seen());
            return Ok(Resync::Eof);
        }
    }
}
