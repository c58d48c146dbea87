//! The launch set of a multi-GPU run: `accelerate.yaml` for `accelerate launch --config_file`,
//! `ds_config.json` when DeepSpeed shards the model, and `launch.sh`, which starts
//! `trl vllm-serve` on the server GPUs and the training processes on the others.

use crate::contract::trl_serve_ladder::has_serve;
use crate::run::spread::Engine;
use crate::run::{Generation, RunConfig, Stack};
use std::fmt::Write as _;

/// The files of the launch set beside the run file, by name, with their text; `train` is what
/// `accelerate launch --config_file accelerate.yaml` runs (`Train`).
pub fn launch_files(run: &RunConfig, train: &Train) -> Vec<(&'static str, String)> {
    let mut files = vec![("accelerate.yaml", accelerate_yaml(run))];
    if run.spread.engine == Engine::DeepSpeed {
        files.push(("ds_config.json", ds_config_json(run)));
    }
    files.push(("launch.sh", launch_sh(run, train)));
    files
}

/// What the training processes run, after `accelerate launch --config_file accelerate.yaml`:
/// the script and its arguments (`train_trl.py run.toml`, `-m trl.scripts.grpo --config
/// tuned.yaml`), and the comment lines launch.sh says it with (each begins with `#`; an
/// `echo` line says it again when the script runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Train {
    pub args: String,
    pub header: Vec<String>,
}

impl Train {
    /// The stand-in script the launch set writes beside a run file (`train_trl.py`).
    pub fn stand_in(script: &str, run_file: &str) -> Train {
        Train {
            args: format!("{script} {run_file}"),
            header: vec![
                format!(
                    "# STAND-IN TASK: {script} trains on a placeholder prompt (\"Count from one to ten.\") with a length reward, not your dataset or rewards"
                ),
                format!(
                    "# put yours in {script}, or export from your TRL recipe (--config recipe.yaml --export-dir DIR) to launch it"
                ),
            ],
        }
    }

    /// The lines launch.sh starts its training part with.
    pub(super) fn lines(&self, sh: &mut String) {
        for line in &self.header {
            let _ = writeln!(sh, "{line}");
        }
        if self.header.iter().any(|l| l.starts_with("# STAND-IN")) {
            let _ = writeln!(
                sh,
                "echo \"launch.sh: a STAND-IN task (placeholder prompt, length reward): not your dataset\""
            );
        }
    }
}

/// accelerate's config file (accelerate 1.12 `commands/config/config_args.py` ClusterConfig):
/// `distributed_type` MULTI_GPU / DEEPSPEED / FSDP, the process and machine counts, and the
/// engine's own section. Mixed precision is left to the trainer's `bf16` (GRPOConfig), which
/// DeepSpeed's "auto" values take up.
pub fn accelerate_yaml(run: &RunConfig) -> String {
    let s = &run.spread;
    let mut y =
        String::from("# accelerate launch --config_file accelerate.yaml (written by grpofit)\n");
    let _ = writeln!(y, "compute_environment: LOCAL_MACHINE");
    let kind = match (s.engine, run.processes()) {
        (Engine::DeepSpeed, _) => "DEEPSPEED",
        (Engine::Fsdp, _) => "FSDP",
        (Engine::Ddp, 1) => "NO",
        (Engine::Ddp, _) => "MULTI_GPU",
    };
    let _ = writeln!(y, "distributed_type: {kind}");
    match s.engine {
        Engine::DeepSpeed => {
            let _ = writeln!(y, "deepspeed_config:");
            let _ = writeln!(y, "  deepspeed_config_file: ds_config.json");
            let _ = writeln!(y, "  zero3_init_flag: {}", s.zero_stage == 3);
            if s.nodes > 1 {
                let _ = writeln!(y, "  deepspeed_multinode_launcher: standard");
            }
        }
        Engine::Fsdp => {
            // accelerate's FSDP2 options (utils/dataclasses.py FullyShardedDataParallelPlugin)
            let _ = writeln!(y, "fsdp_config:");
            let _ = writeln!(y, "  fsdp_version: 2");
            let _ = writeln!(y, "  fsdp_reshard_after_forward: {}", s.zero_stage >= 3);
            let _ = writeln!(
                y,
                "  fsdp_offload_params: {}",
                s.offload_param || s.offload_optimizer
            );
            let _ = writeln!(y, "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP");
            let _ = writeln!(y, "  fsdp_state_dict_type: SHARDED_STATE_DICT");
            let _ = writeln!(y, "  fsdp_cpu_ram_efficient_loading: true");
            let _ = writeln!(y, "mixed_precision: bf16");
        }
        Engine::Ddp => {
            let _ = writeln!(y, "mixed_precision: bf16");
        }
    }
    let _ = writeln!(y, "machine_rank: 0");
    let _ = writeln!(y, "num_machines: {}", s.nodes.max(1));
    let _ = writeln!(y, "num_processes: {}", run.processes());
    let _ = writeln!(y, "rdzv_backend: static");
    let _ = writeln!(y, "same_network: true");
    let _ = writeln!(y, "use_cpu: false");
    y
}

