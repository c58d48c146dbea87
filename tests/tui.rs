//! The interactive screen without a terminal: keys in, state out; whole-screen snapshots at
//! 80x24 with a fixed GPU, in colour and without; any size drawn without panicking.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use vramfit::config;
use vramfit::gpu::GpuInfo;
use vramfit::model::knobs::Knob;
use vramfit::model::run::Stack;
use vramfit::tui::app::{App, GpuState, Mode, Msg};
use vramfit::tui::theme::Theme;
use vramfit::tui::view;

fn app_in(dir: &std::path::Path, theme: Theme) -> App {
    let file = config::parse(vramfit::presets::built_in("24gb").unwrap(), "24gb", None).unwrap();
    let gpu = GpuState {
        capacity: 24 << 30,
        capacity_from_user: false,
        name: "Test GPU".into(),
        live: Some(GpuInfo {
            name: "Test GPU".into(),
            total_bytes: 24 << 30,
            used_bytes: Some(10 << 30),
            free_bytes: Some(14 << 30),
            processes: vec![],
        }),
        unavailable: None,
    };
    App::new(file, gpu, theme, dir.to_path_buf())
}

fn app() -> App {
    app_in(std::path::Path::new("."), Theme::mono())
}

fn key(app: &mut App, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

fn keys(app: &mut App, text: &str) {
    text.chars().for_each(|c| key(app, KeyCode::Char(c)));
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, app)).unwrap();
    let buf = t.backend().buffer();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn sliders_move_and_undo_restores() {
    let mut a = app();
    assert_eq!(a.focused(), Knob::VllmShare);
    let before = a.estimate.total_bytes;
    key(&mut a, KeyCode::Right);
    assert_eq!(Knob::VllmShare.get(&a.run), Some(50));
    assert!(a.estimate.total_bytes > before);
    key(&mut a, KeyCode::Char('u'));
    assert_eq!(Knob::VllmShare.get(&a.run), Some(45));
    assert_eq!(a.estimate.total_bytes, before);
}

#[test]
fn the_lock_keeps_the_effective_batch_through_the_micro_batch() {
    let mut a = app();
    keys(&mut a, "jj");
    assert_eq!(a.focused(), Knob::MicroBatch);
    assert_eq!(a.run.effective_batch(), 8);
    key(&mut a, KeyCode::Left); // 4 -> 3: accumulation 3, 9 completions: not exact
    assert_eq!(a.run.micro_batch, 3);
    assert_eq!(a.run.grad_accum, 3);
    assert!(a.batch_note.as_deref().unwrap().contains("+1"));
    key(&mut a, KeyCode::Left); // 3 -> 2: accumulation 4, exactly 8 again
    assert_eq!((a.run.micro_batch, a.run.grad_accum), (2, 4));
    assert_eq!(a.batch_note, None);
    keys(&mut a, "b"); // unlocked: accumulation stays put
    key(&mut a, KeyCode::Right);
    assert_eq!((a.run.micro_batch, a.run.grad_accum), (3, 4));
}

#[test]
fn typed_values_are_checked_before_they_are_set() {
    let mut a = app();
    keys(&mut a, "jjjj"); // LoRA rank
    key(&mut a, KeyCode::Enter);
    assert!(matches!(a.mode, Mode::Entry { .. }));
    for _ in 0..4 {
        key(&mut a, KeyCode::Backspace);
    }
    keys(&mut a, "99999");
    key(&mut a, KeyCode::Enter);
    assert!(
        matches!(&a.mode, Mode::Entry { error: Some(_), .. }),
        "{:?}",
        a.mode
    );
    for _ in 0..5 {
        key(&mut a, KeyCode::Backspace);
    }
    keys(&mut a, "48");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(a.run.lora_rank, 48);
}

/// Types `text` into the vLLM share's entry (focused at start) and presses Enter.
fn type_share(text: &str) -> App {
    let mut a = app();
    key(&mut a, KeyCode::Enter);
    for _ in 0..8 {
        key(&mut a, KeyCode::Backspace);
    }
    keys(&mut a, text);
    key(&mut a, KeyCode::Enter);
    a
}

