//! What an action of the keymap does to the screen's state. The rules of what comes next (the
//! optimizer cycle, β when the reference pass is switched on, the engines a run can use) are the
//! core's (`grpofit_core::run::cycle`); this file only routes the actions to them.

use super::*;
use crate::tui::keymap::Action;
use grpofit_core::run::Stack;
use grpofit_core::run::adjust::{exact_values, refused_step, step_knob};
use grpofit_core::units::format_size;

impl App {
    pub(super) fn act(&mut self, action: Action) {
        match action {
            Action::NextKnob => self.focus = (self.focus + 1) % self.knobs().len(),
            Action::PrevKnob => {
                let n = self.knobs().len();
                self.focus = (self.focus + n - 1) % n
            }
            Action::Up | Action::Down | Action::UpCoarse | Action::DownCoarse => {
                let up = matches!(action, Action::Up | Action::UpCoarse);
                let coarse = matches!(action, Action::UpCoarse | Action::DownCoarse);
                self.step_focused(up, coarse);
            }
            Action::TypeValue => self.start_entry(),
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
            Action::ToggleStack
            | Action::CycleCheckpointing
            | Action::ToggleFourBit
            | Action::ToggleBeta
            | Action::CycleOptimizer => self.toggle(action),
            Action::CycleEngine | Action::CycleZeroStage => self.cycle_spread(action),
            Action::PickModel => self.open_models(),
            Action::PickPreset => self.ask(Cmd::ListPresets),
            Action::Export => self.export(false),
            Action::Fit => self.ask_fit(),
            Action::Fastest => self.ask_fastest(),
            Action::TogglePin => self.toggle_pin(),
            Action::Help => self.mode = Mode::Help { scroll: 0 },
            Action::Quit => self.request_quit(),
        }
    }

    /// One step (three when `coarse`) of the focused knob, keeping the locked batch; at the end
    /// of its ladder, says why it does not move.
    fn step_focused(&mut self, up: bool, coarse: bool) {
        let knob = self.focused();
        let keep = self.lock.then_some(self.target_batch);
        match step_knob(&self.run, knob, up, coarse, keep) {
            Some(v) if Some(v) == knob.get(&self.run) => {
                let end = if up { "largest" } else { "smallest" };
                let refused = refused_step(&self.run, knob, up, keep);
                let exact = keep.and_then(|t| exact_values(knob, t, &self.run));
                self.message = Some(match (refused, exact) {
                    // the ladder goes on, but a rule refuses the next rung: name the rule
                    (Some(why), _) => format!("{knob} stays {}: {why}", knob.show(v)),
                    (None, Some(_)) => format!(
                        "{knob} {} is the {end} that keeps the locked batch {} (b unlocks)",
                        knob.show(v),
                        self.target_batch
                    ),
                    (None, None) => format!("{knob} is at its {end} step: Enter types any value"),
                });
            }
            Some(v) => {
                self.set_knob(knob, v);
            }
            None => {
                self.message = Some("no vLLM on this GPU: turn use_vllm on in the run file".into())
            }
        }
    }

    /// Typing an exact value for the focused knob, starting from its value.
    fn start_entry(&mut self) {
        let knob = self.focused();
        let text = knob
            .get(&self.run)
            .map(|v| knob.show(v))
            .unwrap_or_default();
        self.mode = Mode::Entry {
            knob,
            text,
            error: None,
            selected: true,
        };
    }

    /// The settings a key switches or cycles: the stack, checkpointing, 4-bit weights, the
    /// reference pass, the optimizer.
    fn toggle(&mut self, action: Action) {
        _ = self.change(|r| match action {
            Action::ToggleStack => r.switch_stack(match r.stack {
                Stack::Trl => Stack::Unsloth,
                Stack::Unsloth => Stack::Trl,
            }),
            Action::CycleCheckpointing => r.checkpointing = r.checkpointing.next(r.stack),
            Action::ToggleFourBit => r.quant = r.quant.four_bit_toggled(),
            Action::ToggleBeta => r.toggle_reference(),
            Action::CycleOptimizer => r.optimizer = r.optimizer.next(),
            _ => {}
        });
    }

    /// The engine (d) or the ZeRO stage (z): the multi-GPU settings, shown once touched.
    fn cycle_spread(&mut self, action: Action) {
        self.spread_shown = true;
        if action == Action::CycleEngine {
            let next = self.run.next_engine();
            _ = self.change(|r| r.spread = next);
            return;
        }
        match self.run.spread.next_stage() {
            Some(next) => _ = self.change(|r| r.spread = next),
            None => {
                self.message = Some("DDP has no ZeRO stages: d moves to deepspeed or fsdp".into())
            }
        }
    }

    /// The model picker, on the run's model.
    fn open_models(&mut self) {
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

    /// Pins the estimate as a baseline, or unpins it.
    fn toggle_pin(&mut self) {
        self.message = Some(match self.pinned.take() {
            Some(_) => "unpinned".into(),
            None => {
                let total = format_size(self.estimate.total_bytes);
                self.pinned = Some(self.estimate.clone());
                format!("pinned at {total}: ◇ marks it, the legend shows changes since (x unpins)")
            }
        });
    }
}
