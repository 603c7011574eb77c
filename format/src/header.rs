//! The 4 KiB header page: fixed geometry, live counters the writer updates in place, and a key=value
//! metadata block (process identity, clock, configuration). Unknown keys are kept, so old readers
//! survive new writers.

use crate::error::FormatError;

/// File magic at offset 0.
pub const MAGIC: [u8; 8] = *b"TPROFRNG";
/// The format version this crate writes. Readers accept every version up to this one.
pub const FORMAT_VERSION: u16 = 1;
/// Size of the header page.
pub const HEADER_BYTES: usize = 4096;
/// Where the key=value metadata block starts inside the header page.
pub const META_OFFSET: usize = 128;
/// Largest metadata block.
pub const META_MAX: usize = HEADER_BYTES - META_OFFSET;

/// Byte offsets of the fixed header fields (all little-endian).
pub mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 8;
    pub const ENDIAN: usize = 10;
    pub const POINTER_SIZE: usize = 11;
    pub const HEADER_BYTES: usize = 12;
    pub const CHUNK_BYTES: usize = 16;
    pub const CHUNK_COUNT: usize = 20;
    pub const DICT_OFFSET: usize = 24;
    pub const DICT_BYTES: usize = 32;
    pub const RING_OFFSET: usize = 40;
    pub const META_LEN: usize = 48;
    pub const META_CRC: usize = 52;
    /// CRC32 of bytes 0..56.
    pub const FIXED_CRC: usize = 56;
    /// Live counters, each an 8-byte aligned u64 updated atomically by the writer.
    pub const LIVE_DROPPED: usize = 64;
    pub const LIVE_NEXT_SEQ: usize = 72;
    pub const LIVE_DICT_USED: usize = 80;
    pub const LIVE_FLAGS: usize = 88;
    pub const LIVE_LAST_COMMIT_TICKS: usize = 96;
    pub const LIVE_CUPTI_DROPPED: usize = 104;
    pub const LIVE_EVENTS: usize = 112;
    pub const LIVE_RESERVED: usize = 120;
}

/// Bits of the live `flags` word.
pub mod flags {
    /// The writer closed the file cleanly (process exit flushed everything).
    pub const CLEAN_CLOSE: u64 = 1 << 0;
    /// The ring wrapped at least once (the oldest events were overwritten).
    pub const WRAPPED: u64 = 1 << 1;
    /// The writer ran out of dictionary space and wrote strings inline.
    pub const DICT_FULL: u64 = 1 << 2;
    /// The shim disabled itself during the run.
    pub const SHIM_DISABLED: u64 = 1 << 3;
}

/// Which clock the record timestamps ("ticks") come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockSource {
    /// The invariant TSC (`rdtsc`); convert with the file's ClockSync records.
    Tsc,
    /// CLOCK_MONOTONIC nanoseconds: ticks are already ns.
    #[default]
    Monotonic,
}

impl ClockSource {
    pub fn name(self) -> &'static str {
        match self {
            ClockSource::Tsc => "tsc",
            ClockSource::Monotonic => "monotonic",
        }
    }
    pub fn parse(s: &str) -> Option<ClockSource> {
        match s {
            "tsc" => Some(ClockSource::Tsc),
            "monotonic" => Some(ClockSource::Monotonic),
            _ => None,
        }
    }
}

/// A parsed header page: the header, its live counters, and non-fatal problems (offset, what).
pub type ParsedHeader = (FileHeader, LiveStats, Vec<(u64, String)>);

/// Everything a ring file says about the process that wrote it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FileHeader {
    pub version: u16,
    /// True when the writing host was little-endian (all fields are stored little-endian regardless).
    pub little_endian: bool,
    pub pointer_size: u8,
    pub pid: u32,
    pub ppid: u32,
    pub hostname: String,
    pub cmdline: Vec<String>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    /// A job identifier (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, ...) when one was found.
    pub job_id: Option<String>,
    /// CLOCK_REALTIME at start, ns since the Unix epoch.
    pub start_wall_ns: u64,
    /// CLOCK_MONOTONIC at start, ns.
    pub start_mono_ns: u64,
    /// Ticks at start (same instant as the two above).
    pub start_ticks: u64,
    pub clock_source: ClockSource,
    /// Ticks per second, as calibrated at start (1e9 for the monotonic clock).
    pub ticks_per_sec: f64,
    /// Capture mode the shim ran in (full, steps, sample, flight, metrics).
    pub mode: String,
    /// Version of the tprof that wrote the file.
    pub writer: String,
    pub chunk_bytes: u32,
    pub chunk_count: u32,
    pub dict_offset: u64,
    pub dict_bytes: u64,
    pub ring_offset: u64,
    /// Metadata keys this version does not interpret.
    pub extra: Vec<(String, String)>,
}

