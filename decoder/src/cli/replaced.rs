//! Saying when an output replaced existing files: outputs are replaced whole and atomically
//! (`output::replace`), the old file's mode and links are not kept, so the last line says so.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The files that exist at `output` before writing: the file itself, or a folder's files.
pub fn existing(output: &Path) -> HashSet<PathBuf> {
    match std::fs::metadata(output) {
        Ok(m) if m.is_dir() => std::fs::read_dir(output)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default(),
        Ok(_) => HashSet::from([output.to_path_buf()]),
        Err(_) => HashSet::new(),
    }
}

/// `"; replaced the existing file"` (or `N existing files`) when `written` overwrote some of `before`.
pub fn note(before: &HashSet<PathBuf>, written: &[PathBuf]) -> String {
    match written.iter().filter(|f| before.contains(*f)).count() {
        0 => String::new(),
        1 if written.len() == 1 => "; replaced the existing file".into(),
        n => format!("; replaced {n} existing files"),
    }
}
