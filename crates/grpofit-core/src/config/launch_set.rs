//! The launch set per stack and per node: an Unsloth run gets its single-GPU launch (or a
//! refusal that says why); a TRL run on one node the set of `launch.rs`; on several nodes one
//! `accelerate.yaml` whose `machine_rank` each node's `launch.sh` takes from `$MACHINE_RANK`,
//! the main node's address (or a placeholder the script refuses to run with), and the vLLM
//! server on the main node only.

use super::launch::{Train, accelerate_yaml, launch_files, trainer_starts_vllm, training_devices};
use crate::run::{Generation, RunConfig, Stack};
use std::fmt::Write as _;

/// Why a run gets no launch set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchSetError {
    /// `processes`: the GPUs over all the machines
    #[error(
        "no launch set for an Unsloth run on {processes} GPUs: grpofit launches Unsloth on one GPU (`[grpofit] gpus = 1`); for several GPUs use the trl stack (`[grpofit] stack = \"trl\"`)"
    )]
    UnslothOnSeveralGpus { processes: u64 },
    #[error(
        "no launch set for an Unsloth run with `vllm_mode = \"server\"`: Unsloth generates with vLLM in its own process (`[model] fast_inference = true`)"
    )]
    UnslothWithServer,
}

/// What the command line adds to the launch set.
#[derive(Debug, Clone, Copy, Default)]
pub struct LaunchOptions<'a> {
    /// the main node's address (`--main-process-ip`)
    pub main_process_ip: Option<&'a str>,
}

/// What `accelerate.yaml` holds in place of the main node's address until it is set; launch.sh
/// runs nothing while it is there.
pub const IP_PLACEHOLDER: &str = "SET-MAIN-PROCESS-IP";

/// accelerate's own default port (accelerate 1.12.0 `utils/launch.py`,
/// `prepare_multi_gpu_env`: `main_process_port` None is 29500).
const MAIN_PROCESS_PORT: u16 = 29500;

/// The launch files for `run` (beside the run file or recipe and the script `train` runs, which
/// the caller writes: [`training_script`], `export_set`), or why there is no launch for it.
pub fn launch_set(
    run: &RunConfig,
    train: &Train,
    opts: LaunchOptions,
) -> Result<Vec<(&'static str, String)>, LaunchSetError> {
    match run.stack {
        Stack::Unsloth => unsloth(run, train),
        Stack::Trl if run.spread.nodes > 1 => Ok(multi_node(run, train, opts)),
        Stack::Trl => Ok(launch_files(run, train)),
    }
}

/// The example script the launch set runs: `train_unsloth.py` or `train_trl.py`.
pub fn training_script(stack: Stack) -> &'static str {
    match stack {
        Stack::Unsloth => "train_unsloth.py",
        Stack::Trl => "train_trl.py",
    }
}

/// Unsloth: one process on one GPU (`python train_unsloth.py run.toml`, which sets `[env]`
/// itself before importing torch). Its GRPO generates with vLLM inside that process
/// (`fast_inference`), so neither several GPUs nor a `trl vllm-serve` server is launched for it.
fn unsloth(run: &RunConfig, train: &Train) -> Result<Vec<(&'static str, String)>, LaunchSetError> {
    if run.processes() > 1 {
        return Err(LaunchSetError::UnslothOnSeveralGpus {
            processes: run.processes(),
        });
    }
    if run.generation == Generation::VllmServer {
        return Err(LaunchSetError::UnslothWithServer);
    }
    let mut sh = String::from(
        "#!/usr/bin/env bash\n# written by grpofit: Unsloth on one GPU\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n",
    );
    train.lines(&mut sh);
    let args = &train.args;
    let _ = writeln!(
        sh,
        "echo \"launch.sh: python {args} (on GPU ${{CUDA_VISIBLE_DEVICES:-0}})\"\npython {args}"
    );
    Ok(vec![("launch.sh", sh)])
}

