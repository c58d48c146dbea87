//! `update` as a function: a message in, the state changed and the commands out. Nothing here
//! runs a command, so a test that sees a file written or a search run would catch `update`
//! doing it itself.

use super::*;
use crate::tui::cmd::{Cmd, ExportError, Exported};
use grpofit_core::resolve::Offline;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::Path;

/// The 24gb preset's screen on a fixed 24 GiB GPU, exporting into `dir`.
fn app_in(dir: &Path) -> App {
    let text = crate::presets::built_in("24gb").unwrap();
    let file = grpofit_core::config::parse(text, "test", None, &Offline::from_env()).unwrap();
    let gpu = GpuState {
        capacity: 24 << 30,
        capacity_from_user: true,
        name: "Test GPU".into(),
        live: None,
        unavailable: None,
    };
    App::new(file, gpu, Theme::mono(), dir.to_path_buf())
}

fn press(app: &mut App, code: KeyCode) -> Vec<Cmd> {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        assert!(press(app, KeyCode::Char(c)).is_empty(), "{c}");
    }
}

fn files_in(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn s_asks_for_the_export_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path());
    let cmds = press(&mut a, KeyCode::Char('s'));
    let [
        Cmd::WriteExport {
            path,
            text,
            overwrite,
            then_quit,
            ..
        },
    ] = cmds.as_slice()
    else {
        panic!("{cmds:?}");
    };
    assert_eq!(
        path,
        &dir.path().join("grpofit-qwen2.5-3b-instruct.toml"),
        "{cmds:?}"
    );
    assert!(!overwrite && !then_quit);
    assert!(text.contains("unsloth/Qwen2.5-3B-Instruct"), "{text}");
    assert!(files_in(dir.path()).is_empty(), "update wrote a file");
    assert_eq!((&a.mode, a.message.as_deref()), (&Mode::Normal, None));
}

#[test]
fn a_written_export_is_said_and_counts_as_saved() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path());
    assert!(press(&mut a, KeyCode::Right).is_empty());
    assert!(a.unsaved());
    let path = dir.path().join("run.toml");
    let written = Exported {
        path: path.clone(),
        then_quit: false,
        notes: vec!["a note".into()],
    };
    assert!(a.update(Msg::Exported(Ok(written))).is_empty());
    let said = format!("wrote {}; a note", path.display());
    assert_eq!(a.message.as_deref(), Some(said.as_str()));
    assert!(!a.unsaved() && !a.quit);
}

#[test]
fn a_failed_write_is_said_on_the_status_line_and_the_screen_stays() {
    let mut a = app_in(Path::new("."));
    assert!(press(&mut a, KeyCode::Right).is_empty());
    let failed = ExportError::Failed("cannot write ./grpofit-x.toml: denied".into());
    assert!(a.update(Msg::Exported(Err(failed))).is_empty());
    assert_eq!(
        a.message.as_deref(),
        Some("cannot write ./grpofit-x.toml: denied")
    );
    assert!(a.unsaved() && !a.quit);
    assert_eq!(a.mode, Mode::Normal);
}

#[test]
fn a_file_there_is_asked_about_and_y_asks_to_overwrite_it() {
    let mut a = app_in(Path::new("."));
    let path = std::path::PathBuf::from("./grpofit-x.toml");
    let there = ExportError::Exists {
        path: path.clone(),
        then_quit: true,
    };
    assert!(a.update(Msg::Exported(Err(there))).is_empty());
    assert_eq!(
        a.mode,
        Mode::ConfirmOverwrite {
            path: path.clone(),
            then_quit: true
        }
    );
    let cmds = press(&mut a, KeyCode::Char('y'));
    assert!(
        matches!(cmds.as_slice(), [Cmd::WriteExport { path: p, overwrite: true, then_quit: true, .. }] if *p == path),
        "{cmds:?}"
    );
    assert!(!a.quit, "quits only once written");
}

#[test]
fn quitting_with_changes_exports_first_and_quits_once_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path());
    assert!(press(&mut a, KeyCode::Right).is_empty());
    assert!(press(&mut a, KeyCode::Char('q')).is_empty());
    assert_eq!(a.mode, Mode::ConfirmQuit);
    let cmds = press(&mut a, KeyCode::Char('y'));
    let [
        Cmd::WriteExport {
            path,
            then_quit: true,
            notes,
            ..
        },
    ] = cmds.as_slice()
    else {
        panic!("{cmds:?}");
    };
    assert!(!a.quit && files_in(dir.path()).is_empty());
    let written = Exported {
        path: path.clone(),
        then_quit: true,
        notes: notes.clone(),
    };
    assert!(a.update(Msg::Exported(Ok(written))).is_empty());
    assert!(a.quit);
    // the screen closes at once: the file written is named on standard error after it
    let said = format!("wrote {}", path.display());
    assert!(
        a.notices.iter().any(|n| n.starts_with(&said)),
        "{:?}",
        a.notices
    );
}

