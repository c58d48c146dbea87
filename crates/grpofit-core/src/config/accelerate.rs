//! An accelerate config (`accelerate launch --config_file accelerate.yaml`) read for how the
//! run is spread: the processes, the machines, DeepSpeed (inline or through its JSON) or FSDP.
//! It gives what a run file says in `[grpofit] gpus`, `nodes` and `[distributed]`; accelerate
//! 1.12.0's `ClusterConfig` names the keys (the contract's `accelerate.*` calls).

use crate::run::RunConfig;
use crate::run::spread::{Engine, Spread};
use std::path::{Path, PathBuf};
use yaml_rust2::{ScanError, Yaml, YamlLoader};

/// Most processes or machines a launch may name (as `[grpofit] gpus` and `nodes`).
pub const MAX_PROCESSES: i64 = 4096;

/// An accelerate config that cannot be used: its path, and what is wrong in it.
#[derive(Debug, thiserror::Error)]
pub enum AccelerateError {
    #[error("{path}: cannot read: {error}")]
    Unreadable { path: String, error: std::io::Error },
    #[error("{path}: not valid YAML: {error}")]
    NotYaml { path: String, error: ScanError },
    /// the value of `key` (or what it leads to) is wrong
    #[error("{path}: `{key}`: {problem}")]
    AtKey {
        path: String,
        key: String,
        problem: SpreadError,
    },
    /// the spread the file gives as a whole is wrong
    #[error("{path}: {problem}")]
    InFile { path: String, problem: SpreadError },
}

/// What is wrong with a spread as a launch gives it (the accelerate config's path aside).
#[derive(Debug, thiserror::Error)]
pub enum SpreadError {
    /// `what` names the count: `num_processes`, `--num-processes`
    #[error("{what} = {total} does not split evenly over {nodes} machine(s)")]
    Uneven {
        what: String,
        total: u64,
        nodes: u64,
    },
    /// `found` as the file writes the value ([`as_written`])
    #[error("{found}: expected a whole number from 1 to {max}")]
    Count { found: String, max: i64 },
    #[error("{kind}: grpofit models NO, MULTI_GPU, DEEPSPEED and FSDP")]
    DistributedType { kind: String },
    #[error("zero_stage {stage}: expected 0 to 3")]
    ZeroStage { stage: i64 },
    #[error("{key} = {device}: grpofit models \"none\" and \"cpu\"")]
    Offload { key: String, device: String },
    #[error("deepspeed_config_file {}: cannot read: {error}", .path.display())]
    DeepSpeedUnreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("deepspeed_config_file {}: not JSON: {error}", .path.display())]
    DeepSpeedNotJson {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error("fsdp_sharding_strategy {strategy}: not one of accelerate's")]
    FsdpStrategy { strategy: String },
    /// a spread grpofit does not model (`Spread::refusal`)
    #[error("{key}: {why}")]
    Refused {
        key: &'static str,
        why: &'static str,
    },
}

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
    pub fn new(
        launch: Option<&Path>,
        num_processes: Option<u64>,
    ) -> Result<Overlay, AccelerateError> {
        Ok(Overlay {
            launch: launch.map(|p| read(p, num_processes)).transpose()?,
            num_processes,
        })
    }

    /// `run` spread as the overlay says.
    pub fn apply(&self, run: &mut RunConfig) -> Result<(), SpreadError> {
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
fn per_node(total: u64, nodes: u64, what: &str) -> Result<u64, SpreadError> {
    if total == 0 || !total.is_multiple_of(nodes) {
        return Err(SpreadError::Uneven {
            what: what.to_string(),
            total,
            nodes,
        });
    }
    Ok(total / nodes)
}

/// Reads an accelerate config; `num_processes` overrides its own.
pub fn read(path: &Path, num_processes: Option<u64>) -> Result<Launch, AccelerateError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| AccelerateError::Unreadable {
        path: shown.clone(),
        error,
    })?;
    let doc = YamlLoader::load_from_str(&text)
        .map_err(|error| AccelerateError::NotYaml {
            path: shown.clone(),
            error,
        })?
        .into_iter()
        .next()
        .unwrap_or(Yaml::Null);
    let at = |key: &str, problem: SpreadError| AccelerateError::AtKey {
        path: shown.clone(),
        key: key.to_string(),
        problem,
    };
    let in_file = |problem: SpreadError| AccelerateError::InFile {
        path: shown.clone(),
        problem,
    };
    let count = |key: &str, default: i64| -> Result<u64, AccelerateError> {
        match &doc[key] {
            Yaml::BadValue | Yaml::Null => Ok(default as u64),
            Yaml::Integer(n) if (1..=MAX_PROCESSES).contains(n) => Ok(*n as u64),
            other => Err(at(
                key,
                SpreadError::Count {
                    found: as_written(other),
                    max: MAX_PROCESSES,
                },
            )),
        }
    };
    let nodes = count("num_machines", 1)?;
    // `--num-processes` over the file's own: an uneven split names the flag that gave it
    let (total, what) = match num_processes {
        Some(n) => (n, "--num-processes"),
        None => (count("num_processes", 1)?, "num_processes"),
    };
    let gpus = per_node(total, nodes, what).map_err(in_file)?;
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
                SpreadError::DistributedType {
                    kind: other.to_string(),
                },
            ));
        }
    };
    spread.nodes = nodes;
    if let Some((key, why)) = spread.refusal() {
        return Err(in_file(SpreadError::Refused { key, why }));
    }
    Ok(Launch { gpus, spread })
}

