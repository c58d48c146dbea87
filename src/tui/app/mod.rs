//! The interactive screen's state and its one `update` function (keys in, state out).

mod act;
mod entry;
mod export;
mod mouse;
mod pickers;
mod read;
mod timing;

use super::cmd::{Cmd, ExportError, Exported};
use super::drawn::Drawn;
use super::follow::Following;
use super::keymap::{self, Action};
use super::lookup::Answer;
use super::theme::Theme;
use crate::gpu::GpuInfo;
use crate::hub::{cache, online};
use grpofit_core::config::RunFile;
use grpofit_core::fit::{FitOutcome, StepDown, deeper_steps, step_downs};
use grpofit_core::hardware::GpuSpeed;
use grpofit_core::time::{self, StepTime, TimeKeys};

/// From this many rows the levers panel lists each lever's further rungs (120x40 has room for
/// them, 80x24 not), one more rung for each `ROWS_PER_RUNG` rows more than 24, up to
/// `MOST_RUNGS` (200x60: seven).
const DEEPER_FROM_ROWS: u16 = 36;
const ROWS_PER_RUNG: u16 = 6;
const MOST_RUNGS: usize = 8;
use grpofit_core::measure::tail::Change;
use grpofit_core::memory::estimate::{Estimate, Estimator, GpuBudget};
use grpofit_core::presets;
use grpofit_core::run::RunConfig;
use grpofit_core::run::adjust::{apply_knob, exact_values};
use grpofit_core::run::knobs::Knob;
use grpofit_core::run::rules;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use std::path::PathBuf;
use std::time::Instant;

/// What the screen shows on top of the main view.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Normal,
    /// the keys and the whole text of what the main view shortens, scrolled by `scroll` lines
    Help {
        scroll: usize,
    },
    /// typing an exact value for a knob
    Entry {
        knob: Knob,
        text: String,
        error: Option<String>,
        /// the pre-filled value is selected, as in a text field: the first typed character
        /// replaces it, Backspace clears it, an arrow key keeps it for editing
        selected: bool,
    },
    /// the model catalog, filtered by what was typed; `typing`: letters go to the filter (else
    /// j/k move the selection)
    Models {
        filter: String,
        selected: usize,
        typing: bool,
    },
    /// the preset list read when the picker opened
    Presets {
        selected: usize,
        choices: Vec<PresetChoice>,
    },
    /// the export file exists: `y` overwrites it (and quits, when the export came from quitting)
    ConfirmOverwrite {
        path: PathBuf,
        then_quit: bool,
    },
    /// quitting with changes not exported: y exports then quits, n quits, c or Esc stays
    ConfirmQuit,
    /// the file read (`read`) changed on disk before the export to `path` was written (`what`
    /// says how): m merges the tuned keys into its new text `now`, r reloads it, any other key
    /// cancels
    SourceChanged {
        path: PathBuf,
        overwrite: bool,
        then_quit: bool,
        read: PathBuf,
        what: String,
        now: Option<Box<grpofit_core::config::source::SourceFile>>,
    },
    /// a typed model name being looked up off the UI thread (`Cmd::LookUp`); Esc cancels
    Fetching {
        name: String,
    },
}

/// One preset in the picker: its name, where it lives, and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetChoice {
    pub name: String,
    pub source: presets::PresetSource,
    /// the model, or why the preset does not load
    pub model: String,
    /// the preset's `gpu_memory`
    pub capacity: Option<u64>,
}

