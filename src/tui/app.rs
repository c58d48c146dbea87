//! The interactive screen's state and its one `update` function (keys in, state out).

use super::keymap::{self, Action};
use super::theme::Theme;
use crate::config::RunFile;
use crate::config::export::{ExportContext, to_toml, write_atomically};
use crate::gpu::GpuInfo;
use crate::model::adjust::apply_knob;
use crate::model::catalog;
use crate::model::estimate::{Estimate, Estimator, GpuBudget};
use crate::model::fit::{FitOutcome, fit};
use crate::model::fit::{StepDown, step_downs};
use crate::model::knobs::{Knob, accumulation_for};
use crate::model::rules;
use crate::model::run::{Checkpointing, Optimizer, Quant, RunConfig, Stack};
use crate::model::units::format_size;
use crate::presets;
use crate::text::signed_count;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use std::path::PathBuf;

/// What the screen shows on top of the main view.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Normal,
    Help,
    /// typing an exact value for a knob
    Entry {
        knob: Knob,
        text: String,
        error: Option<String>,
    },
    /// the model catalog, filtered by what was typed
    Models {
        filter: String,
        selected: usize,
    },
    /// the preset list read when the picker opened
    Presets {
        selected: usize,
        choices: Vec<(String, presets::PresetSource)>,
    },
    /// the export file exists: `y` overwrites it
    ConfirmOverwrite(PathBuf),
}

#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    /// a new NVML reading (or why there is none)
    Gpu(Result<GpuInfo, String>),
}

/// Where the capacity comes from.
#[derive(Debug, Clone)]
pub struct GpuState {
    pub capacity: u64,
    /// `--gpu-mem` fixes the capacity; NVML readings then only move the live marker
    pub capacity_from_user: bool,
    pub name: String,
    pub live: Option<GpuInfo>,
    /// why NVML gave nothing, shown in the header
    pub unavailable: Option<String>,
}

pub struct App {
    pub run: RunConfig,
    pub gpu: GpuState,
    pub focus: usize,
    pub mode: Mode,
    pub estimate: Estimate,
    pub step_downs: Vec<StepDown>,
    pub lock: bool,
    /// the effective batch the lock keeps
    pub target_batch: u64,
    pub batch_note: Option<String>,
    pub message: Option<String>,
    pub quit: bool,
    pub theme: Theme,
    pub export_dir: PathBuf,
    model_config: Option<PathBuf>,
    undo: Vec<RunConfig>,
    estimator: Estimator,
}

impl App {
    pub fn new(file: RunFile, gpu: GpuState, theme: Theme, export_dir: PathBuf) -> App {
        let target_batch = file.run.effective_batch();
        let mut estimator = Estimator::new();
        let estimate = estimator.estimate(&file.run, budget(&gpu));
        let mut app = App {
            run: file.run,
            gpu,
            focus: 0,
            mode: Mode::Normal,
            estimate,
            step_downs: Vec::new(),
            lock: file.lock_effective_batch,
            target_batch,
            batch_note: None,
            message: None,
            quit: false,
            theme,
            export_dir,
            model_config: file.model_config,
            undo: Vec::new(),
            estimator,
        };
        app.recompute();
        app
    }

    pub fn focused(&self) -> Knob {
        Knob::ALL[self.focus]
    }

    pub fn update(&mut self, msg: Msg) {
        match msg {
            Msg::Gpu(reading) => self.gpu_reading(reading),
            Msg::Key(key) if keymap::is_interrupt(&key) => self.quit = true,
            Msg::Key(key) => self.key(key),
        }
    }

