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
pub fn discover(args: &[impl AsRef<str>], notes: &mut Notes) -> Result<Vec<Source>, InputError> {
    let mut out = Vec::new();
    for arg in args {
        let arg = arg.as_ref();
        let path = Path::new(arg);
        if path.is_dir() {
            let before = out.len();
            walk_dir(path, &mut out, notes)?;
            if out.len() == before {
                return Err(InputError::Empty(arg.to_string()));
            }
        } else if path.is_file() {
            match sniff(path)? {
                Some(kind) => out.push(Source { path: path.to_path_buf(), kind }),
                None => return Err(InputError::Unknown { path: path.to_path_buf() }),
            }
        } else {
            let paths = glob::glob(arg).map_err(|_| InputError::NotFound { pattern: arg.to_string() })?;
            let mut any = false;
            for p in paths.flatten() {
                if p.is_file() {
                    match sniff(&p)? {
                        Some(kind) => out.push(Source { path: p, kind }),
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
    out.dedup_by(|a, b| a.path == b.path);
    Ok(out)
}

fn walk_dir(dir: &Path, out: &mut Vec<Source>, notes: &mut Notes) -> Result<(), InputError> {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(|e| InputError::io(dir, e))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        let hidden = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if p.is_dir() {
            walk_dir(&p, out, notes)?;
        } else if p.is_file() {
            match sniff(&p) {
                Ok(Some(kind)) => out.push(Source { path: p, kind }),
                Ok(None) => notes.add(Some(&p), "skipped: not a ring file or Kineto trace"),
                Err(e) => notes.add(Some(&p), format!("skipped: {e}")),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
