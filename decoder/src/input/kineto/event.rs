//! One element of `traceEvents`, parsed into the fields the importer reads (everything else is
//! skipped without being held). A field of the wrong type marks the event bad (it is skipped and
//! counted) unless it can be read without doubt: a timestamp or duration written as a numeric
//! string is used as the number.

use super::json::{expect, literal, number, peek, skip_value, string, string_bytes, Fail, R};
use super::words::Words;

/// The event's category in today's Kineto spelling (PyTorch <= 1.9 wrote `Kernel`, `Memcpy`,
/// `Memset`, `Runtime`, `Driver`, `Operator`; a null category is an empty one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Cat {
    Kernel,
    Memcpy,
    Memset,
    Runtime,
    Driver,
    UserAnnotation,
    CpuOp,
    #[default]
    Other,
}

impl Cat {
    pub fn is_gpu(self) -> bool {
        matches!(self, Cat::Kernel | Cat::Memcpy | Cat::Memset)
    }
    pub fn is_cpu_side(self) -> bool {
        matches!(self, Cat::Runtime | Cat::Driver | Cat::CpuOp | Cat::UserAnnotation)
    }
}

/// The event phase (`ph`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Ph {
    /// A complete slice.
    X,
    /// A counter.
    C,
    /// Metadata.
    M,
    #[default]
    Other,
}

/// The numeric args the importer reads (`as_u64`, else the float cast).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NumArg {
    Correlation,
    Stream,
    Device,
    Context,
    Registers,
    SharedMem,
    Bytes,
    ExternalId,
    InNelems,
    OutNelems,
    GroupSize,
}
const NUM_ARGS: usize = 11;

/// The fields of one event the importer uses.
#[derive(Debug, Default)]
pub(super) struct RawEvent {
    pub ph: Ph,
    pub cat: Cat,
    pub name: String,
    pub pid: u32,
    pub tid: u32,
    pub ts: Option<f64>,
    pub dur: Option<f64>,
    pub has_args: bool,
    nums: [Option<u64>; NUM_ARGS],
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub collective_name: Option<String>,
    /// `args` has a "Collective name" key (of any type).
    pub collective_key: bool,
    pub dtype: Option<String>,
    pub process_group: Option<String>,
    /// `args.name` (metadata events).
    pub meta_name: Option<String>,
    /// The `args` object's bytes (start, end) within the parsed slice: counters read it again.
    pub args_span: (usize, usize),
    /// The first wrongly typed field: (position in the slice, what).
    pub bad: Option<(usize, &'static str)>,
    /// A field read from a numeric string.
    pub repaired: Option<usize>,
}

impl RawEvent {
    fn clear(&mut self) {
        let mut name = std::mem::take(&mut self.name);
        name.clear();
        *self = RawEvent { name, ..RawEvent::default() };
    }
    pub fn arg(&self, k: NumArg) -> Option<u64> {
        self.nums[k as usize]
    }
    pub fn arg_or0(&self, k: NumArg) -> u64 {
        self.arg(k).unwrap_or(0)
    }
    fn mark_bad(&mut self, at: usize, what: &'static str) {
        if self.bad.is_none() {
            self.bad = Some((at, what));
        }
    }
}

/// How `pid` / `tid` are read: a number's u64 value (truncated), "stream N" or "N" as a string, else 0.
fn id_value(b: &[u8], i: &mut usize) -> R<u32> {
    Ok(match peek(b, i)? {
        b'"' => string(b, i)?.trim_start_matches("stream ").parse().unwrap_or(0),
        b'-' | b'0'..=b'9' | b'N' | b'I' => number(b, i)?.as_u64().unwrap_or(0) as u32,
        _ => {
            skip_value(b, i, 1)?;
            0
        }
    })
}

/// `ts` / `dur`: a number, null (absent), or a numeric string (repaired); else the event is bad.
fn time_value(b: &[u8], i: &mut usize, ev: &mut RawEvent, what: &'static str) -> R<Option<f64>> {
    let at = *i;
    match peek(b, i)? {
        b'n' => {
            literal(b, i, b"null")?;
            Ok(None)
        }
        b'"' => {
            let s = string(b, i)?;
            match s.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => {
                    ev.repaired.get_or_insert(at);
                    Ok(Some(v))
                }
                _ => {
                    ev.mark_bad(at, what);
                    Ok(None)
                }
            }
        }
        b'-' | b'0'..=b'9' | b'N' | b'I' => {
            let v = number(b, i)?.as_f64();
            if !v.is_finite() {
                ev.mark_bad(at, what);
            }
            Ok(Some(v))
        }
        _ => {
            skip_value(b, i, 1)?;
            ev.mark_bad(at, what);
            Ok(None)
        }
    }
}

