//! Decode a tprof ring file into the model (waits for the format crate's reader).

use std::path::Path;

use super::Notes;
use crate::error::InputError;
use crate::model::*;

/// Decode one ring file into `sink` as process `id`, shifting times by `offset_ns`.
pub fn feed(
    path: &Path,
    _id: ProcId,
    _offset_ns: i64,
    _sink: &mut dyn TraceSink,
    _notes: &mut Notes,
) -> Result<ProcessInfo, InputError> {
    Err(InputError::BadRing { path: path.to_path_buf(), message: "ring reader not available yet".into() })
}