#[test]
fn the_share_is_typed_as_a_fraction_or_a_percent() {
    for text in ["0.15", "15", "15%"] {
        let a = type_share(text);
        assert_eq!(a.mode, Mode::Normal, "{text}");
        assert_eq!(Knob::VllmShare.get(&a.run), Some(15), "{text}");
    }
    // 1 is 1 %, below the range, as 100 is above it: both refused, the range said
    for text in ["1", "100", "1%", "0.99"] {
        let a = type_share(text);
        let Mode::Entry {
            error: Some(error), ..
        } = &a.mode
        else {
            panic!("{text} accepted: {:?}", a.mode);
        };
        assert!(error.contains("5%") && error.contains("95%"), "{error}");
    }
    // the prompt says how to write it
    let mut a = app();
    key(&mut a, KeyCode::Enter);
    let text = screen(&a, 80, 24);
    assert!(text.contains("15%"), "{text}");
}

#[test]
fn toggles_and_model_picker() {
    let mut a = app();
    keys(&mut a, "t");
    assert_eq!(a.run.stack, Stack::Trl);
    keys(&mut a, "m");
    keys(&mut a, "llama-3.1");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.run.model_name, "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(a.run.arch.parameters(), 8_030_261_248);
    keys(&mut a, "?");
    assert_eq!(a.mode, Mode::Help);
    keys(&mut a, "x");
    assert_eq!(a.mode, Mode::Normal);
    a.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert!(a.quit);
}

#[test]
fn export_writes_once_and_asks_before_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path(), Theme::mono());
    keys(&mut a, "s");
    let path = dir.path().join("vramfit-qwen2.5-3b-instruct.toml");
    let written = config::load(&path).unwrap();
    assert_eq!(written.run, a.run);
    keys(&mut a, "l");
    keys(&mut a, "s");
    assert!(matches!(a.mode, Mode::ConfirmOverwrite(_)));
    keys(&mut a, "n");
    assert_eq!(config::load(&path).unwrap().run, written.run);
    keys(&mut a, "sy");
    assert_eq!(config::load(&path).unwrap().run, a.run);
}

#[test]
fn a_gpu_reading_moves_the_capacity_unless_the_user_fixed_it() {
    let mut a = app();
    let reading = GpuInfo {
        name: "Big GPU".into(),
        total_bytes: 80 << 30,
        used_bytes: Some(1 << 30),
        free_bytes: None,
        processes: vec![vramfit::gpu::GpuProcess {
            pid: 4242,
            bytes: Some(1 << 30),
        }],
    };
    a.update(Msg::Gpu(Ok(reading)));
    assert_eq!(a.estimate.capacity_bytes, 80 << 30);
    assert!(screen(&a, 80, 24).contains("pid 4242"));
    a.update(Msg::Gpu(Err("driver gone".into())));
    assert!(screen(&a, 80, 24).contains("driver gone"));
}

#[test]
fn any_size_draws_without_panicking() {
    let mut a = app();
    for (w, h) in [
        (0, 0),
        (1, 1),
        (2, 1),
        (10, 5),
        (59, 19),
        (60, 20),
        (80, 24),
        (300, 80),
        (80, 8),
    ] {
        screen(&a, w, h);
        keys(&mut a, "?");
        screen(&a, w, h);
        keys(&mut a, "x");
        keys(&mut a, "m");
        screen(&a, w, h);
        key(&mut a, KeyCode::Esc);
    }
}

#[test]
fn snapshot_80x24_without_colour() {
    insta::assert_snapshot!(screen(&app(), 80, 24));
}

#[test]
fn snapshot_80x24_colour_styles() {
    let a = app_in(std::path::Path::new("."), Theme { colour: true });
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| view::draw(f, &a)).unwrap();
    insta::assert_debug_snapshot!(t.backend().buffer());
}

