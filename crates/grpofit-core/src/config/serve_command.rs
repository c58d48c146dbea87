//! The `trl vllm-serve` command line of a launch script, with only the flags the pinned
//! releases take (`export_keys::left_out_by` for `[vllm_server]`: that TRL's `vllm-serve`
//! flags and that vLLM's `EngineArgs`), and comment lines naming the ones left out.

use super::export_keys;
use crate::contract::Table;
use crate::run::RunConfig;
use std::fmt::Write as _;

/// `CUDA_VISIBLE_DEVICES=<devices> trl vllm-serve --model ... --tensor_parallel_size ...`, and
/// the `# not written: ...` lines for the flags the pinned releases lack.
pub(super) fn vllm_serve_command(run: &RunConfig, devices: &str) -> (String, Vec<String>) {
    let v = &run.vllm_server;
    let mut flags: Vec<(&'static str, String)> = vec![
        ("tensor_parallel_size", v.tensor_parallel_size.to_string()),
        ("data_parallel_size", v.data_parallel_size.to_string()),
        (
            "gpu_memory_utilization",
            v.gpu_memory_utilization.to_string(),
        ),
    ];
    if let Some(len) = v.max_model_len {
        flags.push(("max_model_len", len.to_string()));
    }
    let versions = run.call_versions();
    let mut left_out = Vec::new();
    let mut serve = format!(
        "CUDA_VISIBLE_DEVICES={devices} trl vllm-serve --model {}",
        run.model_name
    );
    for (flag, value) in flags {
        match export_keys::left_out_by(Table::VllmServer, run.stack, flag, &versions) {
            Some(why) => left_out.push((why, flag)),
            None => {
                let _ = write!(serve, " --{flag} {value}");
            }
        }
    }
    (serve, export_keys::header_lines(&left_out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::release::Release;
    use crate::run::{Generation, VllmVersion};

    #[test]
    fn an_older_trl_gets_only_the_flags_its_vllm_serve_takes() {
        let arch = crate::arch::catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .map(|m| m.arch)
            .expect("in the catalog");
        let mut run = RunConfig::example(arch);
        run.generation = Generation::VllmServer;
        let (today, notes) = vllm_serve_command(&run, "1");
        assert!(today.contains("--data_parallel_size"), "{today}");
        assert!(notes.is_empty(), "{notes:?}");
        // trl 0.16.1's ScriptArguments has no data_parallel_size (0.17.0 brought it)
        run.versions.trl = Release::new(0, 16, 1);
        run.vllm_version = VllmVersion { major: 0, minor: 7 };
        let (old, notes) = vllm_serve_command(&run, "1");
        assert!(!old.contains("--data_parallel_size"), "{old}");
        assert!(old.contains("--gpu_memory_utilization"), "{old}");
        assert_eq!(
            notes,
            ["# not written: trl 0.16.1's `trl vllm-serve` takes no data_parallel_size"]
        );
    }
}