    fn key(&mut self, key: KeyEvent) {
        match self.mode.clone() {
            Mode::Normal => {
                self.message = None;
                if let Some(action) = keymap::action_for(&key) {
                    self.act(action);
                }
            }
            Mode::Help => self.mode = Mode::Normal,
            Mode::Entry { knob, text, .. } => self.entry_key(knob, text, key),
            Mode::Models { filter, selected } => self.models_key(filter, selected, key),
            Mode::Presets { selected, choices } => self.presets_key(selected, choices, key),
            Mode::ConfirmOverwrite(path) => {
                self.mode = Mode::Normal;
                if key.code == KeyCode::Char('y') {
                    self.write_export(path, true);
                } else {
                    self.message = Some("export cancelled".into());
                }
            }
        }
    }

    fn act(&mut self, action: Action) {
        let knob = self.focused();
        match action {
            Action::NextKnob => self.focus = (self.focus + 1) % Knob::ALL.len(),
            Action::PrevKnob => self.focus = (self.focus + Knob::ALL.len() - 1) % Knob::ALL.len(),
            Action::Up | Action::Down | Action::UpCoarse | Action::DownCoarse => {
                let up = matches!(action, Action::Up | Action::UpCoarse);
                let coarse = matches!(action, Action::UpCoarse | Action::DownCoarse);
                match knob.get(&self.run) {
                    Some(v) => {
                        self.set_knob(knob, knob.next(v, up, coarse));
                    }
                    None => {
                        self.message =
                            Some("no vLLM on this GPU: turn use_vllm on in the run file".into())
                    }
                }
            }
            Action::TypeValue => {
                let text = knob
                    .get(&self.run)
                    .map(|v| knob.show(v))
                    .unwrap_or_default();
                self.mode = Mode::Entry {
                    knob,
                    text,
                    error: None,
                };
            }
            Action::Undo => match self.undo.pop() {
                Some(previous) => {
                    self.run = previous;
                    self.recompute();
                }
                None => self.message = Some("nothing to undo".into()),
            },
            Action::ToggleLock => {
                self.lock = !self.lock;
                self.target_batch = self.run.effective_batch();
                self.batch_note = None;
            }
            Action::ToggleStack => {
                _ = self.change(|r| {
                    r.switch_stack(if r.stack == Stack::Trl {
                        Stack::Unsloth
                    } else {
                        Stack::Trl
                    })
                })
            }
            Action::CycleCheckpointing => {
                _ = self.change(|r| {
                    r.checkpointing = match (r.checkpointing, r.stack) {
                        (Checkpointing::Off, _) => Checkpointing::On,
                        (Checkpointing::On, Stack::Unsloth) => Checkpointing::UnslothOffload,
                        _ => Checkpointing::Off,
                    }
                })
            }
            Action::ToggleFourBit => {
                _ = self.change(|r| {
                    r.quant = if r.quant == Quant::Nf4 {
                        Quant::Bf16
                    } else {
                        Quant::Nf4
                    }
                })
            }
            Action::ToggleBeta => {
                _ = self.change(|r| r.beta = if r.beta > 0.0 { 0.0 } else { 0.04 })
            }
            Action::CycleOptimizer => {
                _ = self.change(|r| {
                    let order = [
                        Optimizer::AdamW,
                        Optimizer::AdamW8bit,
                        Optimizer::PagedAdamW8bit,
                        Optimizer::Sgd,
                    ];
                    let i = order
                        .iter()
                        .position(|o| *o == r.optimizer)
                        .map_or(0, |i| (i + 1) % order.len());
                    r.optimizer = order[i];
                })
            }
            Action::PickModel => {
                self.mode = Mode::Models {
                    filter: String::new(),
                    selected: 0,
                }
            }
            Action::PickPreset => {
                self.mode = Mode::Presets {
                    selected: 0,
                    choices: presets::list(),
                }
            }
            Action::Export => self.export(),
            Action::Fit => self.apply_fit(),
            Action::Help => self.mode = Mode::Help,
            Action::Quit => self.quit = true,
        }
    }

