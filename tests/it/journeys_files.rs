#![allow(clippy::unwrap_used)]
//! The export set as files (issue 28): written into a temporary folder and renamed into place,
//! so a failed write leaves nothing half-written; an existing folder refused without --force
//! and replaced whole with it, never when it holds the user's own files; launch.sh created
//! 0777 less the umask.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

const RECIPE: &str = "tests/fixtures/journeys/trl-docs-grpo.yaml";

/// `estimate --config RECIPE --export-dir DIR [extra]` (`--preset 24gb` under a file-size
/// limit), under `umask` and that file-size limit (RLIMIT_FSIZE: a write past it fails with EFBIG once SIGXFSZ is ignored).
fn export(dir: &Path, extra: &[&str], umask: u32, file_size: Option<u64>) -> Output {
    let source = if file_size.is_some() {
        ["--preset", "24gb"]
    } else {
        ["--config", RECIPE]
    };
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("grpofit"));
    cmd.env("HF_HUB_OFFLINE", "1")
        .args(["--no-gpu", "estimate", "--gpu-mem", "24GiB"])
        .args(source)
        .arg("--export-dir")
        .arg(dir)
        .args(extra);
    // SAFETY: umask(2), setrlimit(2) and signal(2) in the child before exec, no allocation
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(umask as libc::mode_t);
            if let Some(bytes) = file_size {
                let limit = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn launch_sh_takes_the_umask() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let out = export(&dir, &[], 0o077, None);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(mode(&dir.join("launch.sh")), 0o700);
    assert_eq!(mode(&dir.join("tuned.yaml")), 0o600);
    assert_eq!(mode(&dir), 0o700);
    let dir = tmp.path().join("shared");
    export(&dir, &[], 0o002, None);
    assert_eq!(mode(&dir.join("launch.sh")), 0o775);
}

#[test]
fn a_write_that_fails_half_way_leaves_no_set() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    // the preset's set: run.toml (about 1.3 kB) and launch.sh fit under the limit, the
    // stand-in train_unsloth.py (over 1.8 kB) after them does not
    let out = export(&dir, &[], 0o022, Some(1500));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot write"), "{err}");
    assert!(
        !dir.exists(),
        "a half-written set appeared: {:?}",
        names(&dir)
    );
    assert!(
        names(tmp.path()).is_empty(),
        "left behind: {:?}",
        names(tmp.path())
    );
}

#[test]
fn an_existing_set_is_refused_then_replaced_whole_never_the_users_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    assert_eq!(export(&dir, &[], 0o022, None).status.code(), Some(0));
    // an earlier set's file the new one does not write
    std::fs::write(dir.join("ds_config.json"), "{}").unwrap();
    let again = export(&dir, &[], 0o022, None);
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert!(err.contains("already exists; nothing written"), "{err}");
    assert_eq!(
        export(&dir, &["--force"], 0o022, None).status.code(),
        Some(0)
    );
    assert_eq!(names(&dir), ["accelerate.yaml", "launch.sh", "tuned.yaml"]);
    assert_eq!(names(tmp.path()), ["set"]);
    std::fs::write(dir.join("notes.md"), "mine").unwrap();
    let kept = export(&dir, &["--force"], 0o022, None);
    let err = String::from_utf8_lossy(&kept.stderr);
    assert_eq!(kept.status.code(), Some(2), "{err}");
    assert!(
        err.contains("notes.md, which no launch set writes"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.md")).unwrap(),
        "mine"
    );
}
