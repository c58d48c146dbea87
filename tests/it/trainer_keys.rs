//! Exports against the trainer contract (`crates/grpofit-core/src/contract/trainers.json`, read from the pinned
//! wheels): every trainer table of every preset's export, on both stacks, holds only keyword
//! arguments its call accepts, as Python's `tomllib` reads the file; and the example scripts
//! feed each table to the call the contract says.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use grpofit_core::config::{self, export};
use grpofit_core::contract::{Call, Table};
use grpofit_core::run::Stack;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The calls each stack's tables feed, as `table=call` pairs for the Python check.
fn calls(stack: Stack) -> String {
    [Table::Model, Table::Lora, Table::Grpo]
        .iter()
        .filter_map(|t| Some(format!("{}={}", t.name(), t.call(stack)?.name())))
        .collect::<Vec<_>>()
        .join(",")
}

/// Python reads the export with tomllib and the contract with json: each trainer table's keys
/// are parameters of its call (by name: the export uses no `**kwargs` pass-through).
fn check_with_python(path: &Path, stack: Stack) {
    let script = "import json,sys,tomllib\n\
        cfg=tomllib.load(open(sys.argv[1],'rb'))\n\
        contract=json.load(open(sys.argv[2]))['calls']\n\
        for pair in sys.argv[3].split(','):\n\
        \x20   table,call=pair.split('=')\n\
        \x20   extra=set(cfg[table])-set(contract[call]['params'])\n\
        \x20   assert not extra, (table, call, extra)\n\
        g=cfg['grpo']\n\
        assert isinstance(g['per_device_train_batch_size'],int) and isinstance(g['beta'],float)\n\
        print('ok')";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .arg(root().join("crates/grpofit-core/src/contract/trainers.json"))
        .arg(calls(stack))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path).unwrap()
    );
}

#[test]
fn every_preset_exports_only_keywords_its_calls_take_on_both_stacks() {
    let dir = tempfile::tempdir().unwrap();
    for preset in grpofit::presets::names() {
        let path = dir.path().join(format!("{preset}.toml"));
        Command::cargo_bin("grpofit")
            .unwrap()
            .args(["--no-gpu", "estimate", "--preset", preset, "--export"])
            .arg(&path)
            .assert()
            // a preset may not fit the tier's exact capacity once vLLM's rules apply: written anyway
            .code(predicates::ord::eq(0).or(predicates::ord::eq(3)));
        check_with_python(&path, Stack::Unsloth);
        // the same run on the TRL stack
        let mut run = config::load(&path, &grpofit_core::resolve::Offline::from_env())
            .unwrap()
            .run;
        run.switch_stack(Stack::Trl);
        let text = export::to_toml(
            &run,
            &export::ExportContext {
                gpu: "test",
                gpu_memory: None,
                model_config: None,
                lock_effective_batch: true,
                estimate: None,
                time: None,
            },
        );
        let trl = dir.path().join(format!("{preset}-trl.toml"));
        std::fs::write(&trl, &text).unwrap();
        check_with_python(&trl, Stack::Trl);
        assert_eq!(
            config::load(&trl, &grpofit_core::resolve::Offline::from_env())
                .unwrap()
                .run,
            run,
            "{text}"
        );
    }
}

/// Every export, pinned to every TRL release of the ladder (`contract/trl_ladder.json`, read
/// from each release's wheel by tools/contract/ladder.py), writes in `[grpo]` only keywords that
/// release's `GRPOConfig` takes, as Python reads the file and the ladder; the keys left out are
/// named in the header.
#[test]
fn every_export_on_every_trl_release_passes_only_keywords_that_release_takes() {
    use grpofit_core::contract::ladder;
    use grpofit_core::run::versions::Package;
    let dir = tempfile::tempdir().unwrap();
    let ladder_json = root().join("crates/grpofit-core/src/contract/trl_ladder.json");
    // one Python for every file: `path=release` pairs after the ladder
    let script = "import json,sys,tomllib\n\
        ladder=json.load(open(sys.argv[1]))['releases']\n\
        for pair in sys.argv[2:]:\n\
        \x20   path,release=pair.rsplit('=',1)\n\
        \x20   cfg=tomllib.load(open(path,'rb'))\n\
        \x20   extra=set(cfg['grpo'])-set(ladder[release]['keys'])\n\
        \x20   assert not extra, (path, release, extra)\n\
        print('ok')";
    let mut pairs = Vec::new();
    let ctx = export::ExportContext {
        gpu: "test",
        gpu_memory: None,
        model_config: None,
        lock_effective_batch: true,
        estimate: None,
        time: None,
    };
    let mut left_out_somewhere = false;
    for preset in grpofit::presets::names() {
        let text = grpofit::presets::built_in(preset).unwrap();
        let base = config::parse(
            text,
            preset,
            None,
            &grpofit_core::resolve::Offline::default(),
        )
        .unwrap()
        .run;
        for stack in [Stack::Unsloth, Stack::Trl] {
            let mut run = base.clone();
            run.switch_stack(stack);
            for release in ladder::releases() {
                run.versions.trl = release;
                let text = export::to_toml(&run, &ctx);
                left_out_somewhere |= text.contains("# not written: trl");
                let path = dir.path().join(format!("{preset}-{stack}-{release}.toml"));
                std::fs::write(&path, &text).unwrap();
                pairs.push(format!("{}={release}", path.display()));
            }
        }
    }
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&ladder_json)
        .args(&pairs)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
    // the older releases lack keys today's export writes (vllm_mode came later): the check
    // above had something to refuse, and the header said what was left out
    assert!(left_out_somewhere);
    assert!(ladder::releases().contains(&Package::Trl.targeted()));
}

