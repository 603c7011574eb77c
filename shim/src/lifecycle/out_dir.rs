//! Whether the output directory is safe to write rings and the control socket into: the user's own
//! (or root's), and not writable by every user unless sticky. Another user who can rename entries in
//! it could swap a ring for a file of their choosing (a decoder bomb for whoever reads the job's
//! rings) or a socket of their own; root, which may write anywhere, would not notice.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The reason `dir` is refused (None: safe). `euid` is the effective uid rings are written as.
pub fn refusal(dir: &Path, euid: u32) -> Option<String> {
    let meta = std::fs::metadata(dir).ok()?;
    let mode = meta.mode() & 0o7777;
    let shown = dir.display();
    if meta.uid() != euid && meta.uid() != 0 {
        return Some(format!(
            "TPROF_OUT={shown} belongs to uid {}, not to you (uid {euid}): that user could replace the rings \
             and the control socket; set TPROF_OUT to a directory of your own (e.g. mkdir -m 700 ~/tprof-out)",
            meta.uid()
        ));
    }
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Some(format!(
            "TPROF_OUT={shown} is writable by every user (mode {mode:04o}, no sticky bit): anyone could replace \
             the rings and the control socket; run `chmod o-w {shown}` (or `chmod +t`), or use a directory of \
             your own"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn euid() -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn own_private_directory_is_accepted() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(refusal(d.path(), euid()), None);
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(refusal(d.path(), euid()), None);
    }

    #[test]
    fn world_writable_without_sticky_bit_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = refusal(d.path(), euid()).expect("refused");
        assert!(why.contains("mode 0777, no sticky bit") && why.contains("chmod o-w"), "{why}");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(refusal(d.path(), euid()), None, "sticky like /tmp");
    }

    #[test]
    fn another_users_directory_is_refused() {
        let d = tempfile::tempdir().unwrap();
        // Root using nobody's directory (the attack); as another user, a directory of ours seen by a
        // stranger uid.
        let (me, owner) = if euid() == 0 {
            std::os::unix::fs::chown(d.path(), Some(65534), Some(65534)).unwrap();
            (0, 65534)
        } else {
            (euid() + 1, euid())
        };
        let why = refusal(d.path(), me).expect("refused");
        assert!(why.contains(&format!("belongs to uid {owner}, not to you (uid {me})")), "{why}");
        assert!(why.contains("mkdir -m 700"), "{why}");
        assert_eq!(refusal(Path::new("/nonexistent/tprof-out-dir"), euid()), None, "missing: created later");
    }
}
