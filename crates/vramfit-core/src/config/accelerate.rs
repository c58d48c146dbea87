//! An accelerate config (`accelerate launch --config_file accelerate.yaml`) read for how the
//! run is spread: the processes, the machines, DeepSpeed (inline or through its JSON) or FSDP.
//! It gives what a run file says in `[vramfit] gpus`, `nodes` and `[distributed]`; accelerate
//! 1.12.0's `ClusterConfig` names the keys (the contract's `accelerate.*` calls).

use crate::run::RunConfig;
use crate::run::spread::{Engine, Spread};
use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

/// Most processes or machines a launch may name (as `[vramfit] gpus` and `nodes`).
const MAX_PROCESSES: i64 = 4096;

/// The spread an accelerate config gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// training processes on each machine
    pub gpus: u64,
    pub spread: Spread,
}

/// What the command line says of the spread, over the run file's own: `--launch`'s config
/// and `--num-processes` (accelerate's total over the machines). The loader applies it before
/// checking the run, so the run as read from the file already has it and a write does not
/// count it as a tuned key.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    pub launch: Option<Launch>,
    pub num_processes: Option<u64>,
}

impl Overlay {
    /// Reads `--launch` (with `--num-processes` over its own count).
    pub fn new(launch: Option<&Path>, num_processes: Option<u64>) -> Result<Overlay, String> {
        Ok(Overlay {
            launch: launch.map(|p| read(p, num_processes)).transpose()?,
            num_processes,
        })
    }

    /// `run` spread as the overlay says.
    pub fn apply(&self, run: &mut RunConfig) -> Result<(), String> {
        match (&self.launch, self.num_processes) {
            (Some(l), _) => {
                run.gpus = l.gpus;
                run.spread = l.spread;
            }
            (None, Some(n)) => run.gpus = per_node(n, run.spread.nodes, "--num-processes")?,
            (None, None) => {}
        }
        Ok(())
    }
}

/// Processes per machine: accelerate's `num_processes` counts all of them.
fn per_node(total: u64, nodes: u64, what: &str) -> Result<u64, String> {
    if total == 0 || !total.is_multiple_of(nodes) {
        return Err(format!(
            "{what} = {total} does not split evenly over {nodes} machine(s)"
        ));
    }
    Ok(total / nodes)
}

/// Reads an accelerate config; `num_processes` overrides its own.
pub fn read(path: &Path, num_processes: Option<u64>) -> Result<Launch, String> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let doc = YamlLoader::load_from_str(&text)
        .map_err(|e| format!("{shown}: not valid YAML: {e}"))?
        .into_iter()
        .next()
        .unwrap_or(Yaml::Null);
    let at = |key: &str, e: String| format!("{shown}: `{key}`: {e}");
    let count = |key: &str, default: i64| -> Result<u64, String> {
        match &doc[key] {
            Yaml::BadValue | Yaml::Null => Ok(default as u64),
            Yaml::Integer(n) if (1..=MAX_PROCESSES).contains(n) => Ok(*n as u64),
            other => Err(at(key, format!("{other:?}: expected 1 to {MAX_PROCESSES}"))),
        }
    };
    let nodes = count("num_machines", 1)?;
    let total = match num_processes {
        Some(n) => n,
        None => count("num_processes", 1)?,
    };
    let gpus = per_node(total, nodes, "num_processes").map_err(|e| format!("{shown}: {e}"))?;
    let kind = doc["distributed_type"].as_str().unwrap_or("NO");
    let mut spread = match kind {
        "NO" | "MULTI_GPU" => Spread::default(),
        "DEEPSPEED" => {
            deepspeed(&doc["deepspeed_config"], path).map_err(|e| at("deepspeed_config", e))?
        }
        "FSDP" => fsdp(&doc["fsdp_config"]).map_err(|e| at("fsdp_config", e))?,
        other => {
            return Err(at(
                "distributed_type",
                format!("{other}: vramfit models NO, MULTI_GPU, DEEPSPEED and FSDP"),
            ));
        }
    };
    spread.nodes = nodes;
    if let Some((key, why)) = spread.refusal() {
        return Err(format!("{shown}: {key}: {why}"));
    }
    Ok(Launch { gpus, spread })
}

/// A ZeRO stage 0-3 from a YAML or JSON number.
fn stage(n: Option<i64>) -> Result<u8, String> {
    match n {
        None => Ok(0),
        Some(s @ 0..=3) => Ok(s as u8),
        Some(s) => Err(format!("zero_stage {s}: expected 0 to 3")),
    }
}

/// Where an offload goes: `none`, `cpu`; `nvme` is not modelled.
fn offloaded(device: Option<&str>, key: &str) -> Result<bool, String> {
    match device {
        None | Some("none") => Ok(false),
        Some("cpu") => Ok(true),
        Some(other) => Err(format!(
            "{key} = {other}: vramfit models \"none\" and \"cpu\""
        )),
    }
}