#[test]
fn overflow_is_shown_as_a_shortfall() {
    let mut a = app();
    for _ in 0..10 {
        key(&mut a, KeyCode::Right); // vLLM share up to 0.95
    }
    let s = screen(&a, 80, 24);
    assert!(s.contains("SHORT BY"), "{s}");
}

#[test]
fn f_applies_the_fit_and_u_undoes_it() {
    let mut a = app();
    for _ in 0..10 {
        key(&mut a, KeyCode::Right); // vLLM share 0.95: does not fit
    }
    assert!(!a.estimate.fits);
    let batch = a.run.effective_batch();
    keys(&mut a, "f");
    assert!(
        a.estimate.total_bytes as f64 <= 0.95 * a.estimate.capacity_bytes as f64,
        "{:?}",
        a.message
    );
    assert_eq!(a.run.effective_batch(), batch);
    assert!(a.message.as_deref().unwrap().starts_with("fit: "));
    keys(&mut a, "u");
    assert!(!a.estimate.fits);
}

#[test]
fn the_preset_picker_loads_the_chosen_tier() {
    let mut a = app();
    keys(&mut a, "p");
    key(&mut a, KeyCode::Down); // 8gb -> 12gb
    assert!(screen(&a, 80, 24).contains("▶ 12gb"));
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(a.run.model_name, "unsloth/Qwen2.5-1.5B-Instruct");
    assert_eq!(a.message.as_deref(), Some("preset 12gb loaded"));
}

/// One key a person might press on the main screen, or a value typed into the focused knob.
#[derive(Debug, Clone)]
enum Press {
    Key(char),
    Arrow(KeyCode),
    Typed(String),
}

fn press_strategy() -> impl proptest::strategy::Strategy<Value = Press> {
    use proptest::prelude::*;
    prop_oneof![
        // knob focus, slider steps (fine and coarse), undo, lock, stack, checkpointing, 4-bit,
        // beta, optimizer
        prop::sample::select(vec![
            'j', 'k', 'l', 'h', 'L', 'H', 'u', 'b', 't', 'c', '4', 'r', 'o'
        ])
        .prop_map(Press::Key),
        prop::sample::select(vec![
            KeyCode::Tab,
            KeyCode::BackTab,
            KeyCode::Right,
            KeyCode::Left
        ])
        .prop_map(Press::Arrow),
        // typed values, in range or not: the entry and the rules must keep the run loadable
        prop::sample::select(vec![
            "0", "1", "2", "15", "0.6", "64", "1024", "4096", "262144", "16777216", "99999999",
        ])
        .prop_map(|s| Press::Typed(s.to_string())),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Whatever a walk over the screen reaches, `s` writes a file the loader reads back as the
    /// same run.
    #[test]
    fn any_walk_exports_a_file_that_loads_back_equal(walk in proptest::collection::vec(press_strategy(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut a = app_in(dir.path(), Theme::mono());
        for p in &walk {
            match p {
                Press::Key(c) => key(&mut a, KeyCode::Char(*c)),
                Press::Arrow(code) => key(&mut a, *code),
                Press::Typed(text) => {
                    key(&mut a, KeyCode::Char('e'));
                    // clear what the entry starts with, then type
                    for _ in 0..16 {
                        key(&mut a, KeyCode::Backspace);
                    }
                    keys(&mut a, text);
                    key(&mut a, KeyCode::Enter);
                    if matches!(a.mode, Mode::Entry { .. }) {
                        key(&mut a, KeyCode::Esc);
                    }
                }
            }
            proptest::prop_assert!(matches!(a.mode, Mode::Normal), "{:?} left {:?}", p, a.mode);
        }
        keys(&mut a, "s");
        let name = a.run.model_name.rsplit('/').next().unwrap().to_ascii_lowercase();
        let path = dir.path().join(format!("vramfit-{name}.toml"));
        let back = config::load(&path).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{walk:?}")))?;
        proptest::prop_assert_eq!(back.run, a.run.clone());
    }
}
