//! What the screen's `update` asks the event loop to do: the work that touches the world (a file
//! written, a folder read, the network) or takes a search, none of which `update` does itself.
//! The loop runs each command (`runner.rs`) and hands its result back to `update` as a message,
//! the way it hands back what `view::draw` drew.

use crate::hub::online::Access;
use grpofit_core::config::source::SourceFile;
use grpofit_core::hardware::GpuSpeed;
use grpofit_core::memory::estimate::GpuBudget;
use grpofit_core::presets::PresetSource;
use grpofit_core::run::RunConfig;
use grpofit_core::time::TimeKeys;
use std::path::PathBuf;

pub enum Cmd {
    /// Write the exported run file: `text` to `path`, replacing a file there only with
    /// `overwrite`. The answer is `Msg::Exported`.
    WriteExport {
        path: PathBuf,
        text: String,
        overwrite: bool,
        /// quit once it is written (the export quitting asked for)
        then_quit: bool,
        /// what the export left out or changed, said with the file's name once it is written
        notes: Vec<String>,
        /// the file the text was built from, as read: if it changed on disk since, nothing is
        /// written (the answer is `ExportError::Stale`)
        source: Option<Box<SourceFile>>,
    },
    /// Search the smallest change to `run` that fits `gpu`. The answer is `Msg::Fitted`.
    Fit { run: Box<RunConfig>, gpu: GpuBudget },
    /// Search the fastest run that fits `gpu`, moving only throughput knobs (`fit --fastest`'s
    /// search, timed on `speed` with the file's time `keys` and the efficiencies `eff`, learned
    /// or declared). The answer is `Msg::Fastest`.
    Fastest {
        run: Box<RunConfig>,
        gpu: GpuBudget,
        speed: Box<GpuSpeed>,
        keys: Box<TimeKeys>,
        eff: grpofit_core::time::Efficiencies,
    },
    /// Look a name the catalog lacks up off the UI thread: the Hugging Face `cache`, then the Hub
    /// as `access` allows. The answers are `Msg::LookingUp`, `Msg::HubSaid`, `Msg::LookedUp`.
    LookUp {
        name: String,
        cache: Option<PathBuf>,
        access: Access,
    },
    /// Drop the lookup under way (its answer then goes nowhere). What the Hub client said until
    /// then comes back as `Msg::HubSaid`.
    CancelLookUp,
    /// Read the presets, built-in and the user's, for the picker. The answer is
    /// `Msg::PresetsListed`.
    ListPresets,
    /// Load the preset picked. The answer is `Msg::PresetLoaded`.
    LoadPreset { name: String, source: PresetSource },
    /// Read the run file again (it changed on disk since the screen read it). The answer is
    /// `Msg::Reloaded`.
    Reload { path: PathBuf },
}

/// What became of a run file written by `Cmd::WriteExport`.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    pub path: PathBuf,
    pub then_quit: bool,
    pub notes: Vec<String>,
}

/// Why a run file was not written.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportError {
    /// a file is there and the export did not say to replace it: the screen asks
    Exists { path: PathBuf, then_quit: bool },
    /// the write failed: the message names the file
    Failed(String),
    /// the file the export is built from was saved again since it was read (`what` says how):
    /// nothing written; the screen offers to merge the tuned keys into `now`, its new text
    Stale {
        path: PathBuf,
        overwrite: bool,
        then_quit: bool,
        read: PathBuf,
        what: String,
        now: Option<Box<SourceFile>>,
    },
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cmd::WriteExport {
                path,
                overwrite,
                then_quit,
                ..
            } => f
                .debug_struct("WriteExport")
                .field("path", path)
                .field("overwrite", overwrite)
                .field("then_quit", then_quit)
                .finish_non_exhaustive(),
            Cmd::Fit { run, .. } => f
                .debug_struct("Fit")
                .field("model", &run.model_name)
                .finish(),
            Cmd::Fastest { run, .. } => f
                .debug_struct("Fastest")
                .field("model", &run.model_name)
                .finish(),
            Cmd::LookUp { name, .. } => f.debug_struct("LookUp").field("name", name).finish(),
            Cmd::CancelLookUp => f.write_str("CancelLookUp"),
            Cmd::ListPresets => f.write_str("ListPresets"),
            Cmd::LoadPreset { name, .. } => {
                f.debug_struct("LoadPreset").field("name", name).finish()
            }
            Cmd::Reload { path } => f.debug_struct("Reload").field("path", path).finish(),
        }
    }
}
