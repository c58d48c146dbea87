//! The user's files (issue 23, audit "atomic writes"): every output path is checked before any
//! work, a link planted under the temporary name is never followed, a link named as the output
//! keeps pointing at the file it names (which is replaced, its permissions kept), and the Hub
//! cache never keeps a config.json grpofit cannot read.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::collections::BTreeMap;

use crate::common::RUN;
use crate::common::hub_server::{HubServer, Repo, Served};
use crate::common::{Out, grpofit_in, run};

/// Refused with exit 2, `said` on standard error, and nothing computed on standard output.
fn refused_before_work(out: &Out, said: &str) {
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains(said), "{}", out.stderr);
    assert!(
        out.stdout.is_empty(),
        "work done before the refusal: {}",
        out.stdout
    );
}

#[test]
fn fit_output_is_checked_before_the_fit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("mine.toml"), "# mine\n").unwrap();
    let fit = |args: &[&str]| {
        run(grpofit_in(d)
            .args(["fit", "--preset", "24gb", "-o"])
            .args(args))
    };
    refused_before_work(&fit(&["mine.toml"]), "mine.toml exists");
    assert_eq!(
        std::fs::read_to_string(d.join("mine.toml")).unwrap(),
        "# mine\n"
    );
    // a folder: named as such, with or without --force
    std::fs::create_dir(d.join("out")).unwrap();
    refused_before_work(&fit(&["out"]), "out is a folder");
    refused_before_work(&fit(&["out", "--force"]), "out is a folder");
    // a folder that is not there
    refused_before_work(&fit(&["nowhere/run.toml"]), "does not exist");
}

#[test]
fn estimate_exports_are_checked_before_the_estimate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("run.toml"), "# mine\n").unwrap();
    let out = run(grpofit_in(d).args(["estimate", "--preset", "24gb", "--export", "run.toml"]));
    refused_before_work(&out, "run.toml exists");
    std::fs::write(d.join("a-file"), "x").unwrap();
    let out = run(grpofit_in(d).args(["estimate", "--preset", "24gb", "--export-dir", "a-file"]));
    refused_before_work(&out, "a-file exists and is not a folder");
    std::fs::create_dir(d.join("set")).unwrap();
    std::fs::write(d.join("set/launch.sh"), "# mine\n").unwrap();
    let out = run(grpofit_in(d).args(["estimate", "--preset", "24gb", "--export-dir", "set"]));
    refused_before_work(&out, "launch.sh: already exists");
}

#[test]
fn callback_output_that_is_a_folder_is_named_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cb")).unwrap();
    let out = run(grpofit_in(dir.path()).args(["callback", "-o", "cb", "--force"]));
    refused_before_work(&out, "cb is a folder");
}

#[test]
fn a_link_planted_under_the_old_temporary_name_is_not_followed() {
    // the old temporary name was `.NAME.<pid>.tmp`: guessable, and followed
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let planted = dir
        .path()
        .join(format!(".out.toml.{}.tmp", std::process::id()));
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let out = dir.path().join("out.toml");
    grpofit_core::config::export::write_atomically(&out, "written\n", false).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "written\n");
    // nothing left behind but the planted link
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert_eq!(names, [planted.file_name().unwrap().to_str().unwrap()]);
}

#[test]
fn a_linked_output_replaces_the_file_it_names_with_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("real")).unwrap();
    let target = d.join("real/run.toml");
    std::fs::write(&target, "# old\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink(&target, d.join("run.toml")).unwrap();
    // a link is an existing file: --force is needed
    let out = run(grpofit_in(d).args(["fit", "--preset", "24gb", "-o", "run.toml"]));
    refused_before_work(&out, "run.toml exists");
    let out = run(grpofit_in(d).args(["fit", "--preset", "24gb", "-o", "run.toml", "--force"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let link = std::fs::symlink_metadata(d.join("run.toml")).unwrap();
    assert!(link.file_type().is_symlink(), "the link was replaced");
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("[grpofit]"), "{text}");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    // a link to nothing is refused, not written through
    std::os::unix::fs::symlink(d.join("gone/x.toml"), d.join("dangling.toml")).unwrap();
    let out =
        run(grpofit_in(d).args(["fit", "--preset", "24gb", "-o", "dangling.toml", "--force"]));
    refused_before_work(&out, "symbolic link to nothing");
}

#[test]
fn an_unreadable_config_json_from_the_hub_is_not_cached() {
    // JSON, but no architecture grpofit can read (no hidden_size)
    let mut files = BTreeMap::new();
    files.insert(
        "config.json".to_string(),
        Served::whole(br#"{"model_type": "llama"}"#.to_vec()),
    );
    let repo = Repo {
        files,
        ..Repo::default()
    };
    let hub = HubServer::start([("test/broken".to_string(), repo)].into());
    let dir = tempfile::tempdir().unwrap();
    let run_file = dir.path().join("run.toml");
    std::fs::write(
        &run_file,
        RUN.replace("Qwen/Qwen3-4B-Instruct-2507", "test/broken"),
    )
    .unwrap();
    let mut cmd = Command::cargo_bin("grpofit").unwrap();
    cmd.env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", dir.path().join("hf-home"))
        .env("HF_HUB_CACHE", dir.path().join("hub"))
        .env("HF_ENDPOINT", &hub.endpoint)
        .args(["--no-gpu", "estimate", "--gpu-mem", "8GiB", "--config"])
        .arg(&run_file);
    let out = run(&mut cmd);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("not cached"), "{}", out.stderr);
    assert!(
        !dir.path().join("hub/models--test--broken").exists(),
        "the broken config.json was cached"
    );
}
