//! The set `--export-dir` writes: the user's own run, ready to launch.
//!
//! - From a TRL recipe: the recipe tuned in place (`tuned.yaml`, the same edit as `fit -o`,
//!   `write_back::text_for`, so every key the user wrote is kept), an accelerate config, and
//!   `launch.sh`, which runs the recipe's own script when it names one, else TRL's GRPO script
//!   (`accelerate launch --config_file accelerate.yaml -m trl.scripts.grpo --config
//!   tuned.yaml`: `trl/scripts/grpo.py`, what `trl grpo` runs, in every TRL release modelled,
//!   0.14.0 to 1.15.0, each with its `if __name__ == "__main__"` block).
//! - From a run file or a preset, which name no dataset nor reward: `run.toml` and a stand-in
//!   training script (`train_trl.py` / `train_unsloth.py`), said plainly in launch.sh and by
//!   the command.
//!
//! The core builds the files; the binary writes them as one folder (`files_set`).

use super::export::ExportContext;
use super::launch::Train;
use super::launch_set::{LaunchOptions, LaunchSetError, launch_set, training_script};
use super::source::{Format, SourceFile};
use super::write_back::{WriteBackError, text_for};
use crate::files_set::SetFile;
use crate::run::RunConfig;
use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

/// The tuned recipe's name in the set.
pub const TUNED_RECIPE: &str = "tuned.yaml";
/// The run file's name in the set (a run file or a preset).
pub const RUN_FILE: &str = "run.toml";
/// Every file a set may hold: what `--force` may replace in an existing folder.
pub const SET_NAMES: &[&str] = &[
    RUN_FILE,
    TUNED_RECIPE,
    "accelerate.yaml",
    "ds_config.json",
    "launch.sh",
    "train_trl.py",
    "train_unsloth.py",
];

/// TRL's script: what `trl grpo` runs (trl 0.14.0 `cli.py`: `scripts/grpo.py` under accelerate's
/// `launch_command`; trl 1.15.0 `cli/commands/training.py` `TrainingCommand("grpo")`), run as a
/// module so that it is found wherever trl is installed.
pub const TRL_GRPO: &str = "-m trl.scripts.grpo";

/// The reward functions TRL's GRPO script loads by name (trl 1.15.0 `scripts/grpo.py`,
/// `reward_funcs_registry`); any other name must be a dotted import path, or the script stops
/// with "Could not load reward function".
const TRL_REWARDS: &[&str] = &[
    "accuracy_reward",
    "reasoning_accuracy_reward",
    "think_format_reward",
    "get_soft_overlong_punishment",
];

/// open-r1's reward names (huggingface/open-r1 `src/open_r1/rewards.py`, `get_reward_funcs`'
/// `REWARD_FUNCS_REGISTRY`), which only its own script `src/open_r1/grpo.py` loads.
const OPEN_R1_REWARDS: &[&str] = &[
    "accuracy",
    "format",
    "reasoning_steps",
    "cosine",
    "repetition_penalty",
    "length",
    "code",
    "binary_code",
    "ioi_code",
    "cf_code",
    "code_format",
    "tag_count",
    "soft_overlong_punishment",
];

/// open-r1's GRPO script, relative to its checkout.
pub const OPEN_R1_SCRIPT: &str = "src/open_r1/grpo.py";

/// The script a recipe is launched with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Script {
    /// TRL's own (`TRL_GRPO`)
    Trl,
    /// the recipe's (or its accelerate config's) own script, as named there; `why` says where
    Named { path: String, why: String },
}

