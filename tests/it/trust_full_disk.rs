//! A run log on a full disk (issue 23, audit): a record that cannot be written whole is cut
//! off again, so the log never ends in half a line. The disk is "full" through RLIMIT_FSIZE
//! (writes past the limit fail with EFBIG once SIGXFSZ is ignored), set for grpofit alone.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::os::unix::process::CommandExt;
use std::process::Command;

#[test]
fn a_record_written_in_part_is_cut_off_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("grpofit"));
    cmd.current_dir(dir.path())
        .env("HF_HUB_OFFLINE", "1")
        .env("GRPOFIT_CONFIG_DIR", dir.path().join("config"))
        .args(["--no-gpu", "run", "--preset", "24gb", "--gpu-mem", "24GiB"])
        .args(["--log", "run.jsonl", "--", "true"]);
    // SAFETY: setrlimit(2) and signal(2) in the child before exec, no allocation
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 300,
                rlim_max: 300,
            };
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot write the run log"), "{stderr}");
    let log = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    for line in log.lines() {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "a torn line: {line:?}"
        );
    }
    assert!(log.is_empty() || log.ends_with('\n'), "{log:?}");
}