/// An optional string arg: a string, else None (as `Value::as_str`).
fn str_arg(b: &[u8], i: &mut usize) -> R<Option<String>> {
    if peek(b, i)? == b'"' {
        return Ok(Some(string(b, i)?.into_owned()));
    }
    skip_value(b, i, 1)?;
    Ok(None)
}

fn num_arg(b: &[u8], i: &mut usize) -> R<Option<u64>> {
    match peek(b, i)? {
        b'-' | b'0'..=b'9' | b'N' | b'I' => Ok(Some(number(b, i)?.to_u64())),
        _ => {
            skip_value(b, i, 1)?;
            Ok(None)
        }
    }
}

/// `grid` / `block`: each of the first three elements' u64 value (truncated), else 0.
fn dims_arg(b: &[u8], i: &mut usize) -> R<[u32; 3]> {
    let mut out = [0u32; 3];
    if peek(b, i)? != b'[' {
        skip_value(b, i, 1)?;
        return Ok(out);
    }
    *i += 1;
    if peek(b, i)? == b']' {
        *i += 1;
        return Ok(out);
    }
    let mut k = 0;
    loop {
        let v = match peek(b, i)? {
            b'-' | b'0'..=b'9' | b'N' | b'I' => number(b, i)?.as_u64().unwrap_or(0) as u32,
            _ => {
                skip_value(b, i, 2)?;
                0
            }
        };
        if k < 3 {
            out[k] = v;
        }
        k += 1;
        match peek(b, i)? {
            b',' => *i += 1,
            b']' => {
                *i += 1;
                return Ok(out);
            }
            _ => return Err(Fail::Bad(*i, "expected ',' or ']' in an array")),
        }
    }
}

/// Calls `each(key, i)` for every key of the object at `i` (read by `key`), which must consume the value.
fn members<'a, K>(
    b: &'a [u8],
    i: &mut usize,
    mut key: impl FnMut(&'a [u8], &mut usize) -> R<K>,
    mut each: impl FnMut(K, &mut usize) -> R<()>,
) -> R<()> {
    expect(b, i, b'{', "expected '{'")?;
    if peek(b, i)? == b'}' {
        *i += 1;
        return Ok(());
    }
    loop {
        if peek(b, i)? != b'"' {
            return Err(Fail::Bad(*i, "expected a key"));
        }
        let k = key(b, i)?;
        expect(b, i, b':', "expected ':' after a key")?;
        each(k, i)?;
        match peek(b, i)? {
            b',' => *i += 1,
            b'}' => {
                *i += 1;
                return Ok(());
            }
            _ => return Err(Fail::Bad(*i, "expected ',' or '}' in an object")),
        }
    }
}

/// The `args` keys the importer reads, and a few it does not that Kineto writes often (found
/// without a scan, then skipped as any other).
#[derive(Clone, Copy)]
enum Arg {
    Num(NumArg),
    Grid,
    Block,
    CollectiveName,
    Dtype,
    ProcessGroup,
    Name,
    Unused,
}

const ARGS: Words<Arg, 29> = Words::new([
    (b"correlation", Arg::Num(NumArg::Correlation)),
    (b"context", Arg::Num(NumArg::Context)),
    (b"cbid", Arg::Unused),
    (b"stream", Arg::Num(NumArg::Stream)),
    (b"shared memory", Arg::Num(NumArg::SharedMem)),
    (b"sort_index", Arg::Unused),
    (b"device", Arg::Num(NumArg::Device)),
    (b"dtype", Arg::Dtype),
    (b"registers per thread", Arg::Num(NumArg::Registers)),
    (b"bytes", Arg::Num(NumArg::Bytes)),
    (b"block", Arg::Block),
    (b"blocks per SM", Arg::Unused),
    (b"External id", Arg::Num(NumArg::ExternalId)),
    (b"Ev Idx", Arg::Unused),
    (b"In msg nelems", Arg::Num(NumArg::InNelems)),
    (b"Input Dims", Arg::Unused),
    (b"Input type", Arg::Unused),
    (b"Out msg nelems", Arg::Num(NumArg::OutNelems)),
    (b"Group size", Arg::Num(NumArg::GroupSize)),
    (b"grid", Arg::Grid),
    (b"Collective name", Arg::CollectiveName),
    (b"Process Group Name", Arg::ProcessGroup),
    (b"name", Arg::Name),
    (b"queued", Arg::Unused),
    (b"warps per SM", Arg::Unused),
    (b"est. achieved occupancy %", Arg::Unused),
    (b"Sequence number", Arg::Unused),
    (b"Fwd thread id", Arg::Unused),
    (b"Record function id", Arg::Unused),
]);

