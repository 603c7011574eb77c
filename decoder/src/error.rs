//! Library errors.

use std::path::PathBuf;

/// Why an input could not be used (or only partly).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a valid Kineto/Chrome trace JSON: {message}")]
    BadJson { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    BadRing { path: PathBuf, message: String },
    #[error("{path}: unrecognised file (expected a tprof ring file or a Kineto .json/.json.gz trace)")]
    Unknown { path: PathBuf },
    #[error("{path}: is {kind}, not a regular file: tprof reads ring files and traces from regular files")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{pattern}: no such file, directory or glob match")]
    NotFound { pattern: String },
    #[error("no input files found in {0}")]
    Empty(String),
}

impl InputError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> InputError {
        InputError::Io { path: path.into(), source }
    }
}
