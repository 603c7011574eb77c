//! Inputs: find the files a command was given (directories, files, globs), recognise their kind,
//! and decode each into a [`crate::model::TraceSink`].

pub mod id_slots;
pub mod kineto;
pub mod nvtx_pairing;
pub mod ring;

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::InputError;

/// What kind of trace a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Ring,
    Kineto,
}

/// One input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub path: PathBuf,
    pub kind: SourceKind,
}

/// A remark about the input that did not stop decoding (skipped file, damage, missing rank...).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Note {
    pub path: Option<PathBuf>,
    pub message: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}: {}", p.display(), self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Collected notes, in the order they were made.
#[derive(Debug, Clone, Default)]
pub struct Notes(pub Vec<Note>);

impl Notes {
    pub fn add(&mut self, path: Option<&Path>, message: impl Into<String>) {
        self.0.push(Note { path: path.map(Path::to_path_buf), message: message.into() });
    }
    pub fn extend(&mut self, other: Notes) {
        self.0.extend(other.0);
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Note> {
        self.0.iter()
    }
}

/// Magic bytes at the start of a ring file.
pub const RING_MAGIC: &[u8] = b"TPROF";

/// What tprof's own JSON exports (Chrome, Kineto) carry in their first bytes, so that a directory
/// search does not read them back as traces beside the rings they came from.
pub const EXPORT_MARK: &str = "\"otherData\":{\"producer\":\"tprof\"";

/// Whether the JSON file at `path` (gzip or not) is one of tprof's own exports.
fn is_own_export(path: &Path) -> bool {
    let Ok(f) = std::fs::File::open(path) else { return false };
    let mut head = Vec::with_capacity(256);
    let mut raw = [0u8; 2];
    let gz = std::fs::File::open(path).and_then(|mut g| g.read_exact(&mut raw)).is_ok() && raw == [0x1f, 0x8b];
    // A short or damaged file keeps what was read: the mark is in the first bytes or nowhere.
    let _ = if gz {
        flate2::read::GzDecoder::new(f).take(256).read_to_end(&mut head)
    } else {
        f.take(256).read_to_end(&mut head)
    };
    memchr::memmem::find(&head, EXPORT_MARK.as_bytes()).is_some()
}

/// Recognise a file by its first bytes, then by its name.
pub fn sniff(path: &Path) -> Result<Option<SourceKind>, InputError> {
    let mut head = [0u8; 16];
    let n = {
        let mut f = std::fs::File::open(path).map_err(|e| InputError::io(path, e))?;
        let mut n = 0;
        while n < head.len() {
            let k = f.read(&mut head[n..]).map_err(|e| InputError::io(path, e))?;
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    };
    let head = &head[..n];
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if head.starts_with(RING_MAGIC) || name.ends_with(".tprof") {
        return Ok(Some(SourceKind::Ring));
    }
    let gz = head.starts_with(&[0x1f, 0x8b]);
    let json = head.iter().find(|b| !b.is_ascii_whitespace()).is_some_and(|&b| b == b'{');
    if name.ends_with(".json") || name.ends_with(".json.gz") || (gz && name.contains(".json")) || json {
        return Ok(Some(SourceKind::Kineto));
    }
    Ok(None)
}

/// Expand command-line inputs: files are taken as given, directories are searched recursively
/// (unknown files are skipped with a note), other arguments are treated as glob patterns.
///
/// Every real file is taken once, however many paths (symbolic or hard links, overlapping
/// arguments) lead to it, and a directory is searched once: a link back up the tree is no loop.
pub fn discover(args: &[impl AsRef<str>], notes: &mut Notes) -> Result<Vec<Source>, InputError> {
    let mut walk = Walk::default();
    for arg in args {
        let arg = arg.as_ref();
        let path = Path::new(arg);
        if path.is_dir() {
            let before = walk.out.len();
            walk.dir(path, true, notes)?;
            if walk.out.len() == before {
                return Err(InputError::Empty(arg.to_string()));
            }
        } else if path.is_file() {
            match sniff(path)? {
                Some(kind) => walk.take(path, kind, notes),
                None => return Err(InputError::Unknown { path: path.to_path_buf() }),
            }
        } else if let Some(kind) = special_kind(path) {
            return Err(InputError::NotRegular { path: path.to_path_buf(), kind });
        } else {
            let paths = glob::glob(arg).map_err(|_| InputError::NotFound { pattern: arg.to_string() })?;
            let mut any = false;
            for p in paths.flatten() {
                if p.is_file() {
                    match sniff(&p)? {
                        Some(kind) => walk.take(&p, kind, notes),
                        None => notes.add(Some(&p), "skipped: not a ring file or Kineto trace"),
                    }
                    any = true;
                }
            }
            if !any {
                return Err(InputError::NotFound { pattern: arg.to_string() });
            }
        }
    }
    Ok(walk.out)
}

/// What an existing path that is neither a regular file nor a directory is ("a FIFO (named pipe)");
/// None for regular files, directories and paths that do not exist (links followed).
fn special_kind(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    Some(if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() || t.is_dir() {
        return None;
    } else {
        "a special file"
    })
}

/// A tprof control socket (`tprof-<pid>.sock`, see `tprof_format::control_protocol`), which lives
/// in the output directory beside the rings.
fn is_control_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let named =
        path.file_name().and_then(|n| n.to_str()).and_then(tprof_format::control_protocol::socket_pid).is_some();
    named && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Identity of a file or directory on this machine (device, inode), links followed.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The sources found so far, and which files and directories they came from.
#[derive(Default)]
struct Walk {
    out: Vec<Source>,
    /// File identity -> the path it was taken under.
    files: std::collections::HashMap<(u64, u64), PathBuf>,
    dirs: std::collections::HashSet<(u64, u64)>,
}

impl Walk {
    /// Takes a recognised file unless the same file was taken under another path.
    fn take(&mut self, path: &Path, kind: SourceKind, notes: &mut Notes) {
        if let Some(id) = file_id(path) {
            if let Some(first) = self.files.get(&id) {
                if first != path {
                    notes.add(Some(path), format!("skipped: the same file as {}", first.display()));
                }
                return;
            }
            self.files.insert(id, path.to_path_buf());
        }
        self.out.push(Source { path: path.to_path_buf(), kind });
    }

    /// Searches `dir` (`top`: named on the command line, so an error to read it is the command's;
    /// below, a directory that cannot be read is skipped with a note, as a file is).
    fn dir(&mut self, dir: &Path, top: bool, notes: &mut Notes) -> Result<(), InputError> {
        if let Some(id) = file_id(dir) {
            if !self.dirs.insert(id) {
                notes.add(Some(dir), "skipped: a directory already searched (a link back up the tree?)");
                return Ok(());
            }
        }
        let listing = match std::fs::read_dir(dir) {
            Ok(l) => l,
            Err(e) if !top => {
                notes.add(Some(dir), format!("skipped: cannot read this directory: {e}"));
                return Ok(());
            }
            Err(e) => return Err(InputError::io(dir, e)),
        };
        let mut entries: Vec<PathBuf> = listing.filter_map(|e| e.ok().map(|e| e.path())).collect();
        // Real entries before links, so a file is named by its own path rather than a link's.
        let is_link = |p: &PathBuf| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
        entries.sort_by_cached_key(|p| (is_link(p), p.clone()));
        for p in entries {
            let hidden = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
            if hidden {
                continue;
            }
            if p.is_dir() {
                self.dir(&p, false, notes)?;
            } else if p.is_file() {
                match sniff(&p) {
                    Ok(Some(SourceKind::Kineto)) if is_own_export(&p) => {
                        notes.add(Some(&p), "skipped: an export tprof wrote (name the file to read it)")
                    }
                    Ok(Some(kind)) => self.take(&p, kind, notes),
                    Ok(None) => notes.add(Some(&p), "skipped: not a ring file or Kineto trace"),
                    Err(e) => notes.add(Some(&p), format!("skipped: {e}")),
                }
            } else if is_control_socket(&p) {
                // A running (or crashed) process's `tprof ctl` socket beside its ring: expected.
            } else if let Some(kind) = special_kind(&p) {
                notes.add(Some(&p), format!("skipped: {kind}, not a regular file"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sockets_beside_the_rings_are_no_news() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("r0.tprof"), b"TPROF....").unwrap();
        let _own = std::os::unix::net::UnixListener::bind(d.path().join("tprof-42.sock")).unwrap();
        let _other = std::os::unix::net::UnixListener::bind(d.path().join("other.sock")).unwrap();
        let mut notes = Notes::default();
        let s = discover(&[d.path().to_str().unwrap()], &mut notes).unwrap();
        assert_eq!(s.len(), 1);
        // Only the foreign socket is noted.
        assert_eq!(notes.0.len(), 1, "{:?}", notes.0.iter().map(|n| &n.message).collect::<Vec<_>>());
        assert!(notes.0[0].message.contains("a socket"));
    }

    #[test]
    fn discovers_and_skips() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.json"), b"{\"traceEvents\":[]}").unwrap();
        std::fs::write(d.path().join("notes.txt"), b"hello").unwrap();
        std::fs::write(d.path().join("r0.tprof"), b"TPROF....").unwrap();
        let mut notes = Notes::default();
        let s = discover(&[d.path().to_str().unwrap()], &mut notes).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].kind, SourceKind::Kineto);
        assert_eq!(s[1].kind, SourceKind::Ring);
        assert_eq!(notes.0.len(), 1);
        assert!(notes.0[0].message.contains("skipped"));
        let pat = format!("{}/*.json", d.path().display());
        let s = discover(&[pat], &mut notes).unwrap();
        assert_eq!(s.len(), 1);
        assert!(discover(&["/nonexistent/x*"], &mut notes).is_err());
    }

    #[test]
    fn a_directory_search_skips_tprofs_own_exports_and_names_them() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("r0.tprof"), b"TPROF....").unwrap();
        let own = format!("{{{EXPORT_MARK},\"tprof_origin_ns\":5}},\"traceEvents\":[]}}");
        std::fs::write(d.path().join("trace.json"), &own).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(own.as_bytes()).unwrap();
        std::fs::write(d.path().join("rank0.pt.trace.json.gz"), gz.finish().unwrap()).unwrap();
        std::fs::write(d.path().join("kineto.json"), b"{\"schemaVersion\":1,\"traceEvents\":[]}").unwrap();
        let mut notes = Notes::default();
        let s = discover(&[d.path().to_str().unwrap()], &mut notes).unwrap();
        let names: Vec<_> = s.iter().map(|s| s.path.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["kineto.json", "r0.tprof"], "the two exports are left out");
        assert_eq!(notes.0.len(), 2, "one note per export");
        assert!(notes.0.iter().all(|n| n.message.contains("an export tprof wrote")));
        // Named on the command line, an export is read.
        let file = d.path().join("trace.json");
        let s = discover(&[file.to_str().unwrap()], &mut notes).unwrap();
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn links_lead_to_each_file_and_directory_once() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("r0.tprof"), b"TPROF....").unwrap();
        std::fs::write(root.join("sub/r1.tprof"), b"TPROF....").unwrap();
        // Two links to the directory itself, one back up from below, one to a file, one hard link.
        std::os::unix::fs::symlink(".", root.join("self")).unwrap();
        std::os::unix::fs::symlink(".", root.join("self2")).unwrap();
        std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
        std::os::unix::fs::symlink("r0.tprof", root.join("r0-link.tprof")).unwrap();
        std::fs::hard_link(root.join("sub/r1.tprof"), root.join("r1-hard.tprof")).unwrap();
        let mut notes = Notes::default();
        let root_s = root.to_str().unwrap();
        let pattern = format!("{root_s}/*.tprof");
        let s = discover(&[root_s, pattern.as_str()], &mut notes).unwrap();
        let names: Vec<String> = s.iter().map(|s| s.path.strip_prefix(root).unwrap().display().to_string()).collect();
        assert_eq!(names, vec!["r0.tprof", "r1-hard.tprof"], "{notes:?}");
        let said: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
        let first = root.join("r0.tprof").display().to_string();
        let link_note = format!("r0-link.tprof: skipped: the same file as {first}");
        assert!(said.iter().any(|n| n.ends_with(&link_note)), "{said:?}");
        assert!(said.iter().any(|n| n.contains("self: skipped: a directory already searched")), "{said:?}");
    }
}