/// The live counters of a file, as the writer last left them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveStats {
    pub dropped_events: u64,
    pub next_seq: u64,
    pub dict_used: u64,
    pub flags: u64,
    pub last_commit_ticks: u64,
    pub cupti_dropped: u64,
    pub events_written: u64,
}

impl LiveStats {
    pub fn clean_close(&self) -> bool {
        self.flags & flags::CLEAN_CLOSE != 0
    }
    pub fn wrapped(&self) -> bool {
        self.flags & flags::WRAPPED != 0
    }
}

fn le_u16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
pub(crate) fn le_u32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}
pub(crate) fn le_u64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

/// Escapes a metadata value: `\` `\n` and the argument separator `\x1f` are escaped.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\x1f' => s.push_str("\\u"),
            c => s.push(c),
        }
    }
    s
}

fn unescape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    let mut it = v.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => s.push('\n'),
                Some('u') => s.push('\x1f'),
                Some(o) => s.push(o),
                None => {}
            }
        } else {
            s.push(c);
        }
    }
    s
}

impl FileHeader {
    /// The key=value metadata block, truncated (by dropping the command line tail) to fit the page.
    pub fn meta_block(&self) -> Vec<u8> {
        let opt = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_default();
        let mut lines: Vec<(String, String)> = vec![
            ("pid".into(), self.pid.to_string()),
            ("ppid".into(), self.ppid.to_string()),
            ("hostname".into(), self.hostname.clone()),
            ("rank".into(), opt(self.rank)),
            ("local_rank".into(), opt(self.local_rank)),
            ("world_size".into(), opt(self.world_size)),
            ("job_id".into(), self.job_id.clone().unwrap_or_default()),
            ("start_wall_ns".into(), self.start_wall_ns.to_string()),
            ("start_mono_ns".into(), self.start_mono_ns.to_string()),
            ("start_ticks".into(), self.start_ticks.to_string()),
            ("clock_source".into(), self.clock_source.name().into()),
            ("ticks_per_sec".into(), format!("{}", self.ticks_per_sec)),
            ("mode".into(), self.mode.clone()),
            ("writer".into(), self.writer.clone()),
        ];
        lines.extend(self.extra.iter().cloned());
        let mut out = Vec::new();
        for (k, v) in &lines {
            out.extend_from_slice(format!("{}={}\n", k, escape(v)).as_bytes());
        }
        // The command line goes last so that a very long one is what gets cut.
        let joined: Vec<String> = self.cmdline.iter().map(|a| escape(a)).collect();
        let mut cmd = format!("cmdline={}\n", joined.join("\x1f")).into_bytes();
        let room = META_MAX.saturating_sub(out.len());
        if cmd.len() > room {
            cmd.truncate(room.saturating_sub(1));
            // Do not cut inside a UTF-8 sequence or an escape.
            while !cmd.is_empty() && (std::str::from_utf8(&cmd).is_err() || cmd.ends_with(b"\\")) {
                cmd.pop();
            }
            cmd.push(b'\n');
        }
        out.extend_from_slice(&cmd);
        out.truncate(META_MAX);
        out
    }

    /// Writes the whole header page into `page` (at least [`HEADER_BYTES`] long). Live counters start at 0.
    pub fn write_page(&self, page: &mut [u8]) {
        page[..HEADER_BYTES].fill(0);
        page[off::MAGIC..off::MAGIC + 8].copy_from_slice(&MAGIC);
        page[off::VERSION..off::VERSION + 2].copy_from_slice(&self.version.to_le_bytes());
        page[off::ENDIAN] = u8::from(self.little_endian);
        page[off::POINTER_SIZE] = self.pointer_size;
        page[off::HEADER_BYTES..off::HEADER_BYTES + 4].copy_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
        page[off::CHUNK_BYTES..off::CHUNK_BYTES + 4].copy_from_slice(&self.chunk_bytes.to_le_bytes());
        page[off::CHUNK_COUNT..off::CHUNK_COUNT + 4].copy_from_slice(&self.chunk_count.to_le_bytes());
        page[off::DICT_OFFSET..off::DICT_OFFSET + 8].copy_from_slice(&self.dict_offset.to_le_bytes());
        page[off::DICT_BYTES..off::DICT_BYTES + 8].copy_from_slice(&self.dict_bytes.to_le_bytes());
        page[off::RING_OFFSET..off::RING_OFFSET + 8].copy_from_slice(&self.ring_offset.to_le_bytes());
        let meta = self.meta_block();
        page[off::META_LEN..off::META_LEN + 4].copy_from_slice(&(meta.len() as u32).to_le_bytes());
        page[off::META_CRC..off::META_CRC + 4].copy_from_slice(&crc32fast::hash(&meta).to_le_bytes());
        let fixed_crc = crc32fast::hash(&page[..off::FIXED_CRC]);
        page[off::FIXED_CRC..off::FIXED_CRC + 4].copy_from_slice(&fixed_crc.to_le_bytes());
        page[META_OFFSET..META_OFFSET + meta.len()].copy_from_slice(&meta);
    }

