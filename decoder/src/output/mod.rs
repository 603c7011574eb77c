//! Creating output files and folders: owner-only (files 0600, folders 0700), never through a
//! symlink at the output path; files replace their target atomically ([`replace`]). Traces name
//! kernels, hosts and command lines: they stay private.

use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

pub mod replace;

pub use replace::OutputFile;

/// Starts writing `path` owner-only: an [`OutputFile`] that replaces `path` atomically when
/// committed; a symlink at `path` is refused.
pub fn create_file(path: &Path) -> io::Result<OutputFile> {
    OutputFile::create(path)
}

/// Creates a folder (and its parents) owner-only; an existing folder is left as it is.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `bytes` to `path` owner-only, replacing it atomically (see [`OutputFile`]).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut f = create_file(path)?;
    f.write_all(bytes)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_private_and_symlinks_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/out.json");
        create_dir(p.parent().unwrap()).unwrap();
        write_file(&p, b"{}").unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(p.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::set_permissions(&p, Permissions::from_mode(0o644)).unwrap();
        write_file(&p, b"{}").unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        let target = d.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        let link = d.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_file(&link, b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }
}
