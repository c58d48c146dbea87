//! Nothing the user wrote is lost: a run file with keys grpofit does not model and comments,
//! written back after a change (the path `fit -o`, `estimate --export` and the screen's export
//! share), keeps every such key and comment byte for byte, and differs from its source only in
//! the tuned keys' lines and a header line.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::config::export::ExportContext;
use grpofit_core::config::write_back::text_for;
use grpofit_core::config::{RunFile, load};
use proptest::prelude::*;
use std::path::Path;

/// A TRL run on one card with every table, as a user might keep it.
const BASE: &str = r#"[grpofit]
stack = "trl"
gpu_memory = "80GiB"
max_prompt_length = 512

[model]
model_name_or_path = "Qwen/Qwen2.5-1.5B-Instruct"
dtype = "bfloat16"

[lora]
r = 16
lora_alpha = 32

[grpo]
per_device_train_batch_size = 8
gradient_accumulation_steps = 2
num_generations = 8
max_completion_length = 1024
use_vllm = true
vllm_mode = "colocate"
vllm_gpu_memory_utilization = 0.3
"#;

/// Keys of the trainer calls grpofit does not model, with a value each, by table.
const UNMODELLED: &[(&str, &str, &str)] = &[
    ("grpo", "learning_rate", "2e-05"),
    ("grpo", "max_steps", "500"),
    ("grpo", "output_dir", "\"data/out\""),
    ("grpo", "temperature", "0.9"),
    ("grpo", "seed", "42"),
    ("grpo", "report_to", "[\"wandb\"]"),
    ("grpo", "logging_steps", "1"),
    ("lora", "lora_dropout", "0.05"),
    ("lora", "bias", "\"none\""),
    ("model", "attn_implementation", "\"flash_attention_2\""),
    ("model", "model_revision", "\"main\""),
];

/// `BASE` with `keys` (indexes into UNMODELLED) added after their table's header, each with a
/// comment above it and a trailing comment when `trailing`.
fn with_keys(keys: &[(usize, bool)], comment: &str) -> String {
    let mut text = format!("# {comment}\n{BASE}");
    for (i, trailing) in keys {
        let (table, key, value) = UNMODELLED[*i];
        let header = format!("[{table}]\n");
        let tail = if *trailing {
            format!("  # {comment} {i}")
        } else {
            String::new()
        };
        let line = format!("{header}# about {key}: {comment}\n{key} = {value}{tail}\n");
        text = text.replacen(&header, &line, 1);
    }
    text
}

fn load_text(text: &str) -> (tempfile::TempDir, RunFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(&path, text).unwrap();
    let file = load(&path, &grpofit_core::resolve::Offline::from_env()).unwrap();
    (dir, file)
}

