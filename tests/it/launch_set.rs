#![allow(clippy::unwrap_used)]
//! Launch sets per stack and per node, from the binary; the multi-node launch.sh is run on two
//! "nodes" with `trl` and `accelerate` stand-ins that record how they were called.

use assert_cmd::Command;
use std::path::Path;

const OPEN_R1: &str = "examples/multi-gpu/open-r1-7plus1-h100.toml";

fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("HF_HUB_OFFLINE", "1");
    c
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

#[test]
fn an_unsloth_run_gets_a_single_gpu_launch() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("set");
    grpofit()
        .args(["estimate", "--preset", "24gb", "--export-dir"])
        .arg(&out)
        .assert()
        .code(0);
    assert_eq!(names(&out), ["launch.sh", "run.toml", "train_unsloth.py"]);
    let sh = std::fs::read_to_string(out.join("launch.sh")).unwrap();
    assert!(sh.contains("\npython train_unsloth.py run.toml\n"), "{sh}");
}

#[test]
fn an_unsloth_run_on_two_gpus_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("gpus = 1", "gpus = 2");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, text).unwrap();
    let out = dir.path().join("set");
    let r = grpofit()
        .args(["estimate", "--config"])
        .arg(&run)
        .arg("--export-dir")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("Unsloth run on 2 GPUs"), "{err}");
    assert!(!out.exists() || names(&out).is_empty());
}

/// `trl` and `accelerate` stand-ins: each appends its arguments (and the server address the
/// trainers get) to `log`; the main node's trainer waits (5 s at most) for the server's line,
/// as the real one waits for the server, so that launch.sh's exit does not stop it unlogged.
fn stand_ins(bin: &Path, log: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    let wait = format!(
        "case \"$*\" in *\"--machine_rank 0\"*) for i in $(seq 50); do grep -q '^trl' {} && break; sleep 0.1; done;; esac",
        log.display()
    );
    for (name, tail) in [("trl", "exec sleep 30"), ("accelerate", wait.as_str())] {
        let path = bin.join(name);
        let script = format!(
            "#!/bin/sh\necho \"{name} $* host=${{GRPOFIT_VLLM_SERVER_HOST:-}}\" >> {}\n{tail}\n",
            log.display()
        );
        std::fs::write(&path, script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

/// Runs `set/launch.sh` as node `rank`: its exit code and what the stand-ins recorded.
fn run_node(set: &Path, bin: &Path, log: &Path, rank: &str) -> (i32, String) {
    let _ = std::fs::remove_file(log);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let status = std::process::Command::new("bash")
        .arg(set.join("launch.sh"))
        .env("PATH", path)
        .env("MACHINE_RANK", rank)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    (
        status.code().unwrap(),
        std::fs::read_to_string(log).unwrap_or_default(),
    )
}

#[cfg(unix)]
#[test]
fn a_two_node_launch_set_runs_one_server_and_two_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(OPEN_R1)
        .unwrap()
        .replace("nodes = 1\n", "nodes = 2\n");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, text).unwrap();
    let (bin, log) = (dir.path().join("bin"), dir.path().join("calls.log"));
    stand_ins(&bin, &log);

    // without the main node's address: a placeholder, and the script runs nothing
    let set = dir.path().join("placeholder");
    grpofit()
        .args(["estimate", "--config"])
        .arg(&run)
        .arg("--export-dir")
        .arg(&set)
        .assert()
        .code(0);
    let (code, calls) = run_node(&set, &bin, &log, "0");
    assert_eq!((code, calls.as_str()), (1, ""));

    let set = dir.path().join("set");
    grpofit()
        .args(["estimate", "--config"])
        .arg(&run)
        .args(["--main-process-ip", "10.1.2.3", "--export-dir"])
        .arg(&set)
        .assert()
        .code(0);
    let yaml = std::fs::read_to_string(set.join("accelerate.yaml")).unwrap();
    assert!(
        yaml.contains("main_process_ip: 10.1.2.3\nmain_process_port: 29500\n"),
        "{yaml}"
    );
    let (code0, node0) = run_node(&set, &bin, &log, "0");
    let (code1, node1) = run_node(&set, &bin, &log, "1");
    assert_eq!((code0, code1), (0, 0), "{node0}\n{node1}");
    let rank = |calls: &str| {
        calls
            .lines()
            .filter(|l| l.starts_with("accelerate launch"))
            .map(|l| {
                l.split("--machine_rank ")
                    .nth(1)
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (rank(&node0), rank(&node1)),
        (vec!["0".to_string()], vec!["1".to_string()])
    );
    let servers = |calls: &str| {
        calls
            .lines()
            .filter(|l| l.starts_with("trl vllm-serve"))
            .count()
    };
    assert_eq!(servers(&node0) + servers(&node1), 1, "{node0}\n{node1}");
    // every node's trainers reach the server on the main node
    assert!(node1.contains("host=10.1.2.3"), "{node1}");

    // and grpofit reads the written accelerate.yaml back as the same spread
    let out = grpofit()
        .args(["estimate", "--config"])
        .arg(&run)
        .arg("--launch")
        .arg(set.join("accelerate.yaml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("7 GPUs x 2 nodes"), "{text}");
}
