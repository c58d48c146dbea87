//! Exports against the release ladders (`crates/grpofit-core/src/contract/*_ladder.json`, read
//! from each release's wheel by tools/contract/ladder.py and stack_ladders.py): for every
//! preset on both stacks, pinned to every Unsloth release (unsloth stack), every TRL release
//! and every vLLM release of the ladders, the run file's `[model]` / `[lora]` hold only
//! keywords that Unsloth's `from_pretrained` / `get_peft_model` name, `[grpo]` only that TRL's
//! `GRPOConfig` keys, `[vllm_server]` and launch.sh's `trl vllm-serve` line only flags that
//! TRL's `vllm-serve` takes and that vLLM's `EngineArgs` has; as Python reads the files and the
//! ladders. The keys left out are named in the header.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::config::{self, export, launch};
use grpofit_core::contract::release::Release;
use grpofit_core::contract::{ladder, trl_serve_ladder, unsloth_ladder, vllm_ladder};
use grpofit_core::run::{Generation, Quant, RunConfig, Stack, VllmVersion};
use std::path::{Path, PathBuf};

const CHECK: &str = "import json,shlex,sys,tomllib\n\
    d=sys.argv[1]\n\
    L=lambda n: json.load(open(d+'/'+n))['releases']\n\
    U,T,S,V=L('unsloth_ladder.json'),L('trl_ladder.json'),L('trl_serve_ladder.json'),L('vllm_ladder.json')\n\
    n=0\n\
    for line in open(sys.argv[2]):\n\
    \x20   path,stack,trl,uns,vllm=line.split()\n\
    \x20   cfg=tomllib.load(open(path,'rb'))\n\
    \x20   def only(table,keys):\n\
    \x20       extra=set(cfg.get(table,{}))-set(keys)\n\
    \x20       assert not extra,(path,table,extra)\n\
    \x20   only('grpo',T[trl]['keys'])\n\
    \x20   if stack=='unsloth':\n\
    \x20       only('model',U[uns]['from_pretrained']['keys'])\n\
    \x20       only('lora',U[uns]['get_peft_model']['keys'])\n\
    \x20   serve=set(S[trl]['keys'] if S[trl] else [])&set(V[vllm]['keys'])\n\
    \x20   only('vllm_server',serve|{'gpus'})\n\
    \x20   for l in open(path[:-5]+'.sh'):\n\
    \x20       if 'trl vllm-serve' in l and not l.lstrip().startswith(('#','echo')):\n\
    \x20           flags={w[2:] for w in shlex.split(l) if w.startswith('--')}\n\
    \x20           assert not flags-serve-{'model'},(path,flags-serve)\n\
    \x20           n+=1\n\
    print('ok',n)";

fn contract_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates/grpofit-core/src/contract")
}

fn ctx() -> export::ExportContext<'static> {
    export::ExportContext {
        gpu: "test",
        gpu_memory: None,
        model_config: None,
        lock_effective_batch: true,
        estimate: None,
        time: None,
    }
}

/// Writes `run`'s run file and launch.sh under `dir`, and the line naming them and the rungs
/// the Python check reads; returns the run file's text.
fn write_export(dir: &Path, name: &str, run: &RunConfig, list: &mut String) -> String {
    let text = export::to_toml(run, &ctx());
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, &text).unwrap();
    std::fs::write(
        dir.join(format!("{name}.sh")),
        launch::launch_sh(run, &launch::Train::stand_in("train_trl.py", "run.toml")),
    )
    .unwrap();
    let vllm = Release::new(run.vllm_version.major, run.vllm_version.minor, 0);
    list.push_str(&format!(
        "{} {} {} {} {}\n",
        path.display(),
        run.stack,
        ladder::rung_of(run.versions.trl).unwrap(),
        unsloth_ladder::rung_of(run.versions.unsloth).unwrap(),
        vllm_ladder::rung_of(vllm).unwrap()
    ));
    text
}

