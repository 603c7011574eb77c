//! Errors of the format crate. Every variant that concerns a place in a file carries its offset.

use std::path::PathBuf;

/// Why a file cannot be read at all (damage inside an otherwise readable file is a [`crate::Damage`]).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("empty file (0 bytes): not a tprof ring file")]
    Empty,
    #[error("not a tprof ring file: bad magic at offset 0 (found {found:02x?}, expected \"TPROFRNG\")")]
    BadMagic { found: Vec<u8> },
    #[error("format version {version} is not supported by this tprof (it reads versions 1..={max}); upgrade tprof")]
    UnsupportedVersion { version: u16, max: u16 },
    #[error("truncated at offset {offset}: {what}")]
    Truncated { offset: u64, what: String },
    #[error("corrupt at offset {offset}: {what}")]
    Corrupt { offset: u64, what: String },
    #[error("is a directory, not a ring file")]
    IsDirectory,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A [`FormatError`] with the file it concerns.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    #[source]
    pub source: FormatError,
}
