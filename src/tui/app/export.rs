//! Applying the fit, and exporting the run file. The search and the write are the loop's
//! (`Cmd::Fit`, `Cmd::WriteExport`); their answers come back here.

use super::*;
use grpofit_core::config::export::ExportContext;
use grpofit_core::config::relocate::model_config_at;
use grpofit_core::config::source::Format;
use grpofit_core::config::write_back::text_for;
use grpofit_core::fit::DEFAULT_HEADROOM;
use grpofit_core::units::format_size;
use std::path::PathBuf;

impl App {
    /// Asks the loop for the fit solver's answer on the run as it is (`Msg::Fitted` brings it).
    pub(super) fn ask_fit(&mut self) {
        let gpu = budget(&self.gpu);
        self.ask(Cmd::Fit {
            run: Box::new(self.run.clone()),
            gpu,
        });
    }

    /// `F`: the fastest run that fits with the GPUs the screen shows (`fastest_in_place`),
    /// searched by the loop on the screen's card; without a card there is nothing to time, and
    /// the status line says so.
    pub(super) fn ask_fastest(&mut self) {
        let speed = match &self.speed {
            Ok(s) => s.clone(),
            Err(why) => {
                self.message = Some(format!("fastest: not timed: {why}"));
                return;
            }
        };
        self.ask(Cmd::Fastest {
            run: Box::new(self.run.clone()),
            gpu: budget(&self.gpu),
            speed: Box::new(speed),
            keys: Box::new(self.time_keys.clone()),
            eff: self.efficiencies(),
        });
    }

    /// The fastest search's answer applied to the run (undo brings the old one back), its
    /// speed-up against the nearest fit on the status line.
    pub(super) fn fastest_found(&mut self, found: Option<Box<grpofit_core::fastest::Fastest>>) {
        let Some(found) = found else {
            self.message = Some(format!(
                "fastest: nothing fits with {}% headroom (f names the floors)",
                DEFAULT_HEADROOM * 100.0
            ));
            return;
        };
        let said: Vec<String> = found
            .changes
            .iter()
            .map(|c| format!("{} {} → {}", c.key, c.from, c.to))
            .collect();
        let before = self.step_time.as_ref().map(|t| t.seconds).ok();
        let run = found.run.clone();
        self.change_all(|s| {
            s.run = *run;
            s.target_batch = s.run.effective_batch();
        });
        let now = grpofit_core::time::seconds(found.step_time.seconds);
        let against = match before {
            Some(b) if found.nearest_seconds != b => format!(
                "; nearest fit {}, this run was {}",
                grpofit_core::time::seconds(found.nearest_seconds),
                grpofit_core::time::seconds(b)
            ),
            _ => format!(
                " against {}",
                grpofit_core::time::seconds(found.nearest_seconds)
            ),
        };
        self.message = Some(if said.is_empty() {
            format!("fastest: already the fastest that fits, step ≈ {now}")
        } else {
            format!(
                "fastest: ×{:.2}, step ≈ {now}{against}: {}",
                found.speedup,
                said.join(", ")
            )
        });
    }