/// A ZeRO stage 0-3 from a YAML or JSON number.
fn stage(n: Option<i64>) -> Result<u8, SpreadError> {
    match n {
        None => Ok(0),
        Some(s @ 0..=3) => Ok(s as u8),
        Some(stage) => Err(SpreadError::ZeroStage { stage }),
    }
}

/// Where an offload goes: `none`, `cpu`; `nvme` is not modelled.
fn offloaded(device: Option<&str>, key: &str) -> Result<bool, SpreadError> {
    match device {
        None | Some("none") => Ok(false),
        Some("cpu") => Ok(true),
        Some(other) => Err(SpreadError::Offload {
            key: key.to_string(),
            device: other.to_string(),
        }),
    }
}

/// accelerate's `deepspeed_config`: inline, or `deepspeed_config_file` (DeepSpeed's JSON:
/// `zero_optimization.stage`, `offload_optimizer.device`, `offload_param.device`).
fn deepspeed(ds: &Yaml, launch: &Path) -> Result<Spread, SpreadError> {
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
        let text =
            std::fs::read_to_string(&path).map_err(|error| SpreadError::DeepSpeedUnreadable {
                path: path.clone(),
                error,
            })?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|error| SpreadError::DeepSpeedNotJson {
                path: path.clone(),
                error,
            })?;
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
fn fsdp(cfg: &Yaml) -> Result<Spread, SpreadError> {
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
            return Err(SpreadError::FsdpStrategy {
                strategy: other.to_string(),
            });
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

/// A YAML value as a file writes it (`"four"`, `2.5`, `true`), not as yaml-rust2's `Debug`
/// shows it (`String("four")`).
fn as_written(value: &Yaml) -> String {
    match value {
        Yaml::String(s) => format!("{s:?}"),
        Yaml::Integer(n) => n.to_string(),
        Yaml::Real(r) => r.clone(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Array(_) => "a list".to_string(),
        Yaml::Hash(_) => "a map".to_string(),
        _ => "null".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_count_is_shown_as_the_file_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("accelerate.yaml");
        for (written, shown) in [
            ("four", "\"four\""),
            ("0", "0"),
            ("2.5", "2.5"),
            ("[1, 2]", "a list"),
        ] {
            std::fs::write(&path, format!("num_processes: {written}\n")).unwrap();
            let e = read(&path, None).unwrap_err().to_string();
            assert!(
                e.ends_with(&format!(
                    "`num_processes`: {shown}: expected a whole number from 1 to 4096"
                )),
                "{e}"
            );
        }
    }

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
        assert!(fsdp(&doc).unwrap_err().to_string().contains("HALF"));
    }

    #[test]
    fn processes_split_over_the_machines() {
        assert_eq!(per_node(16, 2, "n").ok(), Some(8));
        assert!(
            per_node(7, 2, "n")
                .unwrap_err()
                .to_string()
                .contains("does not split evenly")
        );
    }

    #[test]
    fn a_refused_launch_carries_the_file_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("accelerate.yaml");
        std::fs::write(&path, "distributed_type: TPU\n").unwrap();
        let e = read(&path, None).unwrap_err();
        assert!(
            matches!(&e, AccelerateError::AtKey { key, problem: SpreadError::DistributedType { kind }, .. }
                if key == "distributed_type" && kind == "TPU"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{}: `distributed_type`: TPU: grpofit models NO, MULTI_GPU, DEEPSPEED and FSDP",
                path.display()
            )
        );
    }
}