    /// Parses a header page. `file_len` is the size of the file, for geometry checks.
    /// Returns the header, its live counters, and non-fatal problems (offset, what).
    pub fn parse(page: &[u8], file_len: u64) -> Result<ParsedHeader, FormatError> {
        if page.is_empty() {
            return Err(FormatError::Empty);
        }
        if page.len() < 8 || page[..8] != MAGIC {
            let n = page.len().min(8);
            return Err(FormatError::BadMagic { found: page[..n].to_vec() });
        }
        if page.len() < HEADER_BYTES {
            return Err(FormatError::Truncated {
                offset: page.len() as u64,
                what: format!("header page needs {HEADER_BYTES} bytes, file has {}", page.len()),
            });
        }
        let version = le_u16(page, off::VERSION);
        if version == 0 || version > FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion { version, max: FORMAT_VERSION });
        }
        let stored_crc = le_u32(page, off::FIXED_CRC);
        if crc32fast::hash(&page[..off::FIXED_CRC]) != stored_crc {
            return Err(FormatError::Corrupt {
                offset: off::FIXED_CRC as u64,
                what: "header checksum mismatch (geometry fields 0..56 damaged)".into(),
            });
        }
        let mut problems = Vec::new();
        let mut h = FileHeader {
            version,
            little_endian: page[off::ENDIAN] == 1,
            pointer_size: page[off::POINTER_SIZE],
            chunk_bytes: le_u32(page, off::CHUNK_BYTES),
            chunk_count: le_u32(page, off::CHUNK_COUNT),
            dict_offset: le_u64(page, off::DICT_OFFSET),
            dict_bytes: le_u64(page, off::DICT_BYTES),
            ring_offset: le_u64(page, off::RING_OFFSET),
            ..FileHeader::default()
        };
        let geometry_ok = h.chunk_bytes as usize >= crate::chunk::CHUNK_HEADER_BYTES + 64
            && h.chunk_bytes.is_multiple_of(8)
            && h.dict_offset >= HEADER_BYTES as u64
            && h.dict_offset.checked_add(h.dict_bytes) == Some(h.ring_offset)
            && h.ring_offset.is_multiple_of(8)
            && h.chunk_count > 0
            && h.ring_offset.checked_add(u64::from(h.chunk_bytes) * u64::from(h.chunk_count)).is_some();
        if !geometry_ok {
            return Err(FormatError::Corrupt {
                offset: off::CHUNK_BYTES as u64,
                what: format!(
                    "impossible geometry: chunk_bytes {} chunk_count {} dict {}+{} ring at {}",
                    h.chunk_bytes, h.chunk_count, h.dict_offset, h.dict_bytes, h.ring_offset
                ),
            });
        }
        let _ = file_len;
        let meta_len = (le_u32(page, off::META_LEN) as usize).min(META_MAX);
        let meta = &page[META_OFFSET..META_OFFSET + meta_len];
        if crc32fast::hash(meta) != le_u32(page, off::META_CRC) {
            problems.push((META_OFFSET as u64, "metadata checksum mismatch; parsed what could be read".to_string()));
        }
        h.parse_meta(meta);
        let live = LiveStats {
            dropped_events: le_u64(page, off::LIVE_DROPPED),
            next_seq: le_u64(page, off::LIVE_NEXT_SEQ),
            dict_used: le_u64(page, off::LIVE_DICT_USED),
            flags: le_u64(page, off::LIVE_FLAGS),
            last_commit_ticks: le_u64(page, off::LIVE_LAST_COMMIT_TICKS),
            cupti_dropped: le_u64(page, off::LIVE_CUPTI_DROPPED),
            events_written: le_u64(page, off::LIVE_EVENTS),
        };
        Ok((h, live, problems))
    }

    pub(crate) fn parse_meta(&mut self, meta: &[u8]) {
        let text = String::from_utf8_lossy(meta);
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else { continue };
            let num = |s: &str| s.parse::<u64>().ok();
            let opt32 = |s: &str| if s.is_empty() { None } else { s.parse::<u32>().ok() };
            match k {
                "pid" => self.pid = num(v).unwrap_or(0) as u32,
                "ppid" => self.ppid = num(v).unwrap_or(0) as u32,
                "hostname" => self.hostname = unescape(v),
                "rank" => self.rank = opt32(v),
                "local_rank" => self.local_rank = opt32(v),
                "world_size" => self.world_size = opt32(v),
                "job_id" => self.job_id = if v.is_empty() { None } else { Some(unescape(v)) },
                "start_wall_ns" => self.start_wall_ns = num(v).unwrap_or(0),
                "start_mono_ns" => self.start_mono_ns = num(v).unwrap_or(0),
                "start_ticks" => self.start_ticks = num(v).unwrap_or(0),
                "clock_source" => self.clock_source = ClockSource::parse(v).unwrap_or_default(),
                "ticks_per_sec" => self.ticks_per_sec = v.parse().unwrap_or(0.0),
                "mode" => self.mode = unescape(v),
                "writer" => self.writer = unescape(v),
                "cmdline" => {
                    self.cmdline = if v.is_empty() { Vec::new() } else { v.split('\x1f').map(unescape).collect() }
                }
                _ => self.extra.push((k.to_string(), unescape(v))),
            }
        }
    }

    /// Value of an extra metadata key.
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extra.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Total file size implied by the geometry.
    pub fn file_bytes(&self) -> u64 {
        self.ring_offset + u64::from(self.chunk_bytes) * u64::from(self.chunk_count)
    }
}

