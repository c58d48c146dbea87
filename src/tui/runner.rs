//! Runs what the screen's `update` asks for (`Cmd`) and hands each answer back as a message: the
//! export's write, the fit search, the presets read from disk, the model lookup off the UI thread.
//! `update` itself touches nothing outside the state, so it can be tested as a function.

use super::app::{App, Msg, PresetChoice};
use super::cmd::{Cmd, ExportError, Exported};
use super::lookup::Lookup;
use grpofit_core::config::export::write_atomically;
use grpofit_core::fastest::{Timing, fastest_in_place};
use grpofit_core::fit::{DEFAULT_HEADROOM, fit_in_place};
use grpofit_core::memory::estimate::Estimator;
use grpofit_core::resolve::Offline;
use std::collections::VecDeque;

/// The event loop's side of the screen: the lookup under way, and the fit search's memory of
/// step peaks (kept between fits, as the search revisits the same shapes).
#[derive(Default)]
pub struct Runner {
    lookup: Option<Lookup>,
    estimator: Estimator,
}

impl Runner {
    pub fn new() -> Runner {
        Runner::default()
    }

    /// Hands `msg` to `app`, runs the commands it answers with and hands their answers back in
    /// turn, until nothing is asked.
    pub fn dispatch(&mut self, app: &mut App, msg: Msg) {
        let mut queue = VecDeque::from([msg]);
        while let Some(msg) = queue.pop_front() {
            for cmd in app.update(msg) {
                queue.extend(self.run(cmd));
            }
        }
    }

    /// The lookup's news since the last call: what the Hub client said, then its answer once
    /// there is one (the loop hands them to `update` each frame).
    pub fn poll(&mut self) -> Vec<Msg> {
        let Some(lookup) = &self.lookup else {
            return Vec::new();
        };
        let said = lookup.notices();
        let mut news = Vec::new();
        if !said.is_empty() {
            news.push(Msg::HubSaid(said));
        }
        if let Some(answer) = lookup.poll() {
            let name = self.lookup.take().map(|l| l.name).unwrap_or_default();
            news.push(Msg::LookedUp { name, answer });
        }
        news
    }

    /// Whether a lookup is under way.
    pub fn looking_up(&self) -> bool {
        self.lookup.is_some()
    }

    /// Runs one command; its answer, if it has one now.
    fn run(&mut self, cmd: Cmd) -> Vec<Msg> {
        match cmd {
            Cmd::WriteExport {
                path,
                text,
                overwrite,
                then_quit,
                notes,
                source,
            } => {
                if let Some(Err(changed)) = source.as_ref().map(|s| s.unchanged()) {
                    let stale = ExportError::Stale {
                        path,
                        overwrite,
                        then_quit,
                        read: source.map(|s| s.path).unwrap_or_default(),
                        what: changed.what,
                        now: changed.now.map(Box::new),
                    };
                    return vec![Msg::Exported(Err(stale))];
                }
                let written = if !overwrite && path.exists() {
                    Err(ExportError::Exists { path, then_quit })
                } else {
                    write_atomically(&path, &text, overwrite)
                        .map(|()| Exported {
                            path,
                            then_quit,
                            notes,
                        })
                        .map_err(|e| ExportError::Failed(e.to_string()))
                };
                vec![Msg::Exported(written)]
            }
            Cmd::Fit { run, gpu } => {
                // the GPUs and sharding the screen shows are kept (its GPUs knob moves them)
                vec![Msg::Fitted(fit_in_place(
                    &run,
                    gpu,
                    DEFAULT_HEADROOM,
                    &mut self.estimator,
                ))]
            }
            Cmd::Fastest {
                run,
                gpu,
                speed,
                keys,
                eff,
            } => {
                let timing = Timing {
                    gpu: &speed,
                    keys: &keys,
                    eff: &eff,
                };
                let found =
                    fastest_in_place(&run, gpu, DEFAULT_HEADROOM, &timing, &mut self.estimator);
                vec![Msg::Fastest(found.map(Box::new))]
            }
            Cmd::LookUp {
                name,
                cache,
                access,
            } => {
                let lookup = Lookup::start(name, cache, access);
                let started = lookup.started;
                self.lookup = Some(lookup);
                vec![Msg::LookingUp { started }]
            }
            Cmd::CancelLookUp => match self.lookup.take() {
                Some(lookup) => vec![Msg::HubSaid(lookup.notices())],
                None => Vec::new(),
            },
            Cmd::ListPresets => vec![Msg::PresetsListed(preset_choices())],
            Cmd::LoadPreset { name, source } => {
                let file = source
                    .load(&name, &Offline::from_env())
                    .map(Box::new)
                    .map_err(|e| e.to_string());
                vec![Msg::PresetLoaded { name, file }]
            }
            Cmd::Reload { path } => {
                let file = grpofit_core::config::load(&path, &Offline::from_env())
                    .map(Box::new)
                    .map_err(|e| e.to_string());
                vec![Msg::Reloaded { path, file }]
            }
        }
    }
}

/// The presets, each read once to show its model and capacity.
fn preset_choices() -> Vec<PresetChoice> {
    crate::presets::shipped()
        .list()
        .into_iter()
        .map(|(name, source)| {
            let (model, capacity) = match source.load(&name, &Offline::from_env()) {
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