fn args(b: &[u8], i: &mut usize, ev: &mut RawEvent) -> R<()> {
    members(
        b,
        i,
        |b, i| ARGS.find(b, i),
        |key, i| {
            let num = match key {
                Some(Arg::Num(n)) => n,
                Some(Arg::Grid) => return dims_arg(b, i).map(|d| ev.grid = d),
                Some(Arg::Block) => return dims_arg(b, i).map(|d| ev.block = d),
                Some(Arg::CollectiveName) => {
                    ev.collective_key = true;
                    return str_arg(b, i).map(|s| ev.collective_name = s);
                }
                Some(Arg::Dtype) => return str_arg(b, i).map(|s| ev.dtype = s),
                Some(Arg::ProcessGroup) => return str_arg(b, i).map(|s| ev.process_group = s),
                Some(Arg::Name) => return str_arg(b, i).map(|s| ev.meta_name = s),
                Some(Arg::Unused) | None => return skip_value(b, i, 1),
            };
            ev.nums[num as usize] = num_arg(b, i)?;
            Ok(())
        },
    )
}

/// The event's keys the importer reads, and a few it does not.
#[derive(Clone, Copy)]
enum Field {
    Ph,
    Cat,
    Name,
    Pid,
    Tid,
    Ts,
    Dur,
    Args,
    Unused,
}

const FIELDS: Words<Field, 11> = Words::new([
    (b"ph", Field::Ph),
    (b"pid", Field::Pid),
    (b"cat", Field::Cat),
    (b"name", Field::Name),
    (b"tid", Field::Tid),
    (b"ts", Field::Ts),
    (b"dur", Field::Dur),
    (b"args", Field::Args),
    (b"id", Field::Unused),
    (b"bp", Field::Unused),
    (b"s", Field::Unused),
]);

const PHASES: Words<Ph, 3> = Words::new([(b"X", Ph::X), (b"C", Ph::C), (b"M", Ph::M)]);

const CATEGORIES: Words<Cat, 13> = Words::new([
    (b"kernel", Cat::Kernel),
    (b"Kernel", Cat::Kernel),
    (b"gpu_memcpy", Cat::Memcpy),
    (b"gpu_memset", Cat::Memset),
    (b"Memcpy", Cat::Memcpy),
    (b"Memset", Cat::Memset),
    (b"cuda_runtime", Cat::Runtime),
    (b"cuda_driver", Cat::Driver),
    (b"cpu_op", Cat::CpuOp),
    (b"Runtime", Cat::Runtime),
    (b"Driver", Cat::Driver),
    (b"user_annotation", Cat::UserAnnotation),
    (b"Operator", Cat::CpuOp),
]);

/// A string field looked up in `words` (None: another string); another type marks the event bad
/// (null too, unless `null_ok`).
fn word_value<T: Copy, const N: usize>(
    b: &[u8],
    i: &mut usize,
    ev: &mut RawEvent,
    words: &Words<T, N>,
    null_ok: bool,
    what: &'static str,
) -> R<Option<T>> {
    let at = *i;
    if peek(b, i)? == b'"' {
        return words.find(b, i);
    }
    let is_null = b[*i] == b'n';
    skip_value(b, i, 1)?;
    if !(is_null && null_ok) {
        ev.mark_bad(at, what);
    }
    Ok(None)
}

/// Parses the event object at `i` into `ev` (cleared first). `Err` when the bytes are not one
/// JSON object (or end inside it); a wrongly typed field only sets `ev.bad`.
pub(super) fn parse_event(b: &[u8], i: &mut usize, ev: &mut RawEvent) -> R<()> {
    ev.clear();
    members(
        b,
        i,
        |b, i| FIELDS.find(b, i),
        |key, i| {
            match key {
                Some(Field::Ph) => {
                    ev.ph = word_value(b, i, ev, &PHASES, false, "\"ph\" is not a string")?.unwrap_or_default();
                }
                Some(Field::Cat) => {
                    ev.cat = word_value(b, i, ev, &CATEGORIES, true, "\"cat\" is not a string")?.unwrap_or_default();
                }
                Some(Field::Name) => {
                    let at = *i;
                    if peek(b, i)? == b'"' {
                        let s = string(b, i)?;
                        ev.name.clear();
                        ev.name.push_str(&s);
                    } else {
                        skip_value(b, i, 1)?;
                        ev.mark_bad(at, "\"name\" is not a string");
                    }
                }
                Some(Field::Pid) => ev.pid = id_value(b, i)?,
                Some(Field::Tid) => ev.tid = id_value(b, i)?,
                Some(Field::Ts) => ev.ts = time_value(b, i, ev, "\"ts\" is not a finite number")?,
                Some(Field::Dur) => ev.dur = time_value(b, i, ev, "\"dur\" is not a finite number")?,
                Some(Field::Args) => {
                    let at = peek(b, i).map(|_| *i)?;
                    match b[at] {
                        b'{' => {
                            args(b, i, ev)?;
                            ev.has_args = true;
                            ev.args_span = (at, *i);
                        }
                        b'n' => literal(b, i, b"null")?,
                        _ => {
                            skip_value(b, i, 1)?;
                            ev.mark_bad(at, "\"args\" is not an object");
                        }
                    }
                }
                Some(Field::Unused) | None => skip_value(b, i, 1)?,
            }
            Ok(())
        },
    )
}