/// What `update` is handed: the user's keys and clicks, what the loop's pollers read, what the
/// last frame drew, and the answers to the commands `update` asked for (`Cmd`).
pub enum Msg {
    Key(KeyEvent),
    /// a new NVML reading (or why there is none)
    Gpu(Result<GpuInfo, String>),
    /// what the last frame drew: the cells keys and clicks are read against
    Drawn(Drawn),
    /// a click, a drag or the wheel (unless `--no-mouse`)
    Mouse(MouseEvent),
    /// what a look at the followed run log found (`--follow`)
    Log(Change),
    /// the export's file written, or why not (`Cmd::WriteExport`)
    Exported(Result<Exported, ExportError>),
    /// the fit search's answer (`Cmd::Fit`)
    Fitted(FitOutcome),
    /// the fastest search's answer (`Cmd::Fastest`): `None` when nothing fits
    Fastest(Option<Box<grpofit_core::fastest::Fastest>>),
    /// a lookup started at this time (`Cmd::LookUp`): the spinner turns from it
    LookingUp {
        started: Instant,
    },
    /// what the Hub client said while looking up
    HubSaid(Vec<String>),
    /// the lookup's answer for `name`
    LookedUp {
        name: String,
        answer: Answer,
    },
    /// the presets read for the picker (`Cmd::ListPresets`)
    PresetsListed(Vec<PresetChoice>),
    /// the preset picked, loaded or why not (`Cmd::LoadPreset`)
    PresetLoaded {
        name: String,
        file: Result<Box<RunFile>, String>,
    },
    /// the run file read again, or why not (`Cmd::Reload`)
    Reloaded {
        path: PathBuf,
        file: Result<Box<RunFile>, String>,
    },
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

/// Everything a change can touch, kept whole for undo: the run, the lock and its target, the
/// capacity and where it came from, the model's config.json.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    run: RunConfig,
    lock: bool,
    target_batch: u64,
    capacity: u64,
    gpu_name: String,
    model_config: Option<PathBuf>,
    /// the file an export edits (a preset loaded on the screen replaces it; undo brings it back)
    source: Option<grpofit_core::config::source::SourceFile>,
}

/// The screen's state. Its fields are the screen's own; what tests and callers read of it goes
/// through the accessors below, in the words of what the screen shows.
pub struct App {
    pub(crate) run: RunConfig,
    pub(crate) gpu: GpuState,
    pub(crate) focus: usize,
    pub(crate) mode: Mode,
    pub(crate) estimate: Estimate,
    pub(crate) step_downs: Vec<StepDown>,
    /// further rungs down each lever, for a screen tall enough to list them (`DEEPER_FROM_ROWS`)
    pub(crate) deeper_steps: Vec<StepDown>,
    /// each lever's step down (`step_downs`, then `deeper_steps`), the seconds a step it adds
    /// (negative: saves), where the step is timed
    pub(crate) step_seconds: Vec<Option<f64>>,
    pub(crate) deeper_seconds: Vec<Option<f64>>,
    pub(crate) lock: bool,
    /// the effective batch the lock keeps
    target_batch: u64,
    pub(crate) message: Option<String>,
    pub(crate) quit: bool,
    pub(crate) theme: Theme,
    export_dir: PathBuf,
    /// what the last frame drew; `None` before the first
    pub(crate) drawn: Option<Drawn>,
    /// the estimate pinned with `x`, the baseline the bar and the legend compare against; kept
    /// outside the undo history, so undo never loses it
    pub(crate) pinned: Option<Estimate>,
    model_config: Option<PathBuf>,
    /// the user's file the run was read from, which the export edits in place
    source: Option<grpofit_core::config::source::SourceFile>,
    undo: Vec<Snapshot>,
    /// the state at start or at the last export: quitting away from it asks first
    exported: Snapshot,
    /// the state before a click that is still being dragged: the whole drag is one undo
    gesture: Option<Snapshot>,
    /// whether the screen shows how the run is spread (the GPUs knob, the engine): from the
    /// first time the run is spread over GPUs or a spread key is pressed, for the session
    spread_shown: bool,
    estimator: Estimator,
    /// whether the model picker may ask the Hub for a name the catalog lacks, and where the
    /// Hugging Face cache is (taken from the command line when the screen opens)
    pub(crate) hub: online::Access,
    hub_cache: Option<PathBuf>,
    /// when the lookup under way started (`Mode::Fetching`); the loop runs it (`Cmd::LookUp`)
    pub(crate) lookup_started: Option<Instant>,
    /// what the Hub client said during lookups, printed to standard error once the screen is
    /// closed (never under it)
    pub(crate) notices: Vec<String>,
    /// the latest of them, on the status line while the lookup runs
    pub(crate) lookup_notice: Option<String>,
    /// the live run the screen follows (`--follow LOG`)
    pub(crate) follow: Option<Following>,
    /// the run's estimate as `check` makes it for the followed log (`follow::checked`)
    pub(crate) checked: Option<Estimate>,
    /// what this update asks the loop to do, handed over when it returns
    asked: Vec<Cmd>,
    /// what the run file's versions warn of (a release newer than the newest modelled, a
    /// combination its requirements forbid), under the header's settings
    pub(crate) version_warnings: Vec<String>,
    /// what the run file says about time (the card, the completions' mean length, the steps),
    /// kept for the time bar and written back by the export
    pub(crate) time_keys: TimeKeys,
    /// the card the step is timed on, or why there is none (`inputs::gpu_speed`)
    pub(crate) speed: Result<GpuSpeed, String>,
    /// the step's seconds by phase for the run as it stands, or why it is not timed
    pub(crate) step_time: Result<StepTime, String>,
    /// what `grpofit calibrate` learned, and of it the step time for the card and stack shown
    pub(crate) calibration: Option<grpofit_core::measure::calibration::Calibration>,
    pub(crate) learned: Option<grpofit_core::measure::calibration::LearnedTime>,
}

