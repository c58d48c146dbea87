//! The file a run was read from, kept so that a write starting from it edits it in place: the
//! tuned keys' values change, a header comment line is added, and every other byte the user
//! wrote (keys grpofit does not model, comments, order) stays as it was.
//!
//! `write_back` does the edit.

use crate::contract::{Call, Table};
use crate::run::RunConfig;
use std::path::{Path, PathBuf};

/// How the header line a write adds starts: an earlier write's header (and only that) is
/// replaced, and a check of the write passes over it.
pub(super) const HEADER: &str = "# tuned by grpofit on ";

/// The format a run was read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// grpofit's run file
    Toml,
    /// a flat TRL CLI recipe (`trl grpo --config recipe.yaml`)
    Yaml,
}

impl Format {
    /// The format a path's extension names: `.yaml` / `.yml`, else TOML.
    pub fn of(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml") => {
                Format::Yaml
            }
            _ => Format::Toml,
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Toml => "toml",
            Format::Yaml => "yaml",
        }
    }
}

/// A recipe key and the run-file key it was read as (`lora_r` as `[lora] r`).
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub recipe_key: String,
    pub table: Table,
    pub key: String,
}

/// The user's file, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
    pub format: Format,
    /// the run as read from the file (and its launch config): what a tuned run is compared with
    pub run: RunConfig,
    pub gpu_memory: Option<u64>,
    pub lock_effective_batch: bool,
    pub model_config: Option<PathBuf>,
    /// what the file says about time (`[grpofit] gpu`, ...), as read: a write changes a time
    /// key only where the one written differs (`fit --fastest -o` names the card it timed)
    pub time: crate::time::TimeKeys,
    /// YAML: the recipe keys grpofit read, and where each went in the run file
    pub placed: Vec<Placed>,
    /// the file as it was when read: a write refuses to start from it once it has changed
    pub stamp: Stamp,
}

/// What a file was when read: its content's hash, its length and its inode. A write built
/// from the text read checks it first (`SourceFile::unchanged`), so an edit saved since in
/// another program is never silently overwritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    pub hash: u64,
    pub len: u64,
    pub inode: Option<u64>,
}

impl Stamp {
    /// The stamp of `bytes`, read from `path` (whose inode is taken now).
    pub fn of(path: &Path, bytes: &[u8]) -> Stamp {
        Stamp {
            hash: fnv1a(bytes),
            len: bytes.len() as u64,
            inode: inode(path),
        }
    }
}

/// FNV-1a, 64 bits: a content hash with no key, stable across runs.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(unix)]
fn inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}

#[cfg(not(unix))]
fn inode(_path: &Path) -> Option<u64> {
    None
}

impl SourceFile {
    /// `Ok` when the file on disk is still what was read; else what changed (the error names
    /// the file), and the file as it is now, to merge the tuned keys into.
    pub fn unchanged(&self) -> Result<(), Box<Changed>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) => {
                return Err(Box::new(Changed {
                    what: format!("it cannot be read now: {e}"),
                    now: None,
                }));
            }
        };
        let now = Stamp::of(&self.path, &bytes);
        if now == self.stamp {
            return Ok(());
        }
        let what = if now.inode != self.stamp.inode {
            "replaced by another file".to_string()
        } else {
            "its content was edited".to_string()
        };
        let now = String::from_utf8(bytes).ok().map(|text| SourceFile {
            text,
            stamp: now,
            ..self.clone()
        });
        Err(Box::new(Changed { what, now }))
    }
}

/// How the source changed since it was read, and the file as it is now (when it is text).
#[derive(Debug, Clone)]
pub struct Changed {
    pub what: String,
    /// the same source (the run as first read) with the text and stamp of now: writing the
    /// tuned keys into it merges them into the user's new text
    pub now: Option<SourceFile>,
}

/// One key whose written value differs between the run as read and the run as tuned; `None`
/// when the tuned run no longer writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub table: Table,
    pub key: String,
    pub value: Option<toml::Value>,
}

/// TRL `ModelConfig`'s adapter keys and the PEFT `LoraConfig` keyword each becomes
/// (trl 1.15.0, `trl/trainer/utils.py`, `get_peft_config`).
pub const MODEL_LORA_KEYS: &[(&str, &str)] = &[
    ("lora_r", "r"),
    ("lora_alpha", "lora_alpha"),
    ("lora_dropout", "lora_dropout"),
    ("lora_target_modules", "target_modules"),
    ("lora_target_parameters", "target_parameters"),
    ("lora_modules_to_save", "modules_to_save"),
    ("lora_task_type", "task_type"),
    ("use_rslora", "use_rslora"),
    ("use_dora", "use_dora"),
];

/// The recipe key that holds `[table] key`: where it was read from, else the key a recipe
/// writes it as; `None` when a recipe has no place for it.
pub fn recipe_key(source: &SourceFile, table: Table, key: &str) -> Option<String> {
    if let Some(p) = source
        .placed
        .iter()
        .find(|p| p.table == table && p.key == key && !p.recipe_key.is_empty())
    {
        return Some(p.recipe_key.clone());
    }
    let name = match table {
        Table::Grpo if Call::GrpoConfig.accepts(key) => key,
        Table::Model if Call::TrlModelConfig.accepts(key) => key,
        Table::Lora => MODEL_LORA_KEYS.iter().find(|(_, l)| *l == key)?.0,
        Table::Grpofit if key == "max_prompt_length" => key,
        _ => return None,
    };
    Some(name.to_string())
}
