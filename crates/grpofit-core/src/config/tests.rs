//! The loader's behaviour: trainers' defaults, retired keys, and errors that point at the line.

use super::*;
use crate::run::{Checkpointing, Generation, Optimizer, Quant, Stack};

#[test]
fn where_generation_runs_is_read_and_written_back() {
    let file = |grpo: &str| {
        format!(
            "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\n{grpo}\n"
        )
    };
    for (grpo, generation, written) in [
        (
            "use_vllm = true\nvllm_mode = \"server\"",
            Generation::VllmServer,
            "vllm_mode = \"server\"",
        ),
        (
            "use_vllm = false",
            Generation::Transformers,
            "use_vllm = false",
        ),
        (
            "use_vllm = true",
            Generation::ColocatedVllm { share: 0.3 },
            "vllm_mode = \"colocate\"",
        ),
    ] {
        let run = parse(&file(grpo), "t", None, &crate::resolve::Offline::from_env())
            .unwrap()
            .run;
        assert_eq!(run.generation, generation, "{grpo}");
        let ctx = export::ExportContext {
            gpu: "test",
            gpu_memory: None,
            model_config: None,
            lock_effective_batch: false,
            estimate: None,
            time: None,
        };
        let text = export::to_toml(&run, &ctx);
        assert!(text.contains(written), "{grpo}:\n{text}");
        assert_eq!(
            parse(&text, "back", None, &crate::resolve::Offline::from_env())
                .unwrap()
                .run
                .generation,
            generation
        );
    }
}