/// The script a recipe names: a `.py` path on a launch command in a comment of the recipe or
/// of the accelerate config (`# accelerate launch ... src/open_r1/grpo.py --config ...`),
/// else open-r1's when the recipe's `reward_funcs` are open-r1's names TRL's script cannot
/// load, else TRL's.
pub fn recipe_script(recipe: &str, launch_config: Option<&str>) -> Script {
    for (text, what) in [
        (Some(recipe), "the recipe"),
        (launch_config, "the accelerate config"),
    ] {
        if let Some(path) = text.and_then(commented_script) {
            let why = format!("named by a launch command in {what}");
            return Script::Named { path, why };
        }
    }
    let names = reward_funcs(recipe);
    let trl_loads = |n: &String| TRL_REWARDS.contains(&n.as_str()) || n.contains('.');
    if !names.is_empty()
        && !names.iter().all(trl_loads)
        && names.iter().all(|n| OPEN_R1_REWARDS.contains(&n.as_str()))
    {
        return Script::Named {
            path: OPEN_R1_SCRIPT.into(),
            why: format!(
                "open-r1's: its reward_funcs ({}) are open-r1's, which TRL's script does not load",
                names.join(", ")
            ),
        };
    }
    Script::Trl
}

/// The first `.py` path on a commented launch command (`accelerate launch`, `python`,
/// `torchrun`), continued over comment lines that end in `\\`.
fn commented_script(text: &str) -> Option<String> {
    let mut commands: Vec<String> = Vec::new();
    let mut continued = false;
    for line in text.lines() {
        let Some(body) = line.trim_start().strip_prefix('#') else {
            continued = false;
            continue;
        };
        match commands.last_mut() {
            Some(last) if continued => last.push_str(body),
            _ => commands.push(body.to_string()),
        }
        continued = body.trim_end().ends_with('\\');
    }
    commands
        .iter()
        .filter(|c| {
            ["accelerate launch", "python", "torchrun"]
                .iter()
                .any(|k| c.contains(k))
        })
        .flat_map(|c| c.split_whitespace())
        .map(|t| t.trim_matches(|c| c == '"' || c == '\'' || c == '\\'))
        .find(|t| t.ends_with(".py") && t.len() > 3 && !t.contains('='))
        .map(str::to_string)
}

