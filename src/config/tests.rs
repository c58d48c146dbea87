//! The loader's behaviour: trainers' defaults, retired keys, and errors that point at the line.

use super::*;
use crate::model::run::{Checkpointing, Generation, Optimizer, Quant, Stack};

#[test]
fn where_generation_runs_is_read_and_written_back() {
    let file = |grpo: &str| {
        format!(
            "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\n{grpo}\n"
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
        let run = parse(&file(grpo), "t", None).unwrap().run;
        assert_eq!(run.generation, generation, "{grpo}");
        let ctx = export::ExportContext {
            gpu: "test",
            gpu_memory: None,
            model_config: None,
            lock_effective_batch: false,
            estimate: None,
        };
        let text = export::to_toml(&run, &ctx);
        assert!(text.contains(written), "{grpo}:\n{text}");
        assert_eq!(
            parse(&text, "back", None).unwrap().run.generation,
            generation
        );
    }
}

#[test]
fn missing_keys_take_each_trainers_defaults() {
    let trl = parse(
        "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nuse_vllm = true\n",
        "t",
        None,
    )
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
        "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nmax_prompt_length = 300\nuse_liger_loss = true\n",
        "old.toml",
        None,
    )
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
        "[vramfit]\nmax_prompt_length = 200\n[model]\nmodel_name = \"unsloth/Qwen2.5-1.5B-Instruct\"\n[grpo]\nmax_prompt_length = 300\n",
        "both.toml",
        None,
    )
    .unwrap_err();
    assert!(both.message.contains("disagree"), "{}", both.message);
}

#[test]
fn keys_outside_the_contract_are_refused_with_the_call_named() {
    let err = parse(
        "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[lora]\nuse_gradient_checkpointing = \"unsloth\"\n",
        "trl.toml",
        None,
    )
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
    )
    .unwrap_err();
    assert_eq!((err.file.as_str(), err.line), ("f.toml", Some(5)));
    assert!(err.to_string().contains("beta = -1"), "{err}");
    assert_eq!(locate("[a]\nx = 1\n[b]\nx = 2\n", "b", Some("x")), Some(4));
    assert_eq!(locate("[a]\nx = 1\n[b]\n", "b", None), Some(3));
}
