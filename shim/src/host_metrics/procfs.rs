//! Reading /proc and sysfs files without reopening them: a [`ProcFile`] is opened once and read
//! with `pread` at offset 0 into the sampler's one reused buffer (procfs regenerates the text on
//! every read from offset 0), and small parsers for the formats the sampler reads.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Ticks of /proc's CPU times (USER_HZ): 100 on every Linux architecture tprof runs on.
pub const NS_PER_USER_HZ_TICK: u64 = 10_000_000;

/// A /proc or sysfs file opened once.
#[derive(Debug)]
pub struct ProcFile {
    file: File,
}

impl ProcFile {
    pub fn open(path: &str) -> Option<ProcFile> {
        File::open(path).ok().map(|file| ProcFile { file })
    }

    /// The file's whole text, read into `buf` (reused: it grows once to the largest file). None
    /// when the file is gone (the process or thread exited) or unreadable.
    pub fn read<'b>(&self, buf: &'b mut Vec<u8>) -> Option<&'b [u8]> {
        buf.clear();
        if buf.capacity() < 4096 {
            buf.reserve(4096);
        }
        loop {
            let len = buf.len();
            let cap = buf.capacity();
            buf.resize(cap, 0);
            match self.file.read_at(&mut buf[len..], len as u64) {
                Ok(0) => {
                    buf.truncate(len);
                    break;
                }
                Ok(n) => {
                    buf.truncate(len + n);
                    if buf.len() == buf.capacity() {
                        buf.reserve(buf.capacity());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(len),
                Err(_) => return None,
            }
        }
        (!buf.is_empty()).then_some(&buf[..])
    }
}

/// A decimal number at the start of `s` (after spaces); None when there is none.
pub fn number(s: &[u8]) -> Option<u64> {
    let s = trim_start(s);
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    std::str::from_utf8(&s[..digits]).ok()?.parse().ok()
}

fn trim_start(s: &[u8]) -> &[u8] {
    let skip = s.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &s[skip..]
}

/// The number after `key` on the line that starts with it (`key` includes its separator, e.g.
/// `b"MemAvailable:"`).
pub fn keyed(text: &[u8], key: &[u8]) -> Option<u64> {
    text.split(|&b| b == b'\n').find(|l| l.starts_with(key)).and_then(|l| number(&l[key.len()..]))
}

/// `/proc/<pid>/stat` and `/proc/<pid>/task/<tid>/stat`: the fields the sampler uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    pub ppid: u32,
    pub minflt: u64,
    pub majflt: u64,
    pub utime_ns: u64,
    pub stime_ns: u64,
    pub threads: u64,
    pub rss_pages: u64,
}

/// Parses a stat line; `comm` gets the name between the parentheses (it may hold spaces and
/// parentheses itself: the name ends at the last `)`).
pub fn parse_stat<'a>(text: &'a [u8], comm: &mut &'a [u8]) -> Option<Stat> {
    let open = text.iter().position(|&b| b == b'(')?;
    let close = text.iter().rposition(|&b| b == b')')?;
    *comm = text.get(open + 1..close)?;
    let mut f = text.get(close + 1..)?.split(|b| b.is_ascii_whitespace()).filter(|s| !s.is_empty());
    // Fields after the name: 3 state, 4 ppid, ... 10 minflt, 12 majflt, 14 utime, 15 stime,
    // 20 num_threads, 24 rss (man 5 proc).
    let mut field = [0u64; 22];
    let _state = f.next()?;
    for slot in field.iter_mut() {
        // tpgid, priority and nice may be negative: those are not used, read as 0.
        let v = f.next()?;
        *slot = if v.first() == Some(&b'-') { 0 } else { number(v)? };
    }
    let at = |n: usize| field[n - 4];
    Some(Stat {
        ppid: at(4) as u32,
        minflt: at(10),
        majflt: at(12),
        utime_ns: at(14) * NS_PER_USER_HZ_TICK,
        stime_ns: at(15) * NS_PER_USER_HZ_TICK,
        threads: at(20),
        rss_pages: at(24),
    })
}

/// `schedstat`: (time on a CPU, time waiting on a run queue), ns.
pub fn parse_schedstat(text: &[u8]) -> Option<(u64, u64)> {
    let mut f = text.split(|b| b.is_ascii_whitespace()).filter(|s| !s.is_empty());
    Some((number(f.next()?)?, number(f.next()?)?))
}

/// `schedstat` with its third field: (on a CPU, waiting, timeslices run).
pub fn parse_schedstat3(text: &[u8]) -> Option<(u64, u64, u64)> {
    let mut f = text.split(|b| b.is_ascii_whitespace()).filter(|s| !s.is_empty());
    Some((number(f.next()?)?, number(f.next()?)?, number(f.next()?)?))
}