/// The recipe's `reward_funcs`, as names.
fn reward_funcs(recipe: &str) -> Vec<String> {
    let Ok(docs) = YamlLoader::load_from_str(recipe) else {
        return Vec::new();
    };
    match docs.first().map(|d| &d["reward_funcs"]) {
        Some(Yaml::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        Some(Yaml::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// What launch.sh runs for a recipe: `located` is where the named script was found (the
/// binary looks beside the recipe and in the current folder), written as is.
pub fn recipe_train(script: &Script, located: Option<&str>) -> Train {
    match script {
        Script::Trl => Train {
            args: format!("{TRL_GRPO} --config {TUNED_RECIPE}"),
            header: vec![format!(
                "# your recipe, tuned ({TUNED_RECIPE}), run by TRL's GRPO script: trl/scripts/grpo.py, what `trl grpo --config {TUNED_RECIPE}` runs"
            )],
        },
        Script::Named { path, why } => {
            let run = shell_word(located.unwrap_or(path));
            let mut header = vec![format!(
                "# your recipe, tuned ({TUNED_RECIPE}), run by its own script {path} ({why})"
            )];
            if located.is_none() {
                header.push(format!(
                    "[ -f {run} ] || {{ echo \"launch.sh: {path} not found from $(pwd): write its path on the accelerate launch line below\" >&2; exit 1; }}"
                ));
            }
            Train {
                args: format!("{run} --config {TUNED_RECIPE}"),
                header,
            }
        }
    }
}

/// `s` as one shell word: single-quoted when it holds anything but plain path characters.
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// What the set is made from.
pub struct SetInputs<'a> {
    pub run: &'a RunConfig,
    pub source: Option<&'a SourceFile>,
    pub ctx: &'a ExportContext<'a>,
    pub opts: LaunchOptions<'a>,
    /// the text of the accelerate config the run was launched with (`--launch`)
    pub launch_config: Option<&'a str>,
    /// where a script named as a relative path is (None: not found)
    pub locate: &'a dyn Fn(&str) -> Option<String>,
}

/// The set, and what the command says of it.
#[derive(Debug)]
pub struct ExportSet {
    pub files: Vec<SetFile>,
    /// what the write could not carry, and the script chosen
    pub notes: Vec<String>,
    /// the stand-in training script the caller adds to the set (no recipe)
    pub stand_in: Option<&'static str>,
}

/// Why no set is written.
#[derive(Debug, thiserror::Error)]
pub enum ExportSetError {
    #[error(transparent)]
    Launch(#[from] LaunchSetError),
    #[error(transparent)]
    WriteBack(#[from] WriteBackError),
}

/// The set for `inp` (see the module's comment).
pub fn export_set(inp: &SetInputs) -> Result<ExportSet, ExportSetError> {
    let mut notes = Vec::new();
    let recipe = inp.source.filter(|s| s.format == Format::Yaml);
    let (first, train, stand_in) = match recipe {
        Some(src) => {
            let text = text_for(
                Path::new(TUNED_RECIPE),
                Some(src),
                inp.run,
                inp.ctx,
                &mut notes,
            )?;
            let script = recipe_script(&src.text, inp.launch_config);
            let located = match &script {
                Script::Named { path, .. } => (inp.locate)(path),
                Script::Trl => None,
            };
            if let Script::Named { path, why } = &script {
                notes.push(format!("launch.sh runs {path} ({why})"));
            }
            (
                (TUNED_RECIPE, text),
                recipe_train(&script, located.as_deref()),
                None,
            )
        }
        None => {
            let text = text_for(
                Path::new(RUN_FILE),
                inp.source,
                inp.run,
                inp.ctx,
                &mut notes,
            )?;
            let script = training_script(inp.run.stack);
            let train = Train::stand_in(script, RUN_FILE);
            ((RUN_FILE, text), train, Some(script))
        }
    };
    let launch = launch_set(inp.run, &train, inp.opts)?;
    let mut files = vec![SetFile {
        name: first.0.to_string(),
        text: first.1,
        executable: false,
    }];
    files.extend(launch.into_iter().map(|(name, text)| SetFile {
        name: name.to_string(),
        text,
        executable: name == "launch.sh",
    }));
    Ok(ExportSet {
        files,
        notes,
        stand_in,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commented_launch_names_the_script() {
        let recipe = "# accelerate launch --config_file zero2.yaml --num_processes 7 \\\n#   src/open_r1/grpo.py --config recipe.yaml\nlearning_rate: 1.0e-06\n";
        let Script::Named { path, .. } = recipe_script(recipe, None) else {
            panic!("no script found");
        };
        assert_eq!(path, "src/open_r1/grpo.py");
        assert_eq!(
            recipe_script("# a note on grpo.py\nseed: 42\n", None),
            Script::Trl
        );
        // the accelerate config's own comment, when the recipe names none
        let launch = "# python my_grpo.py --config recipe.yaml\ndistributed_type: NO\n";
        let Script::Named { path, why } = recipe_script("seed: 42\n", Some(launch)) else {
            panic!("the accelerate config's script not found");
        };
        assert_eq!(path, "my_grpo.py");
        assert!(why.contains("accelerate config"), "{why}");
    }

    #[test]
    fn open_r1_rewards_mean_open_r1_s_script() {
        let open_r1 = "reward_funcs:\n- accuracy\n- format\n- tag_count\n";
        let Script::Named { path, .. } = recipe_script(open_r1, None) else {
            panic!("open-r1's rewards not recognised");
        };
        assert_eq!(path, OPEN_R1_SCRIPT);
        let trl = "reward_funcs:\n- think_format_reward\n- my_rewards.length\n";
        assert_eq!(recipe_script(trl, None), Script::Trl);
    }

    #[test]
    fn a_script_not_found_stops_launch_sh_with_the_reason() {
        let script = Script::Named {
            path: "src/x y.py".into(),
            why: String::new(),
        };
        let t = recipe_train(&script, None);
        assert_eq!(t.args, "'src/x y.py' --config tuned.yaml");
        assert!(
            t.header[1].starts_with("[ -f 'src/x y.py' ] ||"),
            "{:?}",
            t.header
        );
        let t = recipe_train(&script, Some("/abs/src/grpo.py"));
        assert_eq!(t.args, "/abs/src/grpo.py --config tuned.yaml");
        assert_eq!(t.header.len(), 1);
    }
}