#[test]
fn the_removed_keys_are_never_exported() {
    for preset in grpofit::presets::names() {
        let text = grpofit::presets::built_in(preset).unwrap();
        for gone in ["use_liger_loss", "torch_dtype"] {
            assert!(!text.contains(gone), "preset {preset} carries {gone}");
        }
        let grpo = text.split("[grpo]").nth(1).unwrap_or("");
        assert!(
            !grpo.contains("max_prompt_length"),
            "preset {preset}: max_prompt_length is no GRPOConfig key in TRL 1.x"
        );
    }
}

/// The example scripts call `f(**cfg["table"])` for exactly the calls the contract maps the
/// tables to (read with Python's `ast`, nothing imported).
#[test]
fn the_examples_feed_each_table_to_its_call() {
    for (script, stack) in [
        ("examples/train_unsloth.py", Stack::Unsloth),
        ("examples/train_trl.py", Stack::Trl),
    ] {
        let expected: Vec<String> = [Table::Model, Table::Lora, Table::Grpo]
            .iter()
            .map(|t| {
                let call = t.call(stack).unwrap().name();
                // the Python name the script calls: the call's last dotted part, and its owner
                let short = call.rsplit('.').take(2).collect::<Vec<_>>();
                let name = if call.starts_with("unsloth.") {
                    format!("{}.{}", short[1], short[0])
                } else {
                    short[0].to_string()
                };
                format!("{}={name}", t.name())
            })
            .collect();
        let finder = "import ast,sys\n\
            tree=ast.parse(open(sys.argv[1]).read())\n\
            for n in ast.walk(tree):\n\
            \x20   if isinstance(n,ast.Call):\n\
            \x20       for k in n.keywords:\n\
            \x20           v=k.value\n\
            \x20           if k.arg is None and isinstance(v,ast.Subscript) and ast.unparse(v.value)=='cfg':\n\
            \x20               print(ast.literal_eval(v.slice)+'='+ast.unparse(n.func))";
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(finder)
            .arg(root().join(script))
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut found: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        found.sort();
        let mut expected = expected;
        expected.sort();
        assert_eq!(found, expected, "{script}");
    }
    // the calls named are the contract's
    assert!(Call::UnslothFromPretrained.accepts("max_seq_length"));
    assert!(Call::TrlModelConfig.accepts("model_name_or_path"));
}

/// The TRL stand-in script loads the model with the attention the estimate assumed
/// (`run::attention`: `[grpo] model_init_kwargs`'s over `[model] attn_implementation`): it hands
/// `from_pretrained` a model object's `attn_implementation`, since TRL ignores (1.x) or refuses
/// (0.19) `model_init_kwargs` beside an object.
#[test]
fn the_trl_example_loads_the_attention_the_estimate_assumed() {
    let finder = "import ast,sys\n\
        tree=ast.parse(open(sys.argv[1]).read())\n\
        for n in ast.walk(tree):\n\
        \x20   if isinstance(n,ast.Call) and ast.unparse(n.func).endswith('from_pretrained'):\n\
        \x20       print(' '.join(k.arg for k in n.keywords if k.arg))\n\
        \x20   if isinstance(n,ast.Assign) and ast.unparse(n.targets[0])=='attn_implementation':\n\
        \x20       print('source', ast.unparse(n.value))";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(finder)
        .arg(root().join("examples/train_trl.py"))
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.split(' ').any(|k| k == "attn_implementation")),
        "{text}"
    );
    assert!(
        text.contains("source (args.model_init_kwargs or {}).get('attn_implementation', model_args.attn_implementation)"),
        "{text}"
    );
}