/// `status`: (voluntary, involuntary) context switches.
pub fn parse_switches(text: &[u8]) -> Option<(u64, u64)> {
    Some((keyed(text, b"voluntary_ctxt_switches:")?, keyed(text, b"nonvoluntary_ctxt_switches:")?))
}

/// `/proc/<pid>/io`: rchar, wchar, read_bytes, write_bytes.
pub fn parse_io(text: &[u8]) -> Option<[u64; 4]> {
    Some([
        keyed(text, b"rchar:")?,
        keyed(text, b"wchar:")?,
        keyed(text, b"read_bytes:")?,
        keyed(text, b"write_bytes:")?,
    ])
}

/// A list of decimal numbers separated by spaces (`task/<tid>/children`).
pub fn for_each_number(text: &[u8], mut f: impl FnMut(u64)) {
    for part in text.split(|b| b.is_ascii_whitespace()).filter(|s| !s.is_empty()) {
        if let Some(n) = number(part) {
            f(n);
        }
    }
}

/// A CPU list (`0-3,8,10-11`, sysfs `cpulist`).
pub fn parse_cpu_list(text: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    for part in text.split(|&b| b == b',' || b.is_ascii_whitespace()).filter(|s| !s.is_empty()) {
        let mut ends = part.splitn(2, |&b| b == b'-');
        let a = ends.next().and_then(number);
        let b = ends.next().and_then(number);
        match (a, b) {
            (Some(a), Some(b)) if b >= a && b - a < 65_536 => out.extend((a..=b).map(|c| c as u32)),
            (Some(a), None) => out.push(a as u32),
            _ => {}
        }
    }
    out
}

/// A PSI line's `total=` (stall time, microseconds) as ns: `some ...` or `full ...` of /proc/pressure/*.
pub fn psi_total_ns(text: &[u8], which: &[u8]) -> Option<u64> {
    let line = text.split(|&b| b == b'\n').find(|l| l.starts_with(which))?;
    let at = line.windows(6).position(|w| w == b"total=")?;
    number(&line[at + 6..]).map(|us| us.saturating_mul(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_a_name_holding_spaces_and_parentheses() {
        let line = b"4242 (pt worker (1)) S 4200 4242 4200 0 -1 4194560 1500 0 7 0 250 31 0 0 20 0 3 0 12345 1000000 2048 18446744073709551615";
        let mut comm: &[u8] = b"";
        let st = parse_stat(line, &mut comm).unwrap();
        assert_eq!(comm, b"pt worker (1)");
        assert_eq!(st.ppid, 4200);
        assert_eq!((st.minflt, st.majflt), (1500, 7));
        assert_eq!((st.utime_ns, st.stime_ns), (2_500_000_000, 310_000_000));
        assert_eq!((st.threads, st.rss_pages), (3, 2048));
        assert_eq!(parse_stat(b"12 (x) S 1 2", &mut comm), None);
    }

    #[test]
    fn small_formats() {
        assert_eq!(parse_schedstat(b"1264852 146985 1\n"), Some((1264852, 146985)));
        assert_eq!(parse_schedstat3(b"1264852 146985 7\n"), Some((1264852, 146985, 7)));
        let status = b"Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_switches(status), Some((12, 3)));
        let io = b"rchar: 6976\nwchar: 5\nsyscr: 10\nsyscw: 0\nread_bytes: 4096\nwrite_bytes: 0\n";
        assert_eq!(parse_io(io), Some([6976, 5, 4096, 0]));
        assert_eq!(parse_cpu_list(b"0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        let psi = b"some avg10=38.07 avg60=15.79 avg300=6.58 total=33604607\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=12\n";
        assert_eq!(psi_total_ns(psi, b"some"), Some(33_604_607_000));
        assert_eq!(psi_total_ns(psi, b"full"), Some(12_000));
        let mut v = Vec::new();
        for_each_number(b"11 12 13\n", |n| v.push(n));
        assert_eq!(v, vec![11, 12, 13]);
        assert_eq!(keyed(b"MemTotal:  100 kB\nMemAvailable:   42 kB\n", b"MemAvailable:"), Some(42));
    }

    #[test]
    fn reads_a_live_proc_file_again_and_again() {
        let f = ProcFile::open("/proc/self/stat").unwrap();
        let mut buf = Vec::new();
        for _ in 0..3 {
            let mut comm: &[u8] = b"";
            let text = f.read(&mut buf).unwrap();
            let st = parse_stat(text, &mut comm).unwrap();
            assert_eq!(st.ppid, std::os::unix::process::parent_id());
        }
    }
}