#[test]
fn f_asks_for_the_fit_and_changes_nothing_until_it_answers() {
    let mut a = app_in(Path::new("."));
    let run = a.run.clone();
    let cmds = press(&mut a, KeyCode::Char('f'));
    assert!(
        matches!(cmds.as_slice(), [Cmd::Fit { run: asked, gpu }] if **asked == run && gpu.capacity == 24 << 30),
        "{cmds:?}"
    );
    assert_eq!((&a.run, a.message.as_deref()), (&run, None));
    // the answer the loop would hand back: applied, and undone by u
    let smaller = GpuBudget {
        capacity: 8 << 30,
        used_by_others: 0,
        context: None,
    };
    let outcome = grpofit_core::fit::fit(
        &run,
        smaller,
        grpofit_core::fit::DEFAULT_HEADROOM,
        &mut Estimator::new(),
    );
    assert!(matches!(outcome, FitOutcome::Fitted { .. }), "{outcome:?}");
    assert!(a.update(Msg::Fitted(outcome)).is_empty());
    assert_ne!(a.run, run);
    assert!(a.message.as_deref().unwrap().starts_with("fit: "));
    assert!(press(&mut a, KeyCode::Char('u')).is_empty());
    assert_eq!(a.run, run);
}

#[test]
fn a_name_the_catalog_lacks_asks_for_a_lookup_and_esc_cancels_it() {
    let mut a = app_in(Path::new("."));
    assert!(press(&mut a, KeyCode::Char('m')).is_empty());
    typed(&mut a, "org/nowhere");
    let cmds = press(&mut a, KeyCode::Enter);
    assert!(
        matches!(cmds.as_slice(), [Cmd::LookUp { name, .. }] if name == "org/nowhere"),
        "{cmds:?}"
    );
    assert_eq!(
        a.mode,
        Mode::Fetching {
            name: "org/nowhere".into()
        }
    );
    let cmds = press(&mut a, KeyCode::Esc);
    assert!(matches!(cmds.as_slice(), [Cmd::CancelLookUp]), "{cmds:?}");
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(
        a.message.as_deref(),
        Some("looking up org/nowhere: cancelled")
    );
}

#[test]
fn the_lookups_answer_and_the_hubs_words_come_back_as_messages() {
    let mut a = app_in(Path::new("."));
    typed(&mut a, "m");
    typed(&mut a, "org/nowhere");
    assert_eq!(press(&mut a, KeyCode::Enter).len(), 1);
    let said = vec!["grpofit: fetching config.json of org/nowhere".to_string()];
    assert!(a.update(Msg::HubSaid(said.clone())).is_empty());
    assert_eq!(
        a.lookup_notice.as_deref(),
        Some("fetching config.json of org/nowhere")
    );
    let answer = Msg::LookedUp {
        name: "org/nowhere".into(),
        answer: Err("the Hub answered 500".into()),
    };
    assert!(a.update(answer).is_empty());
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(
        a.message.as_deref(),
        Some("org/nowhere: the Hub answered 500")
    );
    assert_eq!(a.notices, said);
}

#[test]
fn p_asks_for_the_presets_and_enter_for_the_one_picked() {
    let mut a = app_in(Path::new("."));
    let cmds = press(&mut a, KeyCode::Char('p'));
    assert!(matches!(cmds.as_slice(), [Cmd::ListPresets]), "{cmds:?}");
    assert_eq!(a.mode, Mode::Normal);
    let choice = PresetChoice {
        name: "12gb".into(),
        source: presets::PresetSource::BuiltIn(crate::presets::built_in("12gb").unwrap()),
        model: "unsloth/Qwen2.5-1.5B-Instruct".into(),
        capacity: Some(12 << 30),
    };
    assert!(a.update(Msg::PresetsListed(vec![choice])).is_empty());
    assert!(matches!(a.mode, Mode::Presets { selected: 0, .. }));
    let cmds = press(&mut a, KeyCode::Enter);
    assert!(
        matches!(cmds.as_slice(), [Cmd::LoadPreset { name, .. }] if name == "12gb"),
        "{cmds:?}"
    );
    let failed = Msg::PresetLoaded {
        name: "12gb".into(),
        file: Err("12gb: line 3: bad".into()),
    };
    assert!(a.update(failed).is_empty());
    assert_eq!(a.message.as_deref(), Some("12gb: line 3: bad"));
}

/// The screen's export onto the user's own file changes no time key: a card that is not the
/// file's (a preset's, left by an undo past it) is not written into the file.
#[test]
fn an_export_in_place_keeps_the_files_time_keys() {
    let dir = tempfile::tempdir().unwrap();
    let text = crate::presets::built_in("24gb")
        .unwrap()
        .replace("gpu = \"RTX 4090\"\n", "");
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, &text).unwrap();
    let file = grpofit_core::config::load(&path, &Offline::from_env()).unwrap();
    assert_eq!(file.time.gpu, None);
    let gpu = GpuState {
        capacity: 24 << 30,
        capacity_from_user: true,
        name: "Test GPU".into(),
        live: None,
        unavailable: None,
    };
    let mut a = App::new(file, gpu, Theme::mono(), dir.path().to_path_buf());
    a.time_keys.gpu = Some("RTX 4090".into());
    let cmds = press(&mut a, KeyCode::Char('s'));
    let [Cmd::WriteExport { text: written, .. }] = cmds.as_slice() else {
        panic!("{cmds:?}");
    };
    assert!(!written.contains("gpu = \"RTX 4090\""), "{written}");
}
