//! Small streaming-JSON helpers for the trace-event writers (Chrome, Kineto): escaped strings and
//! microsecond times with nanosecond digits, written without building values.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::model::Ns;
use crate::output::OutputFile;

/// Write `s` as a JSON string literal.
pub fn write_str<W: Write + ?Sized>(w: &mut W, s: &str) -> io::Result<()> {
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20) {
        // Nothing to escape (nearly every name): one copy.
        w.write_all(b"\"")?;
        w.write_all(bytes)?;
        return w.write_all(b"\"");
    }
    w.write_all(b"\"")?;
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0..=0x1f => None,
            _ => continue,
        };
        w.write_all(&bytes[start..i])?;
        match esc {
            Some(e) => w.write_all(e)?,
            None => write!(w, "\\u{b:04x}")?,
        }
        start = i + 1;
    }
    w.write_all(&bytes[start..])?;
    w.write_all(b"\"")
}

/// Write an unsigned integer in decimal (as `write!(w, "{v}")` does, without the fmt machinery).
pub fn write_u64<W: Write + ?Sized>(w: &mut W, mut v: u64) -> io::Result<()> {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    w.write_all(&buf[i..])
}

/// Write nanoseconds as microseconds with three decimals ("12.345", "-0.010"): exact, and small
/// enough after rebasing that readers parsing doubles keep nanosecond precision.
pub fn write_us<W: Write + ?Sized>(w: &mut W, ns: i64) -> io::Result<()> {
    // Digits written backwards into a stack buffer: no formatting machinery per timestamp.
    let a = ns.unsigned_abs();
    let mut buf = [0u8; 32];
    let mut i = buf.len();
    let mut frac = a % 1000;
    for _ in 0..3 {
        i -= 1;
        buf[i] = b'0' + (frac % 10) as u8;
        frac /= 10;
    }
    i -= 1;
    buf[i] = b'.';
    let mut int = a / 1000;
    loop {
        i -= 1;
        buf[i] = b'0' + (int % 10) as u8;
        int /= 10;
        if int == 0 {
            break;
        }
    }
    if ns < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    w.write_all(&buf[i..])
}

/// A trace-event JSON file being written: `{<head>"traceEvents":[` event, event, ... `]<tail>}`.
/// Gzipped when the path ends in `.gz`. Times are written relative to `origin`.
pub struct EventStream {
    out: BufWriter<OutFile>,
    first: bool,
    origin: i64,
    pub path: PathBuf,
    /// Events started with [`EventStream::event`].
    pub events: u64,
}

impl EventStream {
    /// Create the file and write `{` + `head` (members, each followed by a comma) + `"traceEvents":[`.
    pub fn create(path: &Path, origin: Ns, head: &str) -> io::Result<EventStream> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::output::create_dir(dir)?;
        }
        let f = crate::output::create_file(path)?;
        let inner = if path.extension().is_some_and(|e| e == "gz") {
            OutFile::Gz(flate2::write::GzEncoder::new(f, flate2::Compression::fast()))
        } else {
            OutFile::Plain(f)
        };
        let mut out = BufWriter::with_capacity(1 << 20, inner);
        write!(out, "{{{head}\"traceEvents\":[")?;
        Ok(EventStream { out, first: true, origin: origin as i64, path: path.to_path_buf(), events: 0 })
    }

    /// Start the next event object: writes the separator and `{`; the caller writes the members
    /// (without braces) and calls [`EventStream::end`].
    pub fn event(&mut self) -> io::Result<&mut BufWriter<OutFile>> {
        self.events += 1;
        self.meta()
    }

    /// Like [`EventStream::event`], for metadata and flow events (not counted).
    pub fn meta(&mut self) -> io::Result<&mut BufWriter<OutFile>> {
        if self.first {
            self.first = false;
            self.out.write_all(b"\n{")?;
        } else {
            self.out.write_all(b",\n{")?;
        }
        Ok(&mut self.out)
    }

    /// Close the current event.
    pub fn end(&mut self) -> io::Result<()> {
        self.out.write_all(b"}")
    }

    /// The writer, for members of the current event.
    pub fn w(&mut self) -> &mut BufWriter<OutFile> {
        &mut self.out
    }

    /// Write `"ts":<us>` for a global time.
    pub fn ts(&mut self, t: Ns) -> io::Result<()> {
        self.out.write_all(b"\"ts\":")?;
        write_us(&mut self.out, t as i64 - self.origin)
    }

    /// Write `"ts":<us>,"dur":<us>` for a slice.
    pub fn ts_dur(&mut self, start: Ns, end: Ns) -> io::Result<()> {
        self.ts(start)?;
        self.out.write_all(b",\"dur\":")?;
        write_us(&mut self.out, end.saturating_sub(start) as i64)
    }

    /// Write `]` + `tail` (members, each preceded by a comma) + `}` and flush everything.
    pub fn close(mut self, tail: &str) -> io::Result<()> {
        write!(self.out, "\n]{tail}}}\n")?;
        let inner = self.out.into_inner().map_err(|e| e.into_error())?;
        finish_box(inner)
    }
}

/// An output file, plain or gzipped.
pub enum OutFile {
    Plain(OutputFile),
    Gz(flate2::write::GzEncoder<OutputFile>),
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            OutFile::Plain(f) => f.write(buf),
            OutFile::Gz(g) => g.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            OutFile::Plain(f) => f.flush(),
            OutFile::Gz(g) => g.flush(),
        }
    }
}

/// Write the gzip trailer, then replace the target with the complete file.
fn finish_box(w: OutFile) -> io::Result<()> {
    let mut f = match w {
        OutFile::Plain(f) => f,
        OutFile::Gz(g) => g.finish()?,
    };
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut v = Vec::new();
        f(&mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn strings_and_times() {
        let t = s(|w| write_str(w, "a\"b\\c\nd\u{1}é"));
        assert_eq!(t, r#""a\"b\\c\nd\u0001é""#);
        let back: String = serde_json::from_str(&t).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é");
        assert_eq!(s(|w| write_us(w, 12_345)), "12.345");
        assert_eq!(s(|w| write_us(w, -10)), "-0.010");
        assert_eq!(s(|w| write_us(w, 7)), "0.007");
        for ns in [0, 1, 999, 1000, 1001, -1, -999_999, 123_456_789_012, i64::MAX, i64::MIN, i64::MIN + 1] {
            let a = ns.unsigned_abs();
            let want = format!("{}{}.{:03}", if ns < 0 { "-" } else { "" }, a / 1000, a % 1000);
            assert_eq!(s(|w| write_us(w, ns)), want);
        }
        assert_eq!(s(|w| write_str(w, "plain name")), "\"plain name\"");
        for v in [0u64, 7, 10, 99, 12_345, u32::MAX as u64, u64::MAX] {
            assert_eq!(s(|w| write_u64(w, v)), v.to_string());
        }
    }
}
