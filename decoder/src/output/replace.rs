//! Output files replaced atomically: written to a temporary file beside the target (owner-only,
//! created exclusively, never through a symlink) and renamed over the target only when complete. A
//! failed write, an error or a panic leaves the old file as it was and removes the temporary file; so
//! does SIGINT / SIGTERM / SIGHUP once [`remove_on_interrupt`] runs (the CLI's export and report).
//! The data reach the disk (fsync) before the rename, and the rename before the command ends (fsync of
//! the directory), so a crash or power loss leaves the old file or the whole new one, never an empty
//! or partial file under the target's name.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

/// Temporary files not yet renamed or removed: what an interrupt removes.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|p| p.into_inner())
}

fn forget(tmp: &Path) {
    let mut list = pending();
    if let Some(i) = list.iter().position(|p| p == tmp) {
        list.swap_remove(i);
    }
}

/// An output file being written. [`OutputFile::commit`] renames it over its target; dropped without a
/// commit, the temporary file is removed and the target is untouched.
#[derive(Debug)]
pub struct OutputFile {
    file: Option<File>,
    tmp: PathBuf,
    target: PathBuf,
}

impl OutputFile {
    /// Starts writing `target`: refuses a symlink or a directory there, then creates the temporary
    /// file `.<name>.tprof-<pid>-<n>.tmp` in the target's folder.
    pub fn create(target: &Path) -> io::Result<OutputFile> {
        if let Ok(m) = std::fs::symlink_metadata(target) {
            if m.file_type().is_symlink() {
                let what = format!("{} is a symbolic link; refusing to write through it", target.display());
                return Err(io::Error::new(io::ErrorKind::InvalidInput, what));
            }
            if m.is_dir() {
                let what = format!("{} is a directory; name a file", target.display());
                return Err(io::Error::new(io::ErrorKind::InvalidInput, what));
            }
        }
        let name = target.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{}: no file name", target.display()))
        })?;
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let mut last = None;
        for _ in 0..64 {
            let n = SERIAL.fetch_add(1, Ordering::Relaxed);
            let mut tmp_name = std::ffi::OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".tprof-{}-{n}.tmp", std::process::id()));
            let tmp = dir.join(tmp_name);
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&tmp);
            match opened {
                Ok(file) => {
                    pending().push(tmp.clone());
                    return Ok(OutputFile { file: Some(file), tmp, target: target.to_path_buf() });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no temporary file name left")))
    }

    /// The file this replaces.
    pub fn target(&self) -> &Path {
        &self.target
    }

    fn open(&mut self) -> io::Result<&mut File> {
        self.file.as_mut().ok_or_else(|| io::Error::other("output file already committed"))
    }

    /// Renames the complete file over the target (an existing target is replaced whole).
    pub fn commit(&mut self) -> io::Result<()> {
        let mut file = self.file.take().ok_or_else(|| io::Error::other("output file already committed"))?;
        file.flush()?;
        durable(file.sync_all())?;
        drop(file);
        let mut list = pending();
        let renamed = std::fs::rename(&self.tmp, &self.target);
        if let Some(i) = list.iter().position(|p| *p == self.tmp) {
            list.swap_remove(i);
        }
        drop(list);
        if renamed.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
            return renamed;
        }
        // The rename itself is made durable by syncing the directory (best effort: the file is
        // complete under its name already).
        let dir = self.target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// An fsync's result, where a file system that cannot sync (EINVAL, ENOTSUP: some FUSE and special
/// file systems) is not an error.
fn durable(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) => Ok(()),
        other => other,
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.open()?.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.open()?.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
            forget(&self.tmp);
        }
    }
}

/// From now on, SIGINT, SIGTERM and SIGHUP remove the temporary files of outputs being written, then
/// end the process as the signal would have. Once per process; a watcher thread checks every 20 ms.
pub fn remove_on_interrupt() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let received = Arc::new(AtomicUsize::new(0));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
            let _ = signal_hook::flag::register_usize(sig, Arc::clone(&received), sig as usize);
        }
        let watcher = move || loop {
            std::thread::sleep(Duration::from_millis(20));
            let sig = received.load(Ordering::Acquire) as i32;
            if sig != 0 {
                for tmp in pending().drain(..) {
                    let _ = std::fs::remove_file(tmp);
                }
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                std::process::exit(128 + sig);
            }
        };
        let _ = std::thread::Builder::new().name("tprof-interrupt".into()).spawn(watcher);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn the_old_file_stays_until_the_new_one_is_complete() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("trace.json");
        std::fs::write(&p, b"old").unwrap();
        let mut out = OutputFile::create(&p).unwrap();
        out.write_all(b"new contents").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"old", "replaced before the commit");
        assert_eq!(leftovers(d.path()).len(), 1);
        out.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
        assert!(leftovers(d.path()).is_empty());
        assert!(out.write_all(b"x").is_err(), "writes after the commit are refused");
    }

    #[test]
    fn a_write_that_fails_or_is_abandoned_leaves_the_old_file_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.html");
        std::fs::write(&p, b"old").unwrap();
        {
            let mut out = OutputFile::create(&p).unwrap();
            out.write_all(b"half of it").unwrap();
            // dropped here, as when an exporter returns an error or panics
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert!(leftovers(d.path()).is_empty(), "{:?}", leftovers(d.path()));
        assert!(!pending().iter().any(|t| t.starts_with(d.path())));
    }

    #[test]
    fn symlinks_and_directories_at_the_target_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = d.path().join("out.svg");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = OutputFile::create(&link).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = OutputFile::create(d.path()).unwrap_err();
        assert!(e.to_string().contains("is a directory") || e.to_string().contains("no file name"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(leftovers(d.path()).is_empty());
    }
}