/// DeepSpeed's JSON (deepspeed 0.18 `runtime/zero/config.py` DeepSpeedZeroConfig,
/// `offload_config.py`): the stage and offload devices; batch sizes, gradient accumulation,
/// clipping and bf16 as "auto", which transformers' `HfTrainerDeepSpeedConfig` fills from
/// GRPOConfig so that the two never disagree.
pub fn ds_config_json(run: &RunConfig) -> String {
    let s = &run.spread;
    let device = |on: bool| if on { "cpu" } else { "none" };
    let mut zero = serde_json::json!({
        "stage": s.zero_stage,
        "overlap_comm": true,
        "contiguous_gradients": true,
        "offload_optimizer": {"device": device(s.offload_optimizer), "pin_memory": true},
    });
    if s.zero_stage >= 3 {
        zero["offload_param"] =
            serde_json::json!({"device": device(s.offload_param), "pin_memory": true});
        zero["stage3_gather_16bit_weights_on_model_save"] = serde_json::json!(true);
    }
    let config = serde_json::json!({
        "train_micro_batch_size_per_gpu": "auto",
        "train_batch_size": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"},
        "zero_optimization": zero,
    });
    serde_json::to_string_pretty(&config).unwrap_or_default() + "\n"
}

/// Whether the trainer starts vLLM itself, on the GPU after the training processes'
/// (`[grpo] vllm_device`, `read_vllm_device`): TRL 0.14 and 0.15 have no `trl vllm-serve`
/// (`trl_serve_ladder`: it begins at 0.16), their `GRPOTrainer.__init__` builds
/// `LLM(device=vllm_device)` on the main process, so launch.sh starts no server and the training
/// processes see vLLM's GPU too.
pub fn trainer_starts_vllm(run: &RunConfig) -> bool {
    run.generation == Generation::VllmServer
        && run.stack == Stack::Trl
        && !has_serve(run.versions.trl)
}

/// The devices the training processes see: theirs, and vLLM's when the trainer starts it
/// ([`trainer_starts_vllm`]).
pub fn training_devices(run: &RunConfig) -> u64 {
    if trainer_starts_vllm(run) {
        run.gpus + run.vllm_server.gpus
    } else {
        run.gpus
    }
}

/// The shell script: on a node of `gpus` training GPUs plus the server's, `trl vllm-serve` on
/// the last `[vllm_server] gpus` devices, `accelerate launch` on the first ones.
pub fn launch_sh(run: &RunConfig, train: &Train) -> String {
    let gpus = run.gpus;
    let list = |from: u64, n: u64| {
        (from..from + n)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut sh = String::from(
        "#!/usr/bin/env bash\n# written by grpofit: the run's GPUs, split between vLLM and training\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n",
    );
    if trainer_starts_vllm(run) {
        let _ = writeln!(
            sh,
            "# vLLM on GPU {}: trl {} has no `trl vllm-serve`; its trainer starts vLLM there itself (vllm_device)",
            list(gpus, run.vllm_server.gpus),
            run.versions.trl
        );
    } else if run.generation == Generation::VllmServer {
        let v = &run.vllm_server;
        let _ = writeln!(
            sh,
            "# trl vllm-serve on GPUs {} ({} of them)",
            list(gpus, v.gpus),
            v.gpus
        );
        let (serve, left_out) = super::serve_command::vllm_serve_command(run, &list(gpus, v.gpus));
        for line in left_out {
            let _ = writeln!(sh, "{line}");
        }
        let _ = writeln!(sh, "echo \"launch.sh: {serve}\"\n{serve} &");
        let _ = writeln!(sh, "SERVER=$!\ntrap 'kill $SERVER' EXIT");
    }
    let _ = writeln!(
        sh,
        "# training on GPUs {} ({} processes per node)",
        list(0, gpus),
        gpus
    );
    train.lines(&mut sh);
    let train_cmd = format!(
        "CUDA_VISIBLE_DEVICES={} accelerate launch --config_file accelerate.yaml {}",
        list(0, training_devices(run)),
        train.args
    );
    let _ = writeln!(sh, "echo \"launch.sh: {train_cmd}\"\n{train_cmd}");
    sh
}
