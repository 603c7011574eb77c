//! The simulated stack and the programs build from a clean checkout the way CI builds them
//! (`.venv` inside the checkout, `make -j2`), and a second `make` does nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Copies `rel` (a directory of the repository) without its `build/`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "build" {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        if e.file_type().unwrap().is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

fn make(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("make")
        .arg("--no-print-directory")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("VENV")
        .env_remove("NV")
        .env_remove("MAKEFLAGS")
        .output()
        .expect("run make");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn clean_copy_builds_in_parallel_and_a_second_make_is_a_no_op() {
    let root = repo();
    let venv = root.join(".venv");
    assert!(venv.join("lib").is_dir(), "{} missing: run `bash scripts/setup-python.sh`", venv.display());
    let tmp = std::env::temp_dir().join(format!("simgpu-build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for d in ["tests/simgpu", "tests/programs"] {
        copy_tree(&root.join(d), &tmp.join(d));
    }
    // CI: `bash scripts/setup-python.sh` makes .venv inside the checkout; no VENV given.
    std::os::unix::fs::symlink(&venv, tmp.join(".venv")).unwrap();
    for d in ["tests/simgpu", "tests/programs"] {
        let dir = tmp.join(d);
        let (ok, out) = make(&dir, &["-j2"]);
        assert!(ok, "make -j2 -C {d} in a clean copy failed:\n{out}");
        let (ok, out) = make(&dir, &[]);
        assert!(ok, "second make -C {d} failed:\n{out}");
        let work: Vec<&str> = out
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.contains("Nothing to be done") && !l.contains("nvcc not found"))
            .collect();
        assert!(work.is_empty(), "second make -C {d} is not a no-op:\n{out}");
    }
    for lib in ["libsimgpu.so", "libcudart.so.12", "libcudart.so.13", "libcuda.so.1", "libcupti.so.12", "libnccl.so.2"]
    {
        assert!(tmp.join("tests/simgpu/build").join(lib).exists(), "{lib} not built");
    }
    for bin in ["simtrain", "rt12_launch", "rt12_memory"] {
        assert!(tmp.join("tests/programs/build").join(bin).exists(), "{bin} not built");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