    /// The fit solver's answer applied to the run (undo brings the old one back): a fit with the
    /// GPUs and sharding the screen shows (`fit_in_place`).
    pub(super) fn fitted(&mut self, outcome: FitOutcome) {
        self.message = Some(match outcome {
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
                let gpus = self.run.processes();
                format!(
                    "nothing on the grid fits on {gpus} GPU{}: it needs a {} GPU (the GPUs knob adds more)",
                    if gpus == 1 { "" } else { "s" },
                    format_size(smallest_gpu_bytes)
                )
            }
        });
    }

    /// Writes the run to `grpofit-<model>.toml`, asking first when the file exists (the loop
    /// answers `ExportError::Exists`); quits after with `then_quit` (the export quitting asked
    /// for).
    pub(super) fn export(&mut self, then_quit: bool) {
        // a run no trainer takes as set is not written: the rule says why
        if let Err(broken) = grpofit_core::run::rules::validate(&self.run)
            .and_then(|()| grpofit_core::run::rules::whole_groups(&self.run))
        {
            self.message = Some(format!("not exported: {}", broken.message));
            return;
        }
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
            .join(format!("grpofit-{name}.{}", format.extension()));
        self.write_export(path, false, then_quit);
    }

    /// The run file's text for `path`, handed to the loop to write.
    pub(super) fn write_export(&mut self, path: PathBuf, overwrite: bool, then_quit: bool) {
        let gpu_line = format!("{} {}", self.gpu.name, format_size(self.gpu.capacity));
        // the config.json named from the written file's folder (the screen's folder is the
        // working folder the run was read from)
        let model_config = self.model_config.as_deref().map(|resolved| {
            model_config_at(&path, &self.export_dir, self.source.as_ref(), resolved)
        });
        let ctx = ExportContext {
            gpu: &gpu_line,
            gpu_memory: Some(self.gpu.capacity),
            model_config: model_config.as_deref(),
            lock_effective_batch: self.lock,
            estimate: Some(&self.estimate),
            // the screen changes no time key: a file's stay as it wrote them (after an undo
            // past a preset, the preset's card is not the file's)
            time: Some(self.source.as_ref().map_or(&self.time_keys, |s| &s.time)),
        };
        let mut notes = Vec::new();
        match text_for(&path, self.source.as_ref(), &self.run, &ctx, &mut notes) {
            Ok(text) => self.ask(Cmd::WriteExport {
                path,
                text,
                overwrite,
                then_quit,
                notes,
                source: self.source.clone().map(Box::new),
            }),
            Err(e) => self.message = Some(e.to_string()),
        }
    }

    /// The answer to "the file read changed on disk": `m` writes the tuned keys into its new
    /// text (the write-back's checks then run on that text), `r` reads the file again (the
    /// screen's changes dropped), any other key writes nothing.
    pub(super) fn source_changed_key(&mut self, mode: Mode, key: KeyCode) {
        self.mode = Mode::Normal;
        let Mode::SourceChanged {
            path,
            overwrite,
            then_quit,
            read,
            now,
            ..
        } = mode
        else {
            return;
        };
        match (key, now) {
            (KeyCode::Char('m'), Some(now)) => {
                self.source = Some(*now);
                self.write_export(path, overwrite, then_quit);
            }
            (KeyCode::Char('r'), _) => self.ask(Cmd::Reload { path: read }),
            _ => {
                self.message = Some(format!(
                    "export cancelled: {} changed on disk, nothing written",
                    read.display()
                ))
            }
        }
    }

    /// What became of the export: written, a file there to ask about, or why not.
    pub(super) fn export_written(&mut self, written: Result<Exported, ExportError>) {
        match written {
            Ok(Exported {
                path,
                then_quit,
                notes,
            }) => {
                let notes = notes.iter().map(|n| format!("; {n}")).collect::<String>();
                let said = format!("wrote {}{notes}", path.display());
                if then_quit {
                    // the screen closes at once: the shell is told, once it is the shell's again
                    self.notices.push(said.clone());
                }
                self.message = Some(said);
                self.exported = self.snapshot();
                self.quit = then_quit;
            }
            Err(ExportError::Exists { path, then_quit }) => {
                self.mode = Mode::ConfirmOverwrite { path, then_quit }
            }
            // the error is shown and the screen stays, whether or not quitting asked for it
            Err(ExportError::Failed(e)) => self.message = Some(e),
            Err(ExportError::Stale {
                path,
                overwrite,
                then_quit,
                read,
                what,
                now,
            }) => {
                self.mode = Mode::SourceChanged {
                    path,
                    overwrite,
                    then_quit,
                    read,
                    what,
                    now,
                }
            }
        }
    }
}