/// Several nodes: one accelerate.yaml for all (machine_rank from the launcher), one launch.sh.
fn multi_node(run: &RunConfig, train: &Train, opts: LaunchOptions) -> Vec<(&'static str, String)> {
    let ip = opts.main_process_ip.unwrap_or(IP_PLACEHOLDER);
    let yaml = accelerate_yaml(run).replacen(
        "machine_rank: 0\n",
        &format!(
            "machine_rank: 0  # each node's launch.sh passes --machine_rank $MACHINE_RANK\nmain_process_ip: {ip}\nmain_process_port: {MAIN_PROCESS_PORT}\n"
        ),
        1,
    );
    let mut files: Vec<(&'static str, String)> = launch_files(run, train)
        .into_iter()
        .filter(|(name, _)| *name == "ds_config.json")
        .collect();
    files.insert(0, ("accelerate.yaml", yaml));
    files.push(("launch.sh", multi_node_sh(run, train)));
    files
}

/// `0,1,...` for `n` devices from `from`.
fn devices(from: u64, n: u64) -> String {
    (from..from + n)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Each node's script: its rank from `$MACHINE_RANK`, nothing run while the address is a
/// placeholder, the vLLM server on the main node (rank 0) only, which every node's trainers
/// reach at the main node's address (`GRPOFIT_VLLM_SERVER_HOST`, read by train_trl.py).
fn multi_node_sh(run: &RunConfig, train: &Train) -> String {
    let nodes = run.spread.nodes;
    let train_gpus = devices(0, training_devices(run));
    let mut sh = format!(
        "#!/usr/bin/env bash\n# written by grpofit: {nodes} nodes of {} training GPUs; run it on every node with MACHINE_RANK set (0 on the main node; SLURM: MACHINE_RANK=$SLURM_NODEID)\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\nRANK=\"${{MACHINE_RANK:?set MACHINE_RANK to the rank of this node, 0 to {}}}\"\n",
        run.gpus,
        nodes - 1
    );
    let _ = writeln!(
        sh,
        "if grep -q '{IP_PLACEHOLDER}' accelerate.yaml; then\n  echo \"launch.sh: accelerate.yaml has no main_process_ip (write the main node's address there, or export again with --main-process-ip): nothing run\" >&2\n  exit 1\nfi\nMAIN_IP=\"$(sed -n 's/^main_process_ip: //p' accelerate.yaml)\""
    );
    if trainer_starts_vllm(run) {
        let _ = writeln!(
            sh,
            "# vLLM on the main node's GPU {}: trl {} has no `trl vllm-serve`; its trainer starts vLLM there itself (vllm_device)",
            devices(run.gpus, run.vllm_server.gpus),
            run.versions.trl
        );
    } else if run.generation == Generation::VllmServer {
        let (serve, left_out) =
            super::serve_command::vllm_serve_command(run, &devices(run.gpus, run.vllm_server.gpus));
        for line in left_out {
            let _ = writeln!(sh, "{line}");
        }
        let _ = writeln!(
            sh,
            "# the vLLM server: on the main node only, the trainers of every node use it\nexport GRPOFIT_VLLM_SERVER_HOST=\"$MAIN_IP\"\nif [ \"$RANK\" = 0 ]; then\n  echo \"launch.sh: node 0: {serve}\"\n  {serve} &\n  SERVER=$!\n  trap 'kill $SERVER' EXIT\nfi"
        );
    }
    train.lines(&mut sh);
    let train_cmd = format!(
        "CUDA_VISIBLE_DEVICES={train_gpus} accelerate launch --config_file accelerate.yaml --machine_rank \"$RANK\" {}",
        train.args
    );
    let _ = writeln!(
        sh,
        "echo \"launch.sh: node $RANK: {}\"\n{train_cmd}",
        train_cmd.replace('"', "\\\"")
    );
    sh
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::run::spread::Engine;

    fn two_nodes() -> RunConfig {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch;
        let mut run = RunConfig::example(arch);
        run.stack = Stack::Trl;
        run.gpus = 7;
        run.spread.nodes = 2;
        run.spread.engine = Engine::DeepSpeed;
        run.spread.zero_stage = 3;
        run.generation = Generation::VllmServer;
        run
    }

    fn stand_in() -> Train {
        Train::stand_in("train_unsloth.py", "run.toml")
    }

    #[test]
    fn an_unsloth_run_gets_one_gpu_or_a_reason() {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch;
        let mut run = RunConfig::example(arch);
        run.stack = Stack::Unsloth;
        run.generation = Generation::ColocatedVllm { share: 0.5 };
        let files = launch_set(&run, &stand_in(), LaunchOptions::default()).unwrap();
        assert_eq!(files.len(), 1);
        assert!(files[0].1.contains("\npython train_unsloth.py run.toml\n"));
        run.gpus = 2;
        let why = launch_set(&run, &stand_in(), LaunchOptions::default())
            .unwrap_err()
            .to_string();
        assert!(why.contains("on 2 GPUs"), "{why}");
    }

    #[test]
    fn a_placeholder_address_stops_the_script() {
        let files = launch_set(
            &two_nodes(),
            &Train::stand_in("train_trl.py", "run.toml"),
            LaunchOptions::default(),
        )
        .unwrap();
        let text = |n: &str| files.iter().find(|(f, _)| *f == n).unwrap().1.clone();
        assert!(text("accelerate.yaml").contains(&format!("main_process_ip: {IP_PLACEHOLDER}\n")));
        let sh = text("launch.sh");
        let check = sh.find("grep -q").unwrap();
        assert!(
            check < sh.find("trl vllm-serve").unwrap()
                && check < sh.find("accelerate launch").unwrap()
        );
        assert!(files.iter().any(|(f, _)| *f == "ds_config.json"));
    }
}