#[test]
fn missing_keys_take_each_trainers_defaults() {
    let trl = parse(
        "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nuse_vllm = true\n",
        "t",
        None, &crate::resolve::Offline::from_env())
    .unwrap();
    let run = &trl.run;
    // peft 0.21.2 LoraConfig; trl 1.15.0 GRPOConfig / _BaseConfig / ModelConfig
    assert_eq!((run.lora_rank, run.lora_alpha), (8, 8));
    assert_eq!(run.lora_targets, ["q_proj", "v_proj"]);
    assert_eq!(run.optimizer, Optimizer::AdamW);
    assert_eq!(run.checkpointing, Checkpointing::On);
    assert_eq!(run.quant, Quant::Fp32);
    assert_eq!(run.generation, Generation::ColocatedVllm { share: 0.3 });
    assert_eq!((run.micro_batch, run.num_generations), (8, 8));
    assert_eq!((run.prompt_len, run.completion_len), (512, 512));
    // vLLM's context: the model's max_position_embeddings when vllm_max_model_length is unset
    assert_eq!(run.max_seq_len, run.arch.max_position);
    assert!(run.fused_logits);
    assert_eq!(trl.notes.len(), 1, "{:?}", trl.notes);

    let unsloth = parse(
        "[model]\nmodel_name = \"unsloth/Qwen2.5-1.5B-Instruct\"\nfast_inference = true\n",
        "u",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap()
    .run;
    assert_eq!(unsloth.stack, Stack::Unsloth);
    assert_eq!(unsloth.quant, Quant::Nf4);
    assert_eq!(unsloth.checkpointing, Checkpointing::UnslothOffload);
    assert_eq!(unsloth.lora_rank, 16);
    assert_eq!(unsloth.lora_targets.len(), 7);
    assert_eq!(unsloth.generation, Generation::ColocatedVllm { share: 0.5 });
    assert_eq!(unsloth.max_lora_rank, Some(64));
    assert_eq!(unsloth.max_seq_len, 2048);
}

#[test]
fn retired_keys_load_from_their_old_place_with_a_note() {
    let old = parse(
        "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nmax_prompt_length = 300\nuse_liger_loss = true\n",
        "old.toml",
        None, &crate::resolve::Offline::from_env())
    .unwrap();
    assert_eq!(old.run.prompt_len, 300);
    assert_eq!(old.run.model_name, "Qwen/Qwen2.5-1.5B");
    assert!(
        old.notes.iter().any(|n| n.contains("max_prompt_length")),
        "{:?}",
        old.notes
    );
    assert!(
        old.notes.iter().any(|n| n.contains("use_liger_kernel")),
        "{:?}",
        old.notes
    );
    let both = parse(
        "[grpofit]\nmax_prompt_length = 200\n[model]\nmodel_name = \"unsloth/Qwen2.5-1.5B-Instruct\"\n[grpo]\nmax_prompt_length = 300\n",
        "both.toml",
        None, &crate::resolve::Offline::from_env())
    .unwrap_err();
    assert!(both.message.contains("disagree"), "{}", both.message);
}

#[test]
fn keys_outside_the_contract_are_refused_with_the_call_named() {
    let err = parse(
        "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[lora]\nuse_gradient_checkpointing = \"unsloth\"\n",
        "trl.toml",
        None, &crate::resolve::Offline::from_env())
    .unwrap_err();
    assert!(err.message.contains("peft.LoraConfig"), "{}", err.message);
    assert_eq!((err.file.as_str(), err.line), ("trl.toml", Some(6)));
}

#[test]
fn errors_point_at_the_line() {
    let err = parse(
        "[model]\nmodel_name = \"x/Qwen2.5-1.5B\"\n\n[grpo]\nbeta = -1\n",
        "f.toml",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap_err();
    assert_eq!((err.file.as_str(), err.line), ("f.toml", Some(5)));
    assert!(err.to_string().contains("beta = -1"), "{err}");
    assert_eq!(locate("[a]\nx = 1\n[b]\nx = 2\n", "b", Some("x")), Some(4));
    assert_eq!(locate("[a]\nx = 1\n[b]\n", "b", None), Some(3));
}

/// The 24 GB preset with `old` replaced by `new` (which must be there).
fn preset_with(old: &str, new: &str) -> String {
    let text = crate::presets::tests::RUN_24GB;
    assert!(text.contains(old), "{old}");
    text.replacen(old, new, 1)
}

/// The 1-based line of `text` that starts with `start`.
fn line_starting(text: &str, start: &str) -> usize {
    1 + text.lines().position(|l| l.starts_with(start)).unwrap()
}

/// An error's table, key, value and line.
type Place = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<usize>,
);

/// Where loading `text` is refused.
fn refused(text: &str) -> Place {
    let e = parse(text, "run.toml", None, &crate::resolve::Offline::from_env()).unwrap_err();
    assert_eq!(e.file, "run.toml");
    let text = |s: Option<Box<str>>| s.map(String::from);
    (text(e.table), text(e.key), text(e.value), e.line)
}

fn some(s: &str) -> Option<String> {
    Some(s.to_string())
}

#[test]
fn a_bad_value_in_each_table_names_its_table_key_value_and_line() {
    let cases = [
        ("gpus = 1", "gpus = 0", "grpofit", "gpus", Some("0")),
        (
            "gpu_memory = \"25377898496B\"",
            "gpu_memory = 24",
            "grpofit",
            "gpu_memory",
            Some("24"),
        ),
        (
            "model_name = \"unsloth/Qwen2.5-3B-Instruct\"",
            "model_name = \"acme/nothing\"",
            "model",
            "model_name",
            Some("\"acme/nothing\""),
        ),
        (
            "load_in_4bit = false",
            "load_in_4bit = \"no\"",
            "model",
            "load_in_4bit",
            Some("\"no\""),
        ),
        ("r = 32", "r = \"x\"", "lora", "r", Some("\"x\"")),
        (
            "use_gradient_checkpointing = \"unsloth\"",
            "use_gradient_checkpointing = 2",
            "lora",
            "use_gradient_checkpointing",
            Some("2"),
        ),
        (
            "per_device_train_batch_size = 4",
            "per_device_train_batch_size = 0",
            "grpo",
            "per_device_train_batch_size",
            Some("0"),
        ),
        (
            "optim = \"adamw_8bit\"",
            "optim = \"adamw_9bit\"",
            "grpo",
            "optim",
            Some("\"adamw_9bit\""),
        ),
        (
            "vllm_mode = \"colocate\"",
            "vllm_mode = \"remote\"",
            "grpo",
            "vllm_mode",
            Some("\"remote\""),
        ),
    ];
    for (old, new, table, key, value) in cases {
        let text = preset_with(old, new);
        assert_eq!(
            refused(&text),
            (
                some(table),
                some(key),
                value.map(str::to_string),
                Some(line_starting(&text, new))
            ),
            "{new}"
        );
    }
}

#[test]
fn the_message_reads_as_before_and_holds_only_what_is_wrong() {
    let text = preset_with(
        "per_device_train_batch_size = 4",
        "per_device_train_batch_size = 0",
    );
    let e = parse(
        &text,
        "run.toml",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap_err();
    let line = line_starting(&text, "per_device_train_batch_size");
    assert_eq!(e.wording, Wording::AfterKey);
    assert!(
        e.message.starts_with("out of range, expected 1 to "),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "run.toml:{line}: `[grpo] per_device_train_batch_size = 0`: {}",
            e.message
        )
    );
}

#[test]
fn an_unknown_key_names_its_table_and_line() {
    let text = preset_with("load_in_4bit = false", "load_in_3bit = false");
    let e = parse(
        &text,
        "run.toml",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap_err();
    assert_eq!(
        (e.table.as_deref(), e.key.as_deref(), e.value.as_deref()),
        (Some("model"), Some("load_in_3bit"), None)
    );
    assert_eq!(e.line, Some(line_starting(&text, "load_in_3bit")));
    assert!(
        e.message.starts_with("unknown key `[model] load_in_3bit`"),
        "{e}"
    );
    let text = preset_with("[lora]", "[lorra]");
    assert_eq!(
        refused(&text),
        (
            some("lorra"),
            None,
            None,
            Some(line_starting(&text, "[lorra]"))
        )
    );
}

#[test]
fn malformed_toml_takes_the_line_from_the_parser() {
    let text = preset_with("beta = 0.0", "beta = ");
    let e = parse(
        &text,
        "run.toml",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(line_starting(&text, "beta = ")));
    assert_eq!(
        (e.table.as_deref(), e.key.as_deref(), e.value.as_deref()),
        (None, None, None)
    );
    assert!(e.message.starts_with("not valid TOML: "), "{}", e.message);
}

#[test]
fn lines_come_from_where_the_key_is_written() {
    // a dotted key, spaces, a quoted key: no text search needed
    let text = preset_with("beta = 0.0", "  \"beta\"   =   -3");
    assert_eq!(refused(&text).3, Some(line_starting(&text, "  \"beta\"")));
    let text = preset_with("bf16 = true", "bf16 = true\nbogus.x = 1");
    assert_eq!(refused(&text).3, Some(line_starting(&text, "bogus.x")));
    // a retired key's value is refused on the line it is written on, under its new name
    let text = "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nmax_prompt_length = 0\n";
    assert_eq!(
        refused(text),
        (
            some("grpofit"),
            some("max_prompt_length"),
            some("0"),
            Some(6)
        )
    );
    // a rule between knobs (rules::validate) is on the line of the knob it concerns
    let text = preset_with(
        "per_device_train_batch_size = 4",
        "per_device_train_batch_size = 1024",
    )
    .replace("max_seq_length = 1024", "max_seq_length = 262144")
    .replace(
        "max_completion_length = 768",
        "max_completion_length = 200000",
    );
    let (table, key, value, line) = refused(&text);
    assert_eq!(
        (table, key, value, line),
        (
            some("grpo"),
            some("per_device_train_batch_size"),
            some("1024"),
            Some(line_starting(&text, "per_device_train_batch_size"))
        )
    );
    // a file that cannot be read has no line
    let e = load(
        std::path::Path::new("/no/such/run.toml"),
        &crate::resolve::Offline::from_env(),
    )
    .unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("/no/such/run.toml", None));
}

#[test]
fn retired_keys_still_load_with_their_notes() {
    let text = "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nmax_prompt_length = 300\n";
    let file = parse(text, "old.toml", None, &crate::resolve::Offline::from_env()).unwrap();
    assert_eq!(file.notes.len(), 2, "{:?}", file.notes);
    assert!(file.notes[0].starts_with("`[model] model_name` is read but not exported"));
    assert!(file.notes[1].starts_with("`[grpo] max_prompt_length` is read but not exported"));
}

#[test]
fn full_fine_tuning_is_read_on_trl_and_refused_on_unsloth() {
    let unsloth = "[grpofit]\nstack = \"unsloth\"\n[model]\nmodel_name = \"unsloth/gemma-3-1b-it\"\nfull_finetuning = true\n";
    let err = parse(
        unsloth,
        "u.toml",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap_err();
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(5), Some("full_finetuning"))
    );
    assert!(
        err.to_string()
            .contains("Unsloth's full fine-tuning is not modelled"),
        "{err}"
    );
    // TRL: `use_peft = false` trains every weight; no adapter, no [lora]
    let trl = "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\nuse_peft = false\n";
    let full = parse(trl, "t.toml", None, &crate::resolve::Offline::from_env()).unwrap();
    assert!(full.run.full_finetuning);
    let with_lora = format!("{trl}[lora]\nr = 16\n");
    let err = parse(
        &with_lora,
        "t.toml",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap_err();
    assert_eq!(err.key.as_deref(), Some("use_peft"), "{err}");
    // saying LoRA outright, or nothing, loads as LoRA
    assert!(
        parse(
            &unsloth.replace("= true", "= false"),
            "u.toml",
            None,
            &crate::resolve::Offline::from_env()
        )
        .is_ok()
    );
    let lora = parse(
        &trl.replace("use_peft = false\n", ""),
        "t.toml",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap();
    assert!(!lora.run.full_finetuning);
}

/// `[lora] lora_dropout`: PEFT LoraConfig's and Unsloth get_peft_model's default 0.0 where the
/// run file leaves it out, the value where it says one, 0 under `[grpo] disable_dropout`
/// (GRPOTrainer's `disable_dropout_in_model`), and no p outside 0 to 1 (torch's `nn.Dropout`).
#[test]
fn the_adapter_dropout_is_read_with_each_call_s_default() {
    let read = |text: &str| parse(text, "t", None, &crate::resolve::Offline::from_env());
    let trl = |lora: &str, grpo: &str| {
        format!(
            "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[lora]\nr = 8\n{lora}\n[grpo]\n{grpo}\n"
        )
    };
    assert_eq!(read(&trl("", "")).unwrap().run.lora_dropout, 0.0);
    assert_eq!(
        read(&trl("lora_dropout = 0.05", ""))
            .unwrap()
            .run
            .lora_dropout,
        0.05
    );
    assert_eq!(
        read(&trl("lora_dropout = 0.1", "disable_dropout = true"))
            .unwrap()
            .run
            .lora_dropout,
        0.0
    );
    let err = read(&trl("lora_dropout = 1.5", "")).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("lora_dropout"), "{err}");
    assert!(err.to_string().contains("1.5"), "{err}");
    let unsloth = |lora: &str| {
        format!("[model]\nmodel_name = \"unsloth/Qwen2.5-1.5B-Instruct\"\n[lora]\nr = 16\n{lora}\n")
    };
    assert_eq!(read(&unsloth("")).unwrap().run.lora_dropout, 0.0);
    assert_eq!(
        read(&unsloth("lora_dropout = 0.1"))
            .unwrap()
            .run
            .lora_dropout,
        0.1
    );
    // the export writes it back, and the written file reads the same
    let run = read(&trl("lora_dropout = 0.1", "")).unwrap().run;
    let ctx = export::ExportContext {
        gpu: "test",
        gpu_memory: None,
        model_config: None,
        lock_effective_batch: false,
        estimate: None,
        time: None,
    };
    let text = export::to_toml(&run, &ctx);
    assert!(text.contains("lora_dropout = 0.1"), "{text}");
    assert_eq!(read(&text).unwrap().run.lora_dropout, 0.1);
}