impl App {
    pub fn new(file: RunFile, gpu: GpuState, theme: Theme, export_dir: PathBuf) -> App {
        let target_batch = file.run.effective_batch();
        let mut estimator = Estimator::new();
        let estimate = estimator.estimate(&file.run, budget(&gpu));
        let exported = Snapshot {
            run: file.run.clone(),
            lock: file.lock_effective_batch,
            target_batch,
            capacity: gpu.capacity,
            gpu_name: gpu.name.clone(),
            model_config: file.model_config.clone(),
            source: file.source.clone(),
        };
        let version_warnings = file.warnings;
        // the card NVML names, else the file's `[grpofit] gpu` (`time_on` takes `--gpu`'s)
        let card = gpu.live.as_ref().map(|g| g.name.clone());
        let speed = time::gpu_speed(
            card.as_deref().or(file.time.gpu.as_deref()),
            file.time.gpu_tflops,
            file.time.gpu_bandwidth,
        )
        .map_err(|e| e.to_string());
        let mut app = App {
            version_warnings,
            run: file.run,
            gpu,
            focus: 0,
            mode: Mode::Normal,
            estimate,
            step_downs: Vec::new(),
            deeper_steps: Vec::new(),
            step_seconds: Vec::new(),
            deeper_seconds: Vec::new(),
            lock: file.lock_effective_batch,
            target_batch,
            message: None,
            quit: false,
            theme,
            export_dir,
            drawn: None,
            pinned: None,
            model_config: file.model_config,
            source: file.source,
            undo: Vec::new(),
            exported,
            gesture: None,
            spread_shown: false,
            estimator,
            hub: online::Access::Offline("no Hub access was given to the screen".into()),
            hub_cache: cache::cache_dir(),
            lookup_started: None,
            notices: Vec::new(),
            lookup_notice: None,
            follow: None,
            checked: None,
            asked: Vec::new(),
            time_keys: file.time,
            speed,
            step_time: Err(String::new()),
            calibration: None,
            learned: None,
        };
        app.recompute();
        app
    }

    /// The knobs on the screen, in [`Knob::ALL`]'s order: the GPUs knob only once the run is
    /// spread (several GPUs, an engine other than DDP, a vLLM server), so that a single-GPU
    /// run's screen stays as it was. `focus` indexes this list.
    pub fn knobs(&self) -> Vec<Knob> {
        Knob::ALL
            .into_iter()
            .filter(|k| *k != Knob::Gpus || self.spread_shown)
            // a full fine-tune has no adapter to size
            .filter(|k| *k != Knob::LoraRank || !self.run.full_finetuning)
            // TRL's sequence knob is `vllm_max_model_length`: without vLLM it sizes nothing
            .filter(|k| *k != Knob::SequenceLength || !self.trl_without_vllm())
            .collect()
    }

    /// A TRL run generating with transformers (`use_vllm = false`).
    fn trl_without_vllm(&self) -> bool {
        self.run.stack == grpofit_core::run::Stack::Trl && !self.run.generation.uses_vllm()
    }

    /// Whether the screen shows the spread: the GPUs knob, the engine in the header and its
    /// keys in the footer.
    pub fn spread_shown(&self) -> bool {
        self.spread_shown
    }

    pub fn focused(&self) -> Knob {
        let knobs = self.knobs();
        knobs[self.focus.min(knobs.len() - 1)]
    }

    /// Whether the last draw was below the smallest screen the view fits in: then only quit and
    /// help answer, since nothing a key changes could be seen.
    pub fn too_small(&self) -> bool {
        self.drawn.as_ref().is_some_and(|d| d.too_small)
    }

    /// Whether the run, the lock or the model's config.json differ from what was last exported
    /// (or loaded at start).
    pub fn unsaved(&self) -> bool {
        self.run != self.exported.run
            || self.lock != self.exported.lock
            || self.model_config != self.exported.model_config
    }