/// A counter's numeric args in key order (duplicates: the last), and how many distinct keys `args`
/// has, read again from the event's bytes.
pub(super) fn counter_args(b: &[u8], ev: &RawEvent) -> (Vec<(String, f64)>, usize) {
    let mut all: std::collections::BTreeMap<String, Option<f64>> = std::collections::BTreeMap::new();
    let mut i = ev.args_span.0;
    let b = &b[..ev.args_span.1];
    let _ = members(b, &mut i, string_bytes, |key, i| {
        let v = match peek(b, i)? {
            b'-' | b'0'..=b'9' | b'N' | b'I' => Some(number(b, i)?.as_f64()),
            _ => {
                skip_value(b, i, 1)?;
                None
            }
        };
        all.insert(String::from_utf8_lossy(&key).into_owned(), v);
        Ok(())
    });
    let n = all.len();
    (all.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect(), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> (R<()>, RawEvent) {
        let mut ev = RawEvent::default();
        let mut i = 0;
        let r = parse_event(s.as_bytes(), &mut i, &mut ev);
        (r, ev)
    }

    #[test]
    fn fields_and_args() {
        let (r, ev) = parse(
            r#"{"ph":"X","cat":"Kernel","name":"k","pid":"stream 7","tid":3.5,"ts":10.5,"dur":2,"x":[1,{"y":2}],
               "args":{"correlation":9,"stream":7.9,"grid":[2,3,4,5],"block":"?","dtype":"Float","device":-1}} "#,
        );
        r.unwrap();
        assert_eq!((ev.ph, ev.cat, ev.name.as_str(), ev.pid, ev.tid), (Ph::X, Cat::Kernel, "k", 7, 0));
        assert_eq!((ev.ts, ev.dur), (Some(10.5), Some(2.0)));
        assert_eq!(ev.arg(NumArg::Correlation), Some(9));
        assert_eq!(ev.arg(NumArg::Stream), Some(7));
        assert_eq!(ev.arg(NumArg::Device), Some(0));
        assert_eq!((ev.grid, ev.block), ([2, 3, 4], [0, 0, 0]));
        assert_eq!(ev.dtype.as_deref(), Some("Float"));
        assert!(ev.bad.is_none());
    }

    #[test]
    fn wrong_types_mark_the_event_or_are_repaired() {
        let (r, ev) = parse(r#"{"ph":"X","ts":"12","dur":" 3.5 ","name":"a"}"#);
        r.unwrap();
        assert_eq!((ev.ts, ev.dur, ev.bad, ev.repaired.is_some()), (Some(12.0), Some(3.5), None, true));
        for bad in [
            r#"{"ph":null}"#,
            r#"{"name":7}"#,
            r#"{"ts":"x"}"#,
            r#"{"ts":NaN}"#,
            r#"{"dur":Infinity}"#,
            r#"{"args":[1]}"#,
        ] {
            let (r, ev) = parse(bad);
            r.unwrap();
            assert!(ev.bad.is_some(), "{bad}");
        }
        let (r, ev) = parse(r#"{"cat":null,"ts":null}"#);
        r.unwrap();
        assert_eq!((ev.cat, ev.ts, ev.bad), (Cat::Other, None, None));
        assert!(matches!(parse(r#"{"ph":"X",}"#).0, Err(Fail::Bad(..))));
        assert_eq!(parse(r#"{"ph":"X","#).0, Err(Fail::More));
    }

    #[test]
    fn counters_in_key_order() {
        let s = r#"{"ph":"C","args":{"b":2,"a":1.5,"s":"x","b":3}}"#;
        let (r, ev) = parse(s);
        r.unwrap();
        let (vals, n) = counter_args(s.as_bytes(), &ev);
        assert_eq!(vals, vec![("a".to_string(), 1.5), ("b".to_string(), 3.0)]);
        assert_eq!(n, 3);
    }
}