fn written(file: &RunFile, run: &grpofit_core::run::RunConfig) -> String {
    let ctx = ExportContext {
        gpu: "test GPU",
        gpu_memory: file.gpu_memory,
        model_config: None,
        lock_effective_batch: true,
        estimate: None,
        time: None,
    };
    let mut notes = Vec::new();
    text_for(
        Path::new("out.toml"),
        file.source.as_ref(),
        run,
        &ctx,
        &mut notes,
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn unmodelled_keys_and_comments_are_kept_byte_for_byte(
        keys in proptest::sample::subsequence((0..UNMODELLED.len()).collect::<Vec<_>>(), 1..UNMODELLED.len())
            .prop_flat_map(|ks| {
                let n = ks.len();
                (Just(ks), proptest::collection::vec(any::<bool>(), n))
            }),
        comment in "[a-zA-Z0-9 ,.:=#\\[\\]\"'-]{0,30}",
        // per-device batches that keep the generation batch divisible by num_generations = 8
        micro in prop_oneof![Just(4u64), Just(16), Just(32)],
        completion in prop_oneof![Just(256u64), Just(512), Just(2048)],
    ) {
        let (ks, trailing) = keys;
        let pairs: Vec<(usize, bool)> = ks.into_iter().zip(trailing).collect();
        let source = with_keys(&pairs, &comment);
        let (_dir, file) = load_text(&source);
        let mut run = file.run.clone();
        run.micro_batch = micro;
        run.completion_len = completion;
        let out = written(&file, &run);

        // every line that is not a tuned key's is kept as written, in order
        let tuned = ["per_device_train_batch_size", "max_completion_length"];
        let (header, body) = out.split_once('\n').unwrap();
        prop_assert!(header.starts_with("# tuned by grpofit on "));
        let a: Vec<&str> = source.lines().collect();
        let b: Vec<&str> = body.lines().collect();
        prop_assert_eq!(a.len(), b.len(), "{}", out);
        for (x, y) in a.iter().zip(&b) {
            if x != y {
                let key = x.split('=').next().unwrap().trim();
                prop_assert!(tuned.contains(&key), "line changed: {:?} -> {:?}", x, y);
            }
        }
        // and it reads back as the tuned run
        let (_d, back) = load_text(&out);
        prop_assert_eq!(back.run.micro_batch, micro);
        prop_assert_eq!(back.run.completion_len, completion);
        prop_assert_eq!(back.run.lora_rank, file.run.lora_rank);
    }
}

#[test]
fn an_unchanged_run_gets_only_the_header() {
    let source = with_keys(&[(0, true), (7, false)], "mine");
    let (_dir, file) = load_text(&source);
    let out = written(&file, &file.run);
    let (header, body) = out.split_once('\n').unwrap();
    assert!(header.ends_with("nothing changed"), "{header}");
    assert_eq!(body, source);
    // a second write replaces its own header, not the user's first comment
    let (_d, again) = load_text(&out);
    let twice = written(&again, &again.run);
    assert_eq!(twice, out);
}

#[test]
fn a_key_the_file_did_not_write_goes_at_the_end_of_its_table() {
    let (_dir, file) = load_text(BASE);
    let mut run = file.run.clone();
    run.lora_rank = 64;
    run.max_seq_len = 2048;
    let out = written(&file, &run);
    assert!(out.contains("[lora]\nr = 64\nlora_alpha = 32\n"), "{out}");
    assert!(
        out.contains("vllm_gpu_memory_utilization = 0.3\nvllm_max_model_length = 2048\n"),
        "{out}"
    );
}

#[test]
fn a_retired_key_is_edited_where_the_user_wrote_it() {
    let text = BASE.replace("max_prompt_length = 512\n", "").replace(
        "max_completion_length = 1024\n",
        "max_completion_length = 1024\nmax_prompt_length = 512  # TRL 0.x\n",
    );
    let (_dir, file) = load_text(&text);
    let mut run = file.run.clone();
    run.prompt_len = 256;
    let out = written(&file, &run);
    assert!(
        out.contains("max_prompt_length = 256  # TRL 0.x\n"),
        "{out}"
    );
    assert!(
        !out.contains("[grpofit]\nstack = \"trl\"\ngpu_memory = \"80GiB\"\nmax_prompt_length"),
        "{out}"
    );
}

/// The screen's export (`s`) starts from the file the screen opened: only the tuned key and
/// the header differ.
#[test]
fn the_screens_export_edits_the_users_file() {
    use grpofit::tui::app::{App, GpuState, Msg};
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let source = with_keys(&[(0, true), (2, false), (7, true), (9, false)], "mine");
    let (dir, file) = load_text(&source);
    let gpu = GpuState {
        capacity: 80 << 30,
        capacity_from_user: true,
        name: "Test GPU".into(),
        live: None,
        unavailable: None,
    };
    let mut a = App::new(
        file,
        gpu,
        grpofit::tui::theme::Theme::mono(),
        dir.path().into(),
    );
    let before = a.run().clone();
    for c in ['l', 's'] {
        let key = Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        grpofit::tui::runner::Runner::new().dispatch(&mut a, key);
    }
    assert_ne!(*a.run(), before, "the knob moved");
    let out =
        std::fs::read_to_string(dir.path().join("grpofit-qwen2.5-1.5b-instruct.toml")).unwrap();
    let (header, body) = out.split_once('\n').unwrap();
    assert!(header.starts_with("# tuned by grpofit on "), "{header}");
    let changed: Vec<(&str, &str)> = source
        .lines()
        .zip(body.lines())
        .filter(|(x, y)| x != y)
        .collect();
    assert_eq!(source.lines().count(), body.lines().count(), "{out}");
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(
        changed[0].0.starts_with("vllm_gpu_memory_utilization = "),
        "{changed:?}"
    );
}

/// Server mode: the sequence knob is `trl vllm-serve`'s `max_model_len`, and the write puts it
/// in `[vllm_server]`, not in the colocate key `vllm_max_model_length`.
#[test]
fn in_server_mode_the_sequence_goes_to_the_servers_max_model_len() {
    use grpofit_core::run::knobs::Knob;
    let text = BASE.replace(
        "vllm_mode = \"colocate\"\nvllm_gpu_memory_utilization = 0.3\n",
        "vllm_mode = \"server\"\n",
    ) + "\n[vllm_server]\ngpus = 1  # the eighth GPU\n";
    let (_dir, file) = load_text(&text);
    let mut run = file.run.clone();
    Knob::SequenceLength.set(&mut run, 4096);
    let out = written(&file, &run);
    assert!(
        out.ends_with("[vllm_server]\ngpus = 1  # the eighth GPU\nmax_model_len = 4096\n"),
        "{out}"
    );
    assert!(!out.contains("vllm_max_model_length"), "{out}");
    let (_d, back) = load_text(&out);
    assert_eq!(back.run.vllm_server.max_model_len, Some(4096));
}

/// `fit -o` on a file that states its capacity writes the `--gpu-mem` given in the user's own
/// words (`23.64GiB`), not as bytes (`25383256719B`), and reads back to the same capacity.
#[test]
fn a_capacity_given_as_a_decimal_is_written_back_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.toml");
    std::fs::write(&file, BASE).unwrap();
    let out = assert_cmd::Command::cargo_bin("grpofit")
        .unwrap()
        .args([
            "fit",
            "--no-gpu",
            "--offline",
            "--gpu-mem",
            "23.64GiB",
            "--config",
        ])
        .arg(&file)
        .arg("-o")
        .arg(&file)
        .arg("--force")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\ngpu_memory = \"23.64GiB\"\n"), "{text}");
}
