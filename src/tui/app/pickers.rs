//! The model and preset pickers, and the model look-up off the UI thread (the loop runs it:
//! `Cmd::LookUp`).

use super::*;
use crate::hub::{self};
use crate::tui::lookup::Answer;
use grpofit_core::arch::catalog;
use ratatui::crossterm::event::{KeyCode, KeyEvent};

impl App {
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
    pub(super) fn picker_page(&self) -> usize {
        self.drawn.as_ref().map_or(1, |d| d.picker_rows.max(1))
    }

    pub(super) fn models_key(
        &mut self,
        mut filter: String,
        selected: usize,
        typing: bool,
        key: KeyEvent,
    ) {
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

    /// Asks the loop to look a name the catalog lacks up off the UI thread: the cache, then the
    /// Hub.
    pub(super) fn look_up(&mut self, name: String) {
        self.ask(Cmd::LookUp {
            name: name.clone(),
            cache: self.hub_cache.clone(),
            access: self.hub.clone(),
        });
        self.lookup_notice = None;
        self.mode = Mode::Fetching { name };
    }

    /// The Hub client's notices: the latest on the status line while the lookup runs, all of
    /// them kept for standard error once the screen is closed (`App::notices`).
    pub(super) fn hub_said(&mut self, said: Vec<String>) {
        if let Some(last) = said.last() {
            self.lookup_notice = Some(last.trim_start_matches("grpofit: ").to_string());
        }
        self.notices.extend(said);
    }

    pub(super) fn looked_up(&mut self, name: String, answer: Answer) {
        match answer {
            Ok(Some(resolved)) => {
                let source = resolved.source.to_string();
                let stored = grpofit_core::config::stored_weights_of(&resolved);
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

    pub(super) fn presets_key(
        &mut self,
        selected: usize,
        choices: Vec<PresetChoice>,
        key: KeyEvent,
    ) {
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
                self.ask(Cmd::LoadPreset {
                    name: choice.name.clone(),
                    source: choice.source.clone(),
                });
            }
            _ => {}
        }
    }

    /// The preset picked, loaded by the loop: the whole state takes it (undo brings the old one
    /// back), and its capacity when no GPU or `--gpu-mem` gave one.
    pub(super) fn preset_loaded(&mut self, name: String, file: Result<Box<RunFile>, String>) {
        let said = format!("preset {name} loaded");
        self.adopt(file, &format!("the {name} preset's gpu_memory"), said);
    }

    /// A run file loaded (a preset, or the file read again): the screen starts from it.
    pub(super) fn adopt(&mut self, file: Result<Box<RunFile>, String>, name: &str, said: String) {
        match file {
            Ok(file) => {
                let file = *file;
                let take_capacity = !self.gpu.capacity_from_user && self.gpu.live.is_none();
                self.take_time_keys(&file.time);
                self.change_all(|s| {
                    s.lock = file.lock_effective_batch;
                    s.model_config = file.model_config.clone();
                    // a preset's export starts from it: its own file, or none
                    s.source = file.source.clone();
                    if let Some(bytes) = file.gpu_memory.filter(|_| take_capacity) {
                        s.capacity = bytes;
                        s.gpu_name = name.to_string();
                    }
                    s.run = file.run;
                    s.target_batch = s.run.effective_batch();
                });
                self.message = Some(said);
            }
            Err(e) => self.message = Some(e),
        }
    }
}