/// accelerate's `deepspeed_config`: inline, or `deepspeed_config_file` (DeepSpeed's JSON:
/// `zero_optimization.stage`, `offload_optimizer.device`, `offload_param.device`).
fn deepspeed(ds: &Yaml, launch: &Path) -> Result<Spread, String> {
    let mut spread = Spread {
        engine: Engine::DeepSpeed,
        ..Spread::default()
    };
    if let Some(file) = ds["deepspeed_config_file"].as_str() {
        let path = launch
            .parent()
            .map(|d| d.join(file))
            .filter(|p| p.exists())
            .unwrap_or_else(|| file.into());
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("deepspeed_config_file {}: cannot read: {e}", path.display()))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("deepspeed_config_file {}: not JSON: {e}", path.display()))?;
        let zero = &json["zero_optimization"];
        spread.zero_stage = stage(zero["stage"].as_i64())?;
        let device = |k: &str| zero[k]["device"].as_str();
        spread.offload_optimizer =
            offloaded(device("offload_optimizer"), "offload_optimizer.device")?;
        spread.offload_param = offloaded(device("offload_param"), "offload_param.device")?;
        return Ok(spread);
    }
    spread.zero_stage = stage(ds["zero_stage"].as_i64())?;
    let device = |k: &str| ds[k].as_str();
    spread.offload_optimizer = offloaded(
        device("offload_optimizer_device"),
        "offload_optimizer_device",
    )?;
    spread.offload_param = offloaded(device("offload_param_device"), "offload_param_device")?;
    Ok(spread)
}

/// accelerate's `fsdp_config`: the sharding (`fsdp_sharding_strategy`, FSDP1, or
/// `fsdp_reshard_after_forward`), and `fsdp_offload_params`, which puts the parameters and
/// their optimizer step in host memory (torch's `CPUOffload(offload_params=True)`).
fn fsdp(cfg: &Yaml) -> Result<Spread, String> {
    // accelerate 1.12.0 FullyShardedDataParallelPlugin.__post_init__: FSDP_SHARDING_STRATEGY
    // is FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 (1-5), and
    // FULL_SHARD the default; FSDP2's reshard_after_forward is true (full) or false (grad-op)
    let strategy = match (
        &cfg["fsdp_sharding_strategy"],
        &cfg["fsdp_reshard_after_forward"],
    ) {
        (Yaml::String(s), _) | (_, Yaml::String(s)) => s.to_ascii_uppercase(),
        (Yaml::Integer(n), _) | (_, Yaml::Integer(n)) => n.to_string(),
        (_, Yaml::Boolean(false)) => "SHARD_GRAD_OP".into(),
        _ => "FULL_SHARD".into(),
    };
    let zero_stage = match strategy.as_str() {
        "FULL_SHARD" | "1" | "HYBRID_SHARD" | "4" | "TRUE" => 3,
        "SHARD_GRAD_OP" | "2" | "HYBRID_SHARD_ZERO2" | "5" | "FALSE" => 2,
        "NO_SHARD" | "3" => 0,
        other => {
            return Err(format!(
                "fsdp_sharding_strategy {other}: not one of accelerate's"
            ));
        }
    };
    let offload = cfg["fsdp_offload_params"].as_bool().unwrap_or(false);
    Ok(Spread {
        engine: Engine::Fsdp,
        zero_stage,
        offload_optimizer: offload,
        offload_param: offload,
        ..Spread::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread_of(yaml: &str) -> Spread {
        let doc = YamlLoader::load_from_str(yaml).unwrap().remove(0);
        fsdp(&doc).unwrap()
    }

    #[test]
    fn fsdp_sharding_reads_as_accelerate_does() {
        assert_eq!(
            spread_of("fsdp_sharding_strategy: FULL_SHARD").zero_stage,
            3
        );
        assert_eq!(
            spread_of("fsdp_sharding_strategy: SHARD_GRAD_OP").zero_stage,
            2
        );
        assert_eq!(spread_of("fsdp_sharding_strategy: 2").zero_stage, 2);
        assert_eq!(spread_of("fsdp_reshard_after_forward: false").zero_stage, 2);
        assert_eq!(spread_of("fsdp_version: 2").zero_stage, 3);
        let off = spread_of("fsdp_offload_params: true");
        assert!(off.offload_param && off.offload_optimizer);
        let doc = YamlLoader::load_from_str("fsdp_sharding_strategy: HALF")
            .unwrap()
            .remove(0);
        assert!(fsdp(&doc).unwrap_err().contains("HALF"));
    }

    #[test]
    fn processes_split_over_the_machines() {
        assert_eq!(per_node(16, 2, "n"), Ok(8));
        assert!(
            per_node(7, 2, "n")
                .unwrap_err()
                .contains("does not split evenly")
        );
    }
}