    /// Applies a change to the run, keeping the previous run for undo. A change that breaks a
    /// rule the loader enforces (`rules::validate`) is refused with the rule, so whatever the
    /// screen holds can be exported and loaded back. Returns whether it was applied.
    fn change(&mut self, f: impl FnOnce(&mut RunConfig)) -> bool {
        let mut next = self.run.clone();
        f(&mut next);
        if let Err(broken) = rules::validate(&next) {
            self.message = Some(broken.message);
            return false;
        }
        if next != self.run {
            self.undo.push(std::mem::replace(&mut self.run, next));
            self.recompute();
        }
        true
    }

    fn set_knob(&mut self, knob: Knob, value: u64) -> bool {
        let keep = (self.lock && knob == Knob::MicroBatch).then_some(self.target_batch);
        if !self.change(|r| apply_knob(r, knob, value, keep)) {
            return false;
        }
        if let Some(target) = keep {
            let (_, off) = accumulation_for(target, self.run.micro_batch, self.run.gpus);
            self.batch_note = (off != 0).then(|| {
                format!(
                    "effective batch {target} cannot be kept exactly: {}",
                    signed_count(off, "completion", "completions")
                )
            });
        } else if knob == Knob::GradAccum || !self.lock {
            self.target_batch = self.run.effective_batch();
            self.batch_note = None;
        }
        true
    }

