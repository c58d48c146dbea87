//! The interactive screen's state and its one `update` function (keys in, state out).

use super::follow::Following;
use super::keymap::{self, Action};
use super::lookup::{Answer, Lookup};
use super::theme::Theme;
use super::view;
use crate::config::RunFile;
use crate::config::export::{ExportContext, write_atomically};
use crate::config::source::{Format, text_for};
use crate::gpu::GpuInfo;
use crate::hub::{self, cache, online};
use crate::model::adjust::{apply_knob, exact_values, step_knob};
use crate::model::catalog;
use crate::model::estimate::{Estimate, Estimator, GpuBudget};
use crate::model::fit::{DEFAULT_HEADROOM, FitOutcome, fit};
use crate::model::fit::{StepDown, step_downs};
use crate::model::knobs::Knob;
use crate::model::rules;
use crate::model::run::{Checkpointing, Optimizer, Quant, RunConfig, Stack};
use crate::model::units::format_size;
use crate::presets;
use crate::tail::Change;
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use std::path::PathBuf;

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
    /// a typed model name being looked up off the UI thread (`App::lookup`); Esc cancels
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

#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    /// a new NVML reading (or why there is none)
    Gpu(Result<GpuInfo, String>),
    /// the terminal's size at the last draw (columns, rows)
    Resize(u16, u16),
    /// a click, a drag or the wheel (unless `--no-mouse`)
    Mouse(MouseEvent),
    /// what a look at the followed run log found (`--follow`)
    Log(Change),
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
    source: Option<crate::config::source::SourceFile>,
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
    pub message: Option<String>,
    pub quit: bool,
    pub theme: Theme,
    pub export_dir: PathBuf,
    /// the terminal's size at the last draw; `None` before the first
    pub size: Option<(u16, u16)>,
    /// the estimate pinned with `x`, the baseline the bar and the legend compare against; kept
    /// outside the undo history, so undo never loses it
    pub pinned: Option<Estimate>,
    model_config: Option<PathBuf>,
    /// the user's file the run was read from, which the export edits in place
    source: Option<crate::config::source::SourceFile>,
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
    pub hub: online::Access,
    pub hub_cache: Option<PathBuf>,
    /// the lookup under way (`Mode::Fetching`)
    pub lookup: Option<Lookup>,
    /// the live run the screen follows (`--follow LOG`)
    pub follow: Option<Following>,
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
        let mut app = App {
            run: file.run,
            gpu,
            focus: 0,
            mode: Mode::Normal,
            estimate,
            step_downs: Vec::new(),
            lock: file.lock_effective_batch,
            target_batch,
            message: None,
            quit: false,
            theme,
            export_dir,
            size: None,
            pinned: None,
            model_config: file.model_config,
            source: file.source,
            undo: Vec::new(),
            exported,
            gesture: None,
            spread_shown: false,
            estimator,
            hub: online::current(),
            hub_cache: cache::cache_dir(),
            lookup: None,
            follow: None,
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
            .collect()
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
        self.size.is_some_and(|(w, h)| view::too_small(w, h))
    }

    /// Whether the run, the lock or the model's config.json differ from what was last exported
    /// (or loaded at start).
    pub fn unsaved(&self) -> bool {
        self.run != self.exported.run
            || self.lock != self.exported.lock
            || self.model_config != self.exported.model_config
    }

    pub fn update(&mut self, msg: Msg) {
        match msg {
            Msg::Gpu(reading) => self.gpu_reading(reading),
            Msg::Resize(w, h) => self.size = Some((w, h)),
            Msg::Log(change) => {
                if let Some(f) = self.follow.as_mut() {
                    f.take(change);
                }
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
            Mode::Help { .. } | Mode::ConfirmQuit | Mode::ConfirmOverwrite { .. } => true,
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
                let (w, h) = self.size.unwrap_or((80, 24));
                let max = view::help_max_scroll(self, w, h);
                let page = view::help_rows(self, w, h).max(1);
                self.mode = match list_nav(&key, scroll, max + 1, page, true) {
                    Some(scroll) => Mode::Help { scroll },
                    None => Mode::Normal,
                };
            }
            Mode::Entry { knob, text, .. } => self.entry_key(knob, text, key),
            Mode::Models {
                filter,
                selected,
                typing,
            } => self.models_key(filter, selected, typing, key),
            Mode::Presets { selected, choices } => self.presets_key(selected, choices, key),
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
                    self.lookup = None;
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

    fn act(&mut self, action: Action) {
        let knob = self.focused();
        match action {
            Action::NextKnob => self.focus = (self.focus + 1) % self.knobs().len(),
            Action::PrevKnob => {
                let n = self.knobs().len();
                self.focus = (self.focus + n - 1) % n
            }
            Action::Up | Action::Down | Action::UpCoarse | Action::DownCoarse => {
                let up = matches!(action, Action::Up | Action::UpCoarse);
                let coarse = matches!(action, Action::UpCoarse | Action::DownCoarse);
                let keep = self.lock.then_some(self.target_batch);
                match step_knob(&self.run, knob, up, coarse, keep) {
                    Some(v) if Some(v) == knob.get(&self.run) => {
                        let end = if up { "largest" } else { "smallest" };
                        self.message = Some(
                            match keep.and_then(|t| exact_values(knob, t, &self.run)) {
                                Some(_) => format!(
                                    "{knob} {} is the {end} that keeps the locked batch {} (b unlocks)",
                                    knob.show(v),
                                    self.target_batch
                                ),
                                None => {
                                    format!("{knob} is at its {end} step: Enter types any value")
                                }
                            },
                        );
                    }
                    Some(v) => {
                        self.set_knob(knob, v);
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
                    self.restore(previous);
                    self.recompute();
                }
                None => self.message = Some("nothing to undo".into()),
            },
            Action::ToggleLock => {
                self.change_all(|s| {
                    s.lock = !s.lock;
                    s.target_batch = s.run.effective_batch();
                });
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
            Action::CycleEngine => {
                self.spread_shown = true;
                // past an engine the rules refuse for this run (Unsloth's vLLM under FSDP2)
                let next = self.run.spread.next_engine();
                let mut trial = self.run.clone();
                trial.spread = next;
                let next = if rules::validate(&trial).is_ok() {
                    next
                } else {
                    next.next_engine()
                };
                _ = self.change(|r| r.spread = next);
            }
            Action::CycleZeroStage => {
                self.spread_shown = true;
                match self.run.spread.next_stage() {
                    Some(next) => _ = self.change(|r| r.spread = next),
                    None => {
                        self.message =
                            Some("DDP has no ZeRO stages: d moves to deepspeed or fsdp".into())
                    }
                }
            }
            Action::PickModel => {
                let selected = Self::model_matches("")
                    .iter()
                    .position(|id| *id == self.run.model_name)
                    .unwrap_or(0);
                self.mode = Mode::Models {
                    filter: String::new(),
                    selected,
                    typing: true,
                }
            }
            Action::PickPreset => {
                self.mode = Mode::Presets {
                    selected: 0,
                    choices: preset_choices(),
                }
            }
            Action::Export => self.export(false),
            Action::Fit => self.apply_fit(),
            Action::TogglePin => {
                self.message = Some(match self.pinned.take() {
                    Some(_) => "unpinned".into(),
                    None => {
                        let total = format_size(self.estimate.total_bytes);
                        self.pinned = Some(self.estimate.clone());
                        format!(
                            "pinned at {total}: ◇ marks it, the legend shows changes since (x unpins)"
                        )
                    }
                });
            }
            Action::Help => self.mode = Mode::Help { scroll: 0 },
            Action::Quit => self.request_quit(),
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

    /// The mouse: a click on a knob focuses it, a click or a drag on its track sets it there,
    /// the wheel steps the knob under it (or the focused one); in help and the pickers the
    /// wheel scrolls.
    fn mouse(&mut self, m: MouseEvent) {
        let wheel = match m.kind {
            MouseEventKind::ScrollUp => Some(true),
            MouseEventKind::ScrollDown => Some(false),
            _ => None,
        };
        if !matches!(self.mode, Mode::Normal) {
            // the wheel moves what is open as ↑/↓ would; clicks are for the main view
            if let Some(up) = wheel
                && matches!(
                    self.mode,
                    Mode::Help { .. } | Mode::Models { .. } | Mode::Presets { .. }
                )
            {
                let code = if up { KeyCode::Up } else { KeyCode::Down };
                self.key(KeyEvent::new(code, KeyModifiers::NONE));
            }
            return;
        }
        let Some((w, h)) = self.size else {
            return;
        };
        let at = ratatui::layout::Position::new(m.column, m.row);
        let sliders = view::areas(self, ratatui::layout::Rect::new(0, 0, w, h)).sliders;
        let rows = view::knob_rows(self, sliders);
        let hit = rows
            .iter()
            .find(|(_, cells)| cells.iter().any(|c| c.contains(at)))
            .cloned();
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                self.end_gesture();
                if let Some((i, cells)) = hit {
                    self.focus = i;
                    self.message = None;
                    if cells[1].contains(at) {
                        self.gesture = Some(self.snapshot());
                        self.set_from_track(cells[1], m.column);
                    }
                }
            }
            MouseEventKind::Drag(MouseButton::Left) if self.gesture.is_some() => {
                // the drag follows the knob it started on, wherever the pointer goes
                if let Some((_, cells)) = rows.iter().find(|(i, _)| *i == self.focus) {
                    self.set_from_track(cells[1], m.column);
                }
            }
            MouseEventKind::Up(_) => self.end_gesture(),
            _ if wheel.is_some() => {
                self.end_gesture();
                if let Some((i, _)) = hit {
                    self.focus = i;
                }
                self.message = None;
                self.act(if wheel == Some(true) {
                    Action::Up
                } else {
                    Action::Down
                });
            }
            _ => {}
        }
    }

    /// Sets the focused knob to the rung of its ladder at `column` on its `track` (the value
    /// that keeps the locked batch nearest to it, when the lock binds the knob).
    fn set_from_track(&mut self, track: ratatui::layout::Rect, column: u16) {
        let knob = self.focused();
        let Some(current) = knob.get(&self.run) else {
            self.message = Some("no vLLM on this GPU: turn use_vllm on in the run file".into());
            return;
        };
        let ladder = knob.ladder();
        let x = column.clamp(track.x, track.right().saturating_sub(1)) - track.x;
        let span = track.width.saturating_sub(1).max(1) as f64;
        let rung = ((x as f64 / span) * (ladder.len() - 1) as f64).round() as usize;
        let mut value = ladder[rung.min(ladder.len() - 1)];
        let keep = self.lock.then_some(self.target_batch);
        if let Some(values) = keep.and_then(|t| exact_values(knob, t, &self.run)) {
            let distance = |v: u64| ((v as f64).ln() - (value as f64).ln()).abs();
            if let Some(nearest) = values
                .iter()
                .copied()
                .min_by(|a, b| distance(*a).total_cmp(&distance(*b)))
            {
                value = nearest;
            }
        }
        if value != current {
            self.set_knob(knob, value);
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

    /// Catalog ids matching the filter: every word of it, in any order, case-insensitive
    /// (`qwen3 8b` finds `Qwen/Qwen3-8B`).
    pub fn model_matches(filter: &str) -> Vec<&'static str> {
        let words: Vec<String> = filter
            .split_whitespace()
            .map(|w| w.to_ascii_lowercase())
            .collect();
        catalog::ids()
            .filter(|id| {
                let id = id.to_ascii_lowercase();
                words.iter().all(|w| id.contains(w.as_str()))
            })
            .collect()
    }

    /// Rows a picker's list shows at the last drawn size, for PgUp/PgDn.
    fn picker_page(&self) -> usize {
        let (w, h) = self.size.unwrap_or((80, 24));
        view::picker_rows(&self.mode, w, h).max(1)
    }

    fn models_key(&mut self, mut filter: String, selected: usize, typing: bool, key: KeyEvent) {
        let matches = Self::model_matches(&filter);
        if let Some(selected) = list_nav(&key, selected, matches.len(), self.picker_page(), !typing)
        {
            self.mode = Mode::Models {
                filter,
                selected,
                typing,
            };
            return;
        }
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Tab | KeyCode::BackTab => {
                self.mode = Mode::Models {
                    filter,
                    selected,
                    typing: !typing,
                }
            }
            KeyCode::Char('/') if !typing => {
                self.mode = Mode::Models {
                    filter,
                    selected,
                    typing: true,
                }
            }
            KeyCode::Enter => {
                self.mode = Mode::Normal;
                if matches.is_empty() && !filter.trim().is_empty() {
                    self.look_up(filter.trim().to_string());
                } else if let Some(id) = matches.get(selected) {
                    let found = catalog::find(id).map(|f| f.arch);
                    if let Some(arch) = found {
                        self.change_all(|s| {
                            s.model_config = None;
                            s.run.arch = arch;
                            s.run.model_name = id.to_string();
                        });
                    }
                }
            }
            KeyCode::Backspace => {
                filter.pop();
                self.mode = Mode::Models {
                    filter,
                    selected: 0,
                    typing: true,
                };
            }
            KeyCode::Char(c) if typing && filter.len() < 40 && !c.is_control() => {
                filter.push(c);
                self.mode = Mode::Models {
                    filter,
                    selected: 0,
                    typing,
                };
            }
            _ => {}
        }
    }

    /// Looks a name the catalog lacks up off the UI thread: the cache, then the Hub.
    fn look_up(&mut self, name: String) {
        self.lookup = Some(Lookup::start(
            name.clone(),
            self.hub_cache.clone(),
            self.hub.clone(),
        ));
        self.mode = Mode::Fetching { name };
    }

    /// Takes the lookup's answer when it has come (the event loop calls this each frame).
    pub fn poll_lookup(&mut self) {
        let Some(answer) = self.lookup.as_ref().and_then(Lookup::poll) else {
            return;
        };
        let name = self.lookup.take().map(|l| l.name).unwrap_or_default();
        if matches!(self.mode, Mode::Fetching { .. }) {
            self.mode = Mode::Normal;
        }
        self.looked_up(name, answer);
    }

    fn looked_up(&mut self, name: String, answer: Answer) {
        match answer {
            Ok(Some(resolved)) => {
                let source = resolved.source.to_string();
                let stored = crate::config::stored_weights_of(&resolved);
                let applied = self.change_all(|s| {
                    s.model_config = None;
                    s.run.arch = resolved.arch;
                    s.run.model_name = name;
                    s.run.stored_weights = stored;
                });
                if applied {
                    self.message = Some(format!("model: {source}"));
                }
            }
            Ok(None) => {
                let hub = hub::not_on_the_hub(&name, &self.hub)
                    .map_or_else(String::new, |why| format!("; {why}"));
                self.message = Some(format!(
                    "unknown model {name}: not in the Hugging Face cache nor in the catalog{hub}"
                ));
            }
            Err(e) => self.message = Some(format!("{name}: {e}")),
        }
    }

    fn presets_key(&mut self, selected: usize, choices: Vec<PresetChoice>, key: KeyEvent) {
        if let Some(selected) = list_nav(&key, selected, choices.len(), self.picker_page(), true) {
            self.mode = Mode::Presets { selected, choices };
            return;
        }
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Enter => {
                self.mode = Mode::Normal;
                let Some(choice) = choices.get(selected) else {
                    return;
                };
                let name = choice.name.clone();
                match choice.source.load(&name) {
                    Ok(file) => {
                        let take_capacity = !self.gpu.capacity_from_user && self.gpu.live.is_none();
                        self.change_all(|s| {
                            s.lock = file.lock_effective_batch;
                            s.model_config = file.model_config.clone();
                            // a preset's export starts from it: its own file, or none
                            s.source = file.source.clone();
                            if let Some(bytes) = file.gpu_memory.filter(|_| take_capacity) {
                                s.capacity = bytes;
                                s.gpu_name = format!("the {name} preset's gpu_memory");
                            }
                            s.run = file.run;
                            s.target_batch = s.run.effective_batch();
                        });
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
        self.message = Some(
            match fit(&self.run, gpu, DEFAULT_HEADROOM, &mut self.estimator) {
                FitOutcome::AlreadyFits { .. } => {
                    format!("already fits with {}% headroom", DEFAULT_HEADROOM * 100.0)
                }
                FitOutcome::Fitted { run, changes, .. } => {
                    let said: Vec<String> = changes
                        .iter()
                        .map(|c| format!("{} {} → {}", c.key, c.from, c.to))
                        .collect();
                    self.change_all(|s| {
                        s.run = *run;
                        s.target_batch = s.run.effective_batch();
                    });
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
            },
        );
    }

    /// Writes the run to `vramfit-<model>.toml`, asking first when the file exists; quits after
    /// with `then_quit` (the export quitting asked for).
    fn export(&mut self, then_quit: bool) {
        let name = self
            .run
            .model_name
            .rsplit('/')
            .next()
            .unwrap_or("run")
            .to_ascii_lowercase();
        let format = self.source.as_ref().map_or(Format::Toml, |s| s.format);
        let path = self
            .export_dir
            .join(format!("vramfit-{name}.{}", format.extension()));
        if path.exists() {
            self.mode = Mode::ConfirmOverwrite { path, then_quit };
        } else {
            self.write_export(path, false, then_quit);
        }
    }

    fn write_export(&mut self, path: PathBuf, overwrite: bool, then_quit: bool) {
        let gpu_line = format!("{} {}", self.gpu.name, format_size(self.gpu.capacity));
        let ctx = ExportContext {
            gpu: &gpu_line,
            gpu_memory: Some(self.gpu.capacity),
            model_config: self.model_config.as_deref(),
            lock_effective_batch: self.lock,
            estimate: Some(&self.estimate),
        };
        let mut notes = Vec::new();
        let text = text_for(&path, self.source.as_ref(), &self.run, &ctx, &mut notes);
        match text.and_then(|text| write_atomically(&path, &text, overwrite)) {
            Ok(()) => {
                let notes = notes.iter().map(|n| format!("; {n}")).collect::<String>();
                self.message = Some(format!("wrote {}{notes}", path.display()));
                self.exported = self.snapshot();
                self.quit = then_quit;
            }
            // the error is shown and the screen stays, whether or not quitting asked for it
            Err(e) => self.message = Some(e),
        }
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
        self.spread_shown |= is_spread(&self.run);
        let gpu = budget(&self.gpu);
        self.estimate = self.estimator.estimate(&self.run, gpu);
        self.step_downs = step_downs(&self.run, gpu, &mut self.estimator);
    }
}

/// Whether `run` uses more than one GPU in any way: several training processes, an engine
/// that shards, or `trl vllm-serve` on GPUs of its own.
fn is_spread(run: &RunConfig) -> bool {
    run.processes() > 1
        || run.spread.engine != crate::model::spread::Engine::Ddp
        || run.generation == crate::model::run::Generation::VllmServer
}

fn budget(gpu: &GpuState) -> GpuBudget {
    GpuBudget {
        capacity: gpu.capacity,
        used_by_others: 0,
        context: None,
    }
}

/// The presets, each read once to show its model and capacity.
fn preset_choices() -> Vec<PresetChoice> {
    presets::list()
        .into_iter()
        .map(|(name, source)| {
            let (model, capacity) = match source.load(&name) {
                Ok(file) => (file.run.model_name, file.gpu_memory),
                Err(e) => (format!("does not load: {e}"), None),
            };
            PresetChoice {
                name,
                source,
                model,
                capacity,
            }
        })
        .collect()
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
