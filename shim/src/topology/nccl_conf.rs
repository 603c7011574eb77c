//! The NCCL settings of `NCCL_SETTINGS` this process runs with, as NCCL itself resolves them at its
//! first init (`initEnv` in NCCL's `param.cc`): the environment first, then `NCCL_CONF_FILE` (else
//! `~/.nccl.conf`), then `/etc/nccl.conf` (under the sysroot); a file's `NAME=value` lines never
//! override what is already set; `#` starts a comment line.

use std::path::Path;

use tprof_format::topology::NCCL_SETTINGS;

/// Adds the file's settings that are not set yet.
fn read_conf(path: &Path, out: &mut Vec<(String, String)>) {
    let Ok(text) = std::fs::read_to_string(path) else { return };
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let Some((name, value)) = line.split_once('=') else { continue };
        let (name, value) = (name.trim(), value.trim());
        if NCCL_SETTINGS.contains(&name) && !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_string(), value.to_string()));
        }
    }
}

/// (name, value) of every setting of `NCCL_SETTINGS` that is set, in NCCL's order of precedence.
/// `env`: the environment lookup; `root`: the sysroot `/etc/nccl.conf` is read under.
pub fn settings(env: impl Fn(&str) -> Option<String>, root: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> =
        NCCL_SETTINGS.iter().filter_map(|n| env(n).map(|v| (n.to_string(), v))).collect();
    match env("NCCL_CONF_FILE").filter(|f| !f.is_empty()) {
        Some(f) => read_conf(Path::new(&f), &mut out),
        None => {
            if let Some(home) = env("HOME") {
                read_conf(&Path::new(&home).join(".nccl.conf"), &mut out);
            }
        }
    }
    read_conf(&root.join("etc/nccl.conf"), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_then_user_file_then_system_file() {
        let dir = std::env::temp_dir().join(format!("tprof-nccl-conf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(dir.join("user.conf"), "# tuned\nNCCL_PROTO = Simple\nNCCL_MAX_NCHANNELS=4\nNCCL_DEBUG=INFO\n")
            .unwrap();
        std::fs::write(dir.join("etc/nccl.conf"), "NCCL_P2P_DISABLE=1\nNCCL_PROTO=LL\nnot a setting\n").unwrap();
        let conf = dir.join("user.conf").display().to_string();
        let env = |n: &str| match n {
            "NCCL_MAX_NCHANNELS" => Some("2".to_string()),
            "NCCL_CONF_FILE" => Some(conf.clone()),
            _ => None,
        };
        let got = settings(env, &dir);
        let want = [("NCCL_MAX_NCHANNELS", "2"), ("NCCL_PROTO", "Simple"), ("NCCL_P2P_DISABLE", "1")];
        assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec());
        assert!(settings(|_| None, &dir.join("none")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