    fn entry_key(&mut self, knob: Knob, mut text: String, key: KeyEvent) {
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Enter => match knob.parse(&text) {
                Ok(v) => {
                    self.mode = Mode::Normal;
                    if !self.set_knob(knob, v) {
                        self.mode = Mode::Entry {
                            knob,
                            text,
                            error: self.message.take(),
                        };
                    }
                }
                Err(e) => {
                    self.mode = Mode::Entry {
                        knob,
                        text,
                        error: Some(e),
                    }
                }
            },
            KeyCode::Backspace => {
                text.pop();
                self.mode = Mode::Entry {
                    knob,
                    text,
                    error: None,
                };
            }
            KeyCode::Char(c)
                if text.len() < 12
                    && (c.is_ascii_digit()
                        || c == '.'
                        || (c == '%' && knob == Knob::VllmShare)) =>
            {
                text.push(c);
                self.mode = Mode::Entry {
                    knob,
                    text,
                    error: None,
                };
            }
            _ => {}
        }
    }

    /// Catalog ids matching the filter (case-insensitive substring).
    pub fn model_matches(filter: &str) -> Vec<&'static str> {
        let f = filter.to_ascii_lowercase();
        catalog::ids()
            .filter(|id| id.to_ascii_lowercase().contains(&f))
            .collect()
    }

    fn models_key(&mut self, mut filter: String, selected: usize, key: KeyEvent) {
        let matches = Self::model_matches(&filter);
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Up => {
                self.mode = Mode::Models {
                    filter,
                    selected: selected.saturating_sub(1),
                }
            }
            KeyCode::Down => {
                let last = matches.len().saturating_sub(1);
                self.mode = Mode::Models {
                    filter,
                    selected: (selected + 1).min(last),
                }
            }
            KeyCode::Enter => {
                self.mode = Mode::Normal;
                if let Some(id) = matches.get(selected) {
                    let found = catalog::find(id).map(|f| f.arch);
                    if let Some(arch) = found {
                        self.model_config = None;
                        self.change(|r| {
                            r.arch = arch;
                            r.model_name = id.to_string();
                        });
                    }
                }
            }
            KeyCode::Backspace => {
                filter.pop();
                self.mode = Mode::Models {
                    filter,
                    selected: 0,
                };
            }
            KeyCode::Char(c) if filter.len() < 40 => {
                filter.push(c);
                self.mode = Mode::Models {
                    filter,
                    selected: 0,
                };
            }
            _ => {}
        }
    }

    fn presets_key(
        &mut self,
        selected: usize,
        choices: Vec<(String, presets::PresetSource)>,
        key: KeyEvent,
    ) {
        let last = choices.len().saturating_sub(1);
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Up => {
                self.mode = Mode::Presets {
                    selected: selected.saturating_sub(1),
                    choices,
                }
            }
            KeyCode::Down => {
                self.mode = Mode::Presets {
                    selected: (selected + 1).min(last),
                    choices,
                }
            }
            KeyCode::Enter => {
                self.mode = Mode::Normal;
                let Some((name, source)) = choices.get(selected) else {
                    return;
                };
                let (name, loaded) = (name.clone(), source.load(name));
                match loaded {
                    Ok(file) => {
                        self.lock = file.lock_effective_batch;
                        self.model_config = file.model_config.clone();
                        if let Some(bytes) = file
                            .gpu_memory
                            .filter(|_| !self.gpu.capacity_from_user && self.gpu.live.is_none())
                        {
                            self.gpu.capacity = bytes;
                            self.gpu.name = format!("the {name} preset's gpu_memory");
                        }
                        self.change(|r| *r = file.run);
                        self.target_batch = self.run.effective_batch();
                        self.message = Some(format!("preset {name} loaded"));
                    }
                    Err(e) => self.message = Some(e.to_string()),
                }
            }
            _ => {}
        }
    }

    /// The fit solver's answer applied to the run (undo brings the old one back).
    fn apply_fit(&mut self) {
        let gpu = budget(&self.gpu);
        self.message = Some(match fit(&self.run, gpu, 0.05, &mut self.estimator) {
            FitOutcome::AlreadyFits { .. } => "already fits with 5% headroom".into(),
            FitOutcome::Fitted { run, changes, .. } => {
                let said: Vec<String> = changes
                    .iter()
                    .map(|c| format!("{} {} → {}", c.key, c.from, c.to))
                    .collect();
                self.change(|r| *r = *run);
                self.target_batch = self.run.effective_batch();
                format!("fit: {}", said.join(", "))
            }
            FitOutcome::Impossible {
                smallest_gpu_bytes, ..
            } => {
                format!(
                    "nothing on the grid fits: it needs a {} GPU",
                    format_size(smallest_gpu_bytes)
                )
            }
        });
    }

    fn export(&mut self) {
        let name = self
            .run
            .model_name
            .rsplit('/')
            .next()
            .unwrap_or("run")
            .to_ascii_lowercase();
        let path = self.export_dir.join(format!("vramfit-{name}.toml"));
        if path.exists() {
            self.mode = Mode::ConfirmOverwrite(path);
        } else {
            self.write_export(path, false);
        }
    }

    fn write_export(&mut self, path: PathBuf, overwrite: bool) {
        let gpu_line = format!("{} {}", self.gpu.name, format_size(self.gpu.capacity));
        let ctx = ExportContext {
            gpu: &gpu_line,
            gpu_memory: Some(self.gpu.capacity),
            model_config: self.model_config.as_deref(),
            lock_effective_batch: self.lock,
            estimate: Some(&self.estimate),
        };
        self.message = Some(
            match write_atomically(&path, &to_toml(&self.run, &ctx), overwrite) {
                Ok(()) => format!("wrote {}", path.display()),
                Err(e) => e,
            },
        );
    }

    fn gpu_reading(&mut self, reading: Result<GpuInfo, String>) {
        match reading {
            Ok(info) => {
                if !self.gpu.capacity_from_user && info.total_bytes != self.gpu.capacity {
                    self.gpu.capacity = info.total_bytes;
                    self.gpu.name = info.name.clone();
                    self.gpu.live = Some(info);
                    self.recompute();
                } else {
                    self.gpu.live = Some(info);
                }
                self.gpu.unavailable = None;
            }
            Err(why) => {
                self.gpu.live = None;
                self.gpu.unavailable = Some(why);
            }
        }
    }

    fn recompute(&mut self) {
        let gpu = budget(&self.gpu);
        self.estimate = self.estimator.estimate(&self.run, gpu);
        self.step_downs = step_downs(&self.run, gpu, &mut self.estimator);
    }
}

fn budget(gpu: &GpuState) -> GpuBudget {
    GpuBudget {
        capacity: gpu.capacity,
        used_by_others: 0,
    }
}