    /// Takes a message, changes the state, and returns what the loop is to do for it: the
    /// update itself writes no file, reads no folder, asks no network and runs no search.
    #[must_use = "the commands are the loop's to run"]
    pub fn update(&mut self, msg: Msg) -> Vec<Cmd> {
        self.take(msg);
        std::mem::take(&mut self.asked)
    }

    /// Asks the loop to run `cmd` once this update returns.
    fn ask(&mut self, cmd: Cmd) {
        self.asked.push(cmd);
    }

    fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Gpu(reading) => self.gpu_reading(reading),
            Msg::Drawn(drawn) => {
                let rungs = self.rungs();
                self.drawn = Some(drawn);
                if self.rungs() != rungs {
                    self.deepen();
                }
            }
            Msg::Log(change) => {
                if let Some(f) = self.follow.as_mut() {
                    f.take(change);
                }
                self.recheck();
            }
            Msg::Mouse(event) => {
                if !self.too_small() {
                    self.mouse(event)
                }
            }
            Msg::Key(key) if keymap::is_interrupt(&key) => {
                self.end_gesture();
                if self.mode == Mode::ConfirmQuit {
                    self.quit = true;
                } else {
                    self.request_quit();
                }
            }
            Msg::Key(key) => {
                self.end_gesture();
                if !self.too_small() || self.answers_when_too_small(&key) {
                    self.key(key)
                }
            }
            Msg::Exported(written) => self.export_written(written),
            Msg::Fitted(outcome) => self.fitted(outcome),
            Msg::Fastest(found) => self.fastest_found(found),
            Msg::LookingUp { started } => self.lookup_started = Some(started),
            Msg::HubSaid(said) => self.hub_said(said),
            Msg::LookedUp { name, answer } => {
                self.lookup_started = None;
                if matches!(self.mode, Mode::Fetching { .. }) {
                    self.mode = Mode::Normal;
                }
                self.looked_up(name, answer);
            }
            Msg::PresetsListed(choices) => {
                self.mode = Mode::Presets {
                    selected: 0,
                    choices,
                }
            }
            Msg::PresetLoaded { name, file } => self.preset_loaded(name, file),
            Msg::Reloaded { path, file } => {
                let label = format!("{} reloaded: the screen's changes dropped", path.display());
                self.adopt(file, &path.display().to_string(), label);
            }
        }
    }

    /// Below the minimum size: quit, help, and the keys that close what is open (a question
    /// asked before the screen shrank is still answered).
    fn answers_when_too_small(&self, key: &KeyEvent) -> bool {
        match &self.mode {
            Mode::Normal => matches!(
                keymap::action_for(key),
                Some(Action::Quit) | Some(Action::Help)
            ),
            Mode::Help { .. }
            | Mode::ConfirmQuit
            | Mode::ConfirmOverwrite { .. }
            | Mode::SourceChanged { .. } => true,
            Mode::Entry { .. }
            | Mode::Models { .. }
            | Mode::Presets { .. }
            | Mode::Fetching { .. } => key.code == KeyCode::Esc,
        }
    }

    /// q, Ctrl-C: quits, asking first when the changes were not exported.
    fn request_quit(&mut self) {
        if self.unsaved() {
            self.mode = Mode::ConfirmQuit;
        } else {
            self.quit = true;
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
            Mode::Help { scroll } => {
                let (max, page) = self
                    .drawn
                    .as_ref()
                    .map_or((0, 1), |d| (d.help_max_scroll, d.help_rows.max(1)));
                self.mode = match list_nav(&key, scroll, max + 1, page, true) {
                    Some(scroll) => Mode::Help { scroll },
                    None => Mode::Normal,
                };
            }
            Mode::Entry {
                knob,
                text,
                selected,
                ..
            } => self.entry_key(knob, text, selected, key),
            Mode::Models {
                filter,
                selected,
                typing,
            } => self.models_key(filter, selected, typing, key),
            Mode::Presets { selected, choices } => self.presets_key(selected, choices, key),
            mode @ Mode::SourceChanged { .. } => self.source_changed_key(mode, key.code),
            Mode::ConfirmOverwrite { path, then_quit } => {
                self.mode = Mode::Normal;
                if key.code == KeyCode::Char('y') {
                    self.write_export(path, true, then_quit);
                } else {
                    self.message = Some("export cancelled".into());
                }
            }
            Mode::Fetching { name } => {
                if key.code == KeyCode::Esc {
                    self.ask(Cmd::CancelLookUp);
                    self.lookup_started = None;
                    self.mode = Mode::Normal;
                    self.message = Some(format!("looking up {name}: cancelled"));
                }
            }
            Mode::ConfirmQuit => match key.code {
                KeyCode::Char('y') => {
                    self.mode = Mode::Normal;
                    self.export(true);
                }
                KeyCode::Char('n') => self.quit = true,
                KeyCode::Char('c') | KeyCode::Esc => {
                    self.mode = Mode::Normal;
                    self.message = Some("still here: nothing exported".into());
                }
                _ => {}
            },
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            run: self.run.clone(),
            lock: self.lock,
            target_batch: self.target_batch,
            capacity: self.gpu.capacity,
            gpu_name: self.gpu.name.clone(),
            model_config: self.model_config.clone(),
            source: self.source.clone(),
        }
    }

    fn restore(&mut self, s: Snapshot) {
        self.run = s.run;
        self.lock = s.lock;
        self.target_batch = s.target_batch;
        self.gpu.capacity = s.capacity;
        self.gpu.name = s.gpu_name;
        self.model_config = s.model_config;
        self.source = s.source;
    }

    /// Applies a change to the whole state, keeping the previous state for undo. A run that
    /// breaks a rule the loader enforces (`rules::validate`) is refused with the rule, so
    /// whatever the screen holds can be exported and loaded back. Returns whether it was applied.
    fn change_all(&mut self, f: impl FnOnce(&mut Snapshot)) -> bool {
        let before = self.snapshot();
        let mut next = before.clone();
        f(&mut next);
        if let Err(broken) = rules::validate(&next.run) {
            self.message = Some(broken.message);
            return false;
        }
        if next != before {
            self.restore(next);
            // a drag's steps are one change, pushed when it ends
            if self.gesture.is_none() {
                self.undo.push(before);
            }
            self.recompute();
        }
        true
    }

    /// Ends a click-and-drag: what it changed becomes one undo step.
    fn end_gesture(&mut self) {
        if let Some(start) = self.gesture.take()
            && start != self.snapshot()
        {
            self.undo.push(start);
        }
    }

    /// A change to the run alone; the lock's target follows the run when the lock is off.
    fn change(&mut self, f: impl FnOnce(&mut RunConfig)) -> bool {
        self.change_all(|s| {
            f(&mut s.run);
            if !s.lock {
                s.target_batch = s.run.effective_batch();
            }
        })
    }

    /// Sets a knob. With the effective batch locked, the micro-batch and the accumulation take
    /// only the values that keep it exact ([`exact_values`]); any other is refused, naming them.
    fn set_knob(&mut self, knob: Knob, value: u64) -> bool {
        let keep = self.lock.then_some(self.target_batch);
        if let Some(values) = keep.and_then(|t| exact_values(knob, t, &self.run))
            && !values.contains(&value)
        {
            self.message = Some(format!(
                "batch locked at {}: {knob} {} keeps it (b unlocks)",
                self.target_batch,
                one_of(&values, value)
            ));
            return false;
        }
        self.change(|r| apply_knob(r, knob, value, keep))
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
        self.spread_shown |= self.run.is_spread();
        let gpu = budget(&self.gpu);
        self.estimate = self.estimator.estimate(&self.run, gpu);
        self.step_downs = step_downs(&self.run, gpu, &mut self.estimator);
        self.learned = self.learned_time();
        self.step_time = self.time_of(&self.run, &self.estimate);
        self.step_seconds = self.seconds_of(&self.step_downs.clone());
        self.deepen();
        self.recheck();
    }

    /// The step's time for `run` (whose memory is `est`) on the screen's card, or why not.
    pub(crate) fn time_of(&self, run: &RunConfig, est: &Estimate) -> Result<StepTime, String> {
        let gpu = self.speed.as_ref().map_err(Clone::clone)?;
        if let Some(why) = time::untimed(est) {
            return Err(why);
        }
        Ok(time::step_time(
            run,
            est,
            gpu,
            &self.time_keys,
            &self.efficiencies(),
        ))
    }

    /// The seconds a step each of `steps` adds to the run's (negative: saves), where timed.
    fn seconds_of(&mut self, steps: &[StepDown]) -> Vec<Option<f64>> {
        let Ok(now) = self.step_time.as_ref().map(|t| t.seconds) else {
            return vec![None; steps.len()];
        };
        let gpu = budget(&self.gpu);
        steps
            .iter()
            .map(|s| {
                let est = self.estimator.estimate(&s.run, gpu);
                self.time_of(&s.run, &est).ok().map(|t| t.seconds - now)
            })
            .collect()
    }

    /// Times the step on `speed` (the command line's `--gpu`, NVML, the file's card, as
    /// `estimate` resolves it).
    pub fn time_on(&mut self, speed: Result<GpuSpeed, String>) {
        self.speed = speed;
        self.recompute();
    }

    /// A file loaded on the screen brings its time keys; its card times the step unless NVML
    /// names the one here.
    fn take_time_keys(&mut self, keys: &TimeKeys) {
        self.time_keys = keys.clone();
        let named = keys.gpu.is_some() || keys.gpu_tflops.is_some();
        if self.gpu.live.is_none() && named {
            self.speed = time::gpu_speed(keys.gpu.as_deref(), keys.gpu_tflops, keys.gpu_bandwidth)
                .map_err(|e| e.to_string());
        }
    }

    /// Rungs down each lever the screen as last drawn has room for, the first included: 1
    /// below `DEEPER_FROM_ROWS` rows.
    fn rungs(&self) -> usize {
        match self.drawn_size() {
            Some((_, h)) if h >= DEEPER_FROM_ROWS => {
                (usize::from((h - 24) / ROWS_PER_RUNG) + 1).min(MOST_RUNGS)
            }
            _ => 1,
        }
    }

    /// The deeper rungs of each lever, on a tall screen only (a short one never shows them, and
    /// its keys stay as quick as before).
    fn deepen(&mut self) {
        self.deeper_steps = match self.rungs() {
            1 => Vec::new(),
            rungs => deeper_steps(&self.run, budget(&self.gpu), &mut self.estimator, rungs),
        };
        self.deeper_seconds = self.seconds_of(&self.deeper_steps.clone());
    }

    /// The estimate the followed log is compared with, on the log's GPU (`check`'s).
    fn recheck(&mut self) {
        self.checked = self.follow.as_ref().map(|f| {
            super::follow::checked(
                f,
                &self.run,
                self.gpu.capacity,
                self.gpu.capacity_from_user,
                &mut self.estimator,
            )
        });
    }
}