/// The conventional ring file name: `<host>-r<rank>-p<pid>.tprof` (`rNA` without a rank).
pub fn ring_file_name(hostname: &str, rank: Option<u32>, pid: u32) -> String {
    let host: String = hostname
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
        .collect();
    let host = if host.is_empty() { "host".to_string() } else { host };
    match rank {
        Some(r) => format!("{host}-r{r}-p{pid}.tprof"),
        None => format!("{host}-rNA-p{pid}.tprof"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> FileHeader {
        FileHeader {
            version: FORMAT_VERSION,
            little_endian: true,
            pointer_size: 8,
            pid: 1234,
            ppid: 1,
            hostname: "node-07".into(),
            cmdline: vec!["python".into(), "train.py".into(), "--lr=1e-3\nx".into()],
            rank: Some(3),
            local_rank: Some(3),
            world_size: Some(8),
            job_id: Some("job42".into()),
            start_wall_ns: 1_700_000_000_000_000_000,
            start_mono_ns: 123_456_789,
            start_ticks: 987_654_321,
            clock_source: ClockSource::Tsc,
            ticks_per_sec: 2.5e9,
            mode: "full".into(),
            writer: "tprof 0.1.0".into(),
            chunk_bytes: 65536,
            chunk_count: 16,
            dict_offset: 4096,
            dict_bytes: 65536,
            ring_offset: 4096 + 65536,
            extra: vec![("future_key".into(), "v".into())],
        }
    }

    #[test]
    fn header_roundtrips_including_unknown_keys() {
        let h = sample();
        let mut page = vec![0u8; HEADER_BYTES];
        h.write_page(&mut page);
        let (back, live, problems) = FileHeader::parse(&page, h.file_bytes()).unwrap();
        assert_eq!(back, h);
        assert_eq!(live, LiveStats::default());
        assert!(problems.is_empty());
    }

    #[test]
    fn future_version_and_bad_magic_are_refused() {
        let h = sample();
        let mut page = vec![0u8; HEADER_BYTES];
        h.write_page(&mut page);
        let mut future = page.clone();
        future[off::VERSION..off::VERSION + 2].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        assert!(matches!(FileHeader::parse(&future, 0), Err(FormatError::UnsupportedVersion { .. })));
        let mut bad = page.clone();
        bad[0] = b'X';
        assert!(matches!(FileHeader::parse(&bad, 0), Err(FormatError::BadMagic { .. })));
        assert!(matches!(FileHeader::parse(&[], 0), Err(FormatError::Empty)));
        assert!(matches!(FileHeader::parse(&page[..100], 0), Err(FormatError::Truncated { .. })));
    }

    #[test]
    fn damaged_metadata_is_reported_not_fatal() {
        let h = sample();
        let mut page = vec![0u8; HEADER_BYTES];
        h.write_page(&mut page);
        page[META_OFFSET + 2] ^= 0x40;
        let (_, _, problems) = FileHeader::parse(&page, 0).unwrap();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, META_OFFSET as u64);
    }

    #[test]
    fn huge_command_lines_are_cut_to_fit() {
        let mut h = sample();
        h.cmdline = (0..2000).map(|i| format!("--arg{i}")).collect();
        let meta = h.meta_block();
        assert!(meta.len() <= META_MAX);
        let mut page = vec![0u8; HEADER_BYTES];
        h.write_page(&mut page);
        let (back, _, problems) = FileHeader::parse(&page, 0).unwrap();
        assert!(problems.is_empty());
        assert_eq!(back.hostname, "node-07");
        assert!(back.cmdline.len() > 10 && back.cmdline.len() < 2000);
    }

    #[test]
    fn file_names_show_host_rank_and_pid() {
        assert_eq!(ring_file_name("node 7/a", Some(3), 99), "node_7_a-r3-p99.tprof");
        assert_eq!(ring_file_name("", None, 5), "host-rNA-p5.tprof");
    }
}