/// The presets' runs on both stacks, and each also with the settings older releases lack:
/// 8-bit and fp8 weights (Unsloth's `load_in_8bit` / `load_in_fp8`), a vLLM server.
fn runs() -> Vec<(String, RunConfig)> {
    let mut out = Vec::new();
    for preset in grpofit::presets::names() {
        let text = grpofit::presets::built_in(preset).unwrap();
        let offline = grpofit_core::resolve::Offline::default();
        let base = config::parse(text, preset, None, &offline).unwrap().run;
        for stack in [Stack::Unsloth, Stack::Trl] {
            let mut run = base.clone();
            run.switch_stack(stack);
            out.push((format!("{preset}-{stack}"), run.clone()));
            for (what, quant) in [("int8", Quant::Int8), ("fp8", Quant::Fp8)] {
                let mut q = run.clone();
                q.quant = quant;
                out.push((format!("{preset}-{stack}-{what}"), q));
            }
            let mut served = run;
            served.generation = Generation::VllmServer;
            out.push((format!("{preset}-{stack}-server"), served));
        }
    }
    out
}

#[test]
fn every_export_on_every_release_of_the_ladders_passes_only_keywords_those_releases_take() {
    let dir = tempfile::tempdir().unwrap();
    let mut list = String::new();
    let mut headers = String::new();
    for (name, run) in runs() {
        // the Unsloth ladder, on the unsloth stack
        if run.stack == Stack::Unsloth {
            for unsloth in unsloth_ladder::releases() {
                let mut r = run.clone();
                r.versions.unsloth = unsloth;
                headers += &write_export(dir.path(), &format!("{name}-u{unsloth}"), &r, &mut list);
            }
        }
        // a server's run: each TRL release (GRPOConfig, trl vllm-serve) against each vLLM release
        let served = run.generation == Generation::VllmServer;
        for trl in trl_serve_ladder::releases().into_iter().filter(|_| served) {
            for vllm in vllm_ladder::releases() {
                let mut r = run.clone();
                r.versions.trl = trl;
                r.vllm_version = VllmVersion {
                    major: vllm.major,
                    minor: vllm.minor,
                };
                let file = format!("{name}-t{trl}-v{vllm}");
                headers += &write_export(dir.path(), &file, &r, &mut list);
            }
        }
    }
    let listing = dir.path().join("exports.txt");
    std::fs::write(&listing, &list).unwrap();
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(CHECK)
        .arg(contract_dir())
        .arg(&listing)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    // the launch scripts' server lines were read, not skipped
    assert!(said.starts_with("ok ") && said.trim() != "ok 0", "{said}");
    // the older releases lack keys today's export writes: the check above had something to
    // refuse, and the header said what was left out and why
    for expected in [
        "# not written: unsloth 2025.2.4's FastLanguageModel.from_pretrained takes no load_in_8bit",
        "# not written: unsloth 2025.8.9's FastLanguageModel.from_pretrained takes no load_in_fp8",
        "# not written: trl 0.16.1's `trl vllm-serve` takes no data_parallel_size",
        "# not written: trl 0.15.2 has no `trl vllm-serve`",
        "# not written: vllm 0.7's EngineArgs (what `trl vllm-serve` passes its flags to) takes no data_parallel_size",
    ] {
        assert!(headers.contains(expected), "no header says: {expected}");
    }
}

/// From the binary: a run file pinned to Unsloth 2025.2.4 that asks for 8-bit weights loads
/// with a note naming the keyword that release's `from_pretrained` lacks, and a write back
/// into the file keeps the user's key (a write never drops what the user wrote).
#[test]
fn a_model_key_the_pinned_unsloth_lacks_is_named_and_kept() {
    let preset = grpofit::presets::built_in("24gb").unwrap();
    let text = preset
        .replace(
            "max_prompt_length = 256\n",
            "max_prompt_length = 256\nunsloth_version = \"2025.2.4\"\n",
        )
        .replace(
            "load_in_4bit = false\n",
            "load_in_4bit = false\nload_in_8bit = true\n",
        );
    assert!(text.contains("unsloth_version") && text.contains("load_in_8bit"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.toml");
    std::fs::write(&path, &text).unwrap();
    let out_path = dir.path().join("out.toml");
    let out = assert_cmd::Command::cargo_bin("grpofit")
        .unwrap()
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .args(["--no-gpu", "estimate", "--offline", "--config"])
        .arg(&path)
        .arg("--export")
        .arg(&out_path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{err}");
    assert!(
        err.contains(
            "`[model] load_in_8bit`: unsloth 2025.2.4's FastLanguageModel.from_pretrained takes no load_in_8bit"
        ),
        "{err}"
    );
    let written = std::fs::read_to_string(&out_path).unwrap();
    assert!(written.contains("load_in_8bit = true"), "{written}");
}
