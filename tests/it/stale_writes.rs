//! No stale writes, and line ends kept: the screen's export and `fit -o` start from the text
//! they read; a file saved again since is never silently overwritten (the export is refused,
//! or the tuned keys are merged into the new text), and a CRLF run file stays CRLF.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit::tui::app::{App, GpuState, Mode, Msg};
use grpofit::tui::runner::Runner;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::Path;
use std::process::Command;

fn grpofit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_grpofit"))
}

fn screen_on(path: &Path, dir: &Path) -> App {
    let file =
        grpofit_core::config::load(path, &grpofit_core::resolve::Offline::from_env()).unwrap();
    let gpu = GpuState {
        capacity: 80 << 30,
        capacity_from_user: true,
        name: "Test GPU".into(),
        live: None,
        unavailable: None,
    };
    App::new(
        file,
        gpu,
        grpofit::tui::theme::Theme::mono(),
        dir.to_path_buf(),
    )
}

fn key(a: &mut App, c: char) {
    let key = Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    Runner::new().dispatch(a, key);
}

const RUN: &str = "[grpofit]\nstack = \"trl\"\ngpu_memory = \"80GiB\"\nmax_prompt_length = 512\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1024\nuse_vllm = true\nvllm_mode = \"colocate\"\nvllm_gpu_memory_utilization = 0.3\n";

/// The stale write-back: the user saves the file in an editor while the screen is
/// open; `s` then refuses to write from the old text, and `m` merges the tuned key into the
/// new text, keeping the edit.
#[test]
fn an_outside_edit_between_load_and_export_is_kept_or_the_export_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grpofit-qwen2.5-1.5b-instruct.toml");
    std::fs::write(&path, RUN).unwrap();
    for answer in ['n', 'm', 'r'] {
        std::fs::write(&path, RUN).unwrap();
        let mut a = screen_on(&path, dir.path());
        key(&mut a, 'l');
        // saved in an editor after the screen read the file
        let edited = RUN.replace(
            "num_generations = 8\n",
            "num_generations = 8\nlearning_rate = 3e-6  # saved in an editor\n",
        );
        std::fs::write(&path, &edited).unwrap();
        key(&mut a, 's');
        assert!(
            matches!(a.mode(), Mode::SourceChanged { .. }),
            "{:?}",
            a.mode()
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            edited,
            "nothing written"
        );
        key(&mut a, answer);
        if answer == 'n' {
            assert!(a.message().unwrap().contains("changed on disk"));
            assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
            continue;
        }
        if answer == 'r' {
            assert!(
                a.message().unwrap().contains("reloaded"),
                "{:?}",
                a.message()
            );
            key(&mut a, 's');
        }
        if matches!(a.mode(), Mode::ConfirmOverwrite { .. }) {
            key(&mut a, 'y');
        }
        let out = std::fs::read_to_string(&path).unwrap();
        assert!(
            out.contains("learning_rate = 3e-6  # saved in an editor\n"),
            "{out}"
        );
        assert!(out.starts_with("# tuned by grpofit on "), "{out}");
        // merged: the tuned key is written into the new text; reloaded: the screen's change
        // was dropped with the old text
        assert_eq!(out.contains("= 0.3\n"), answer == 'r', "{out}");
    }
}

/// `fit -o` checks the file it read just before writing: `unchanged` is what it calls.
#[test]
fn a_source_edited_after_the_read_is_seen_as_changed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(&path, RUN).unwrap();
    let file =
        grpofit_core::config::load(&path, &grpofit_core::resolve::Offline::from_env()).unwrap();
    let source = file.source.as_ref().unwrap();
    assert!(source.unchanged().is_ok());
    std::fs::write(&path, RUN.replace("= 8\n", "= 16\n")).unwrap();
    let changed = source.unchanged().unwrap_err();
    assert!(changed.what.contains("edited"), "{}", changed.what);
    assert!(changed.now.unwrap().text.contains("= 16\n"));
    // replaced by another file with the same bytes: another inode
    let other = dir.path().join("other.toml");
    std::fs::write(&other, RUN).unwrap();
    std::fs::rename(&other, &path).unwrap();
    let err = grpofit_core::config::write_back::check_unchanged(Some(source)).unwrap_err();
    assert!(err.to_string().contains("changed on disk"), "{err}");
}

/// A CRLF run file keeps CRLF through `fit -o same.toml --force` (toml_edit writes LF), and a
/// byte order mark stays (toml_edit drops it).
#[test]
fn a_crlf_run_file_keeps_crlf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    let crlf = "\u{feff}".to_string()
        + &RUN
            .replace("80GiB", "24GiB")
            .replace("= 8\nnum", "= 16\nnum")
            .replace('\n', "\r\n");
    std::fs::write(&path, &crlf).unwrap();
    let r = grpofit()
        .args(["fit", "--config"])
        .arg(&path)
        .args(["--gpu-mem", "24GiB", "-o"])
        .arg(&path)
        .arg("--force")
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let out = std::fs::read_to_string(&path).unwrap();
    assert_ne!(out, crlf);
    assert_eq!(
        out.matches('\n').count(),
        out.matches("\r\n").count(),
        "{out:?}"
    );
    assert!(out.starts_with("\u{feff}# tuned by grpofit on ") && out.contains("\r\n[model]\r\n"));
}

/// The done-when from the binary: `fit -o same.yaml --force` on a file edited after the read
/// is refused. The edit lands deterministically between the read and the write: the recipe
/// names a model only a slow Hub stand-in knows, and the file is saved again while `fit` waits
/// for it (the run file is read before its model is looked up).
#[test]
fn fit_o_same_file_edited_after_the_read_is_refused() {
    use crate::common::hub_repos::{TINY, TINY_CONFIG, sharded, tiny_tensors};
    use crate::common::hub_server::HubServer;
    use std::time::{Duration, Instant};
    let mut repo = sharded(TINY_CONFIG, tiny_tensors());
    repo.trickle = Some(Duration::from_millis(700));
    let hub = HubServer::start([(TINY.to_string(), repo)].into());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("same.yaml");
    let recipe = format!(
        "model_name_or_path: {TINY}\nuse_vllm: true\nvllm_mode: colocate\nper_device_train_batch_size: 64\nnum_generations: 8\nmax_completion_length: 8192\n"
    );
    std::fs::write(&path, &recipe).unwrap();
    let child = grpofit()
        .env_remove("HF_TOKEN")
        .env_remove("HF_TOKEN_PATH")
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", dir.path().join("hf-home"))
        .env("HF_HUB_CACHE", dir.path().join("hub"))
        .env("HF_ENDPOINT", &hub.endpoint)
        .args(["--no-gpu", "fit", "--gpu-mem", "8GiB", "--config"])
        .arg(&path)
        .arg("-o")
        .arg(&path)
        .arg("--force")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while hub.requests().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no Hub request"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let edited = format!("{recipe}learning_rate: 3.0e-06  # saved in an editor meanwhile\n");
    std::fs::write(&path, &edited).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("changed on disk since grpofit read it"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
}