fn budget(gpu: &GpuState) -> GpuBudget {
    GpuBudget {
        capacity: gpu.capacity,
        used_by_others: 0,
        context: None,
    }
}

/// A list's selection moved by a navigation key: ↑/↓ (and j/k with `letters`), PgUp/PgDn by
/// `page`, Home/End; `None` when the key is not one of them.
fn list_nav(
    key: &KeyEvent,
    selected: usize,
    len: usize,
    page: usize,
    letters: bool,
) -> Option<usize> {
    let last = len.saturating_sub(1);
    let plain = !key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
    Some(match key.code {
        KeyCode::Up => selected.saturating_sub(1),
        KeyCode::Down => (selected + 1).min(last),
        KeyCode::Char('k') if letters && plain => selected.saturating_sub(1),
        KeyCode::Char('j') if letters && plain => (selected + 1).min(last),
        KeyCode::PageUp => selected.saturating_sub(page),
        KeyCode::PageDown => (selected + page).min(last),
        KeyCode::Home => 0,
        KeyCode::End => last,
        _ => return None,
    })
}

/// `1, 2, 4 or 8`; a long list is cut to its ends and the values around `near`:
/// `1, 2 … 9, 10, 12, 15 … 360 or 720`.
fn one_of(values: &[u64], near: u64) -> String {
    let shown: Vec<String> = if values.len() <= 8 {
        values.iter().map(u64::to_string).collect()
    } else {
        let at = values.partition_point(|&v| v < near);
        let (from, to) = (at.saturating_sub(2), (at + 2).min(values.len()));
        let mut keep: Vec<usize> = vec![0, values.len() - 1];
        keep.extend(from..to);
        keep.sort_unstable();
        keep.dedup();
        let mut out = Vec::new();
        for (i, &k) in keep.iter().enumerate() {
            let s = values[k].to_string();
            if i > 0 && k > keep[i - 1] + 1 {
                out.push(format!("… {s}"));
            } else {
                out.push(s);
            }
        }
        out
    };
    match shown.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "nothing".into(),
    }
}

#[cfg(test)]
mod tests;
