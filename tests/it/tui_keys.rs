//! The screen's keys without a terminal: knobs stepped and typed, toggles, the pin, the fit, the
//! export and quitting, the lock and undo; a random walk of keys exports a file that loads back.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::tui::*;
use grpofit::gpu::GpuInfo;
use grpofit::tui::app::{App, GpuState, Mode, Msg};
use grpofit::tui::theme::Theme;
use grpofit_core::config;
use grpofit_core::run::Stack;
use grpofit_core::run::knobs::Knob;
use grpofit_core::units::{format_change, format_size};
use ratatui::crossterm::event::KeyCode;

#[test]
fn sliders_move_and_undo_restores() {
    let mut a = app();
    assert_eq!(a.focused(), Knob::VllmShare);
    let before = a.estimate().total_bytes;
    key(&mut a, KeyCode::Right);
    assert_eq!(Knob::VllmShare.get(a.run()), Some(50));
    assert!(a.estimate().total_bytes > before);
    key(&mut a, KeyCode::Char('u'));
    assert_eq!(Knob::VllmShare.get(a.run()), Some(45));
    assert_eq!(a.estimate().total_bytes, before);
}

#[test]
fn typed_values_are_checked_before_they_are_set() {
    let mut a = app();
    keys(&mut a, "jjjjjj"); // LoRA rank
    assert_eq!(a.focused(), Knob::LoraRank);
    key(&mut a, KeyCode::Enter);
    assert!(matches!(*a.mode(), Mode::Entry { .. }));
    for _ in 0..4 {
        key(&mut a, KeyCode::Backspace);
    }
    keys(&mut a, "99999");
    key(&mut a, KeyCode::Enter);
    assert!(
        matches!(a.mode(), Mode::Entry { error: Some(_), .. }),
        "{:?}",
        *a.mode()
    );
    for _ in 0..5 {
        key(&mut a, KeyCode::Backspace);
    }
    keys(&mut a, "48");
    key(&mut a, KeyCode::Enter);
    assert_eq!(*a.mode(), Mode::Normal);
    assert_eq!(a.run().lora_rank, 48);
}

#[test]
fn the_share_is_typed_as_a_fraction_or_a_percent() {
    for text in ["0.15", "15", "15%"] {
        let a = type_share(text);
        assert_eq!(*a.mode(), Mode::Normal, "{text}");
        assert_eq!(Knob::VllmShare.get(a.run()), Some(15), "{text}");
    }
    // 1 is 1 %, below the range, as 100 is above it: both refused, the range said
    for text in ["1", "100", "1%", "0.99"] {
        let a = type_share(text);
        let Mode::Entry {
            error: Some(error), ..
        } = a.mode()
        else {
            panic!("{text} accepted: {:?}", *a.mode());
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
    assert_eq!(a.run().stack, Stack::Trl);
    keys(&mut a, "m");
    keys(&mut a, "llama-3.1");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.run().model_name, "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(a.run().arch.parameters(), 8_030_261_248);
    keys(&mut a, "?");
    assert!(matches!(*a.mode(), Mode::Help { .. }));
    keys(&mut a, "x");
    assert_eq!(*a.mode(), Mode::Normal);
    // changed and not exported: Ctrl-C asks, a second one quits
    ctrl_c(&mut a);
    assert_eq!(*a.mode(), Mode::ConfirmQuit);
    ctrl_c(&mut a);
    assert!(a.quits());
}

#[test]
fn export_writes_once_and_asks_before_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path(), Theme::mono());
    keys(&mut a, "s");
    let path = dir.path().join("grpofit-qwen2.5-3b-instruct.toml");
    let written = config::load(&path, &grpofit_core::resolve::Offline::from_env()).unwrap();
    assert_eq!(written.run, *a.run());
    keys(&mut a, "l");
    keys(&mut a, "s");
    assert!(matches!(*a.mode(), Mode::ConfirmOverwrite { .. }));
    keys(&mut a, "n");
    assert_eq!(
        config::load(&path, &grpofit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        written.run
    );
    keys(&mut a, "sy");
    assert_eq!(
        config::load(&path, &grpofit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        *a.run()
    );
}

#[test]
fn a_gpu_reading_moves_the_capacity_unless_the_user_fixed_it() {
    let mut a = app();
    let reading = GpuInfo {
        name: "Big GPU".into(),
        total_bytes: 80 << 30,
        installed_bytes: 80 << 30,
        used_bytes: Some(1 << 30),
        free_bytes: None,
        processes: vec![grpofit::gpu::GpuProcess {
            pid: 4242,
            bytes: Some(1 << 30),
        }],
    };
    send(&mut a, Msg::Gpu(Ok(reading)));
    assert_eq!(a.estimate().capacity_bytes, 80 << 30);
    assert!(screen(&a, 80, 24).contains("pid 4242"));
    send(&mut a, Msg::Gpu(Err("driver gone".into())));
    assert!(screen(&a, 80, 24).contains("driver gone"));
}

#[test]
fn prompt_and_completion_are_knobs_of_their_own_and_the_sequence_rewrites_neither() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path(), Theme::mono());
    // the 24gb preset: prompt 256, completion 768, max_seq_length 1024
    let parts = |a: &App| {
        (
            a.run().max_seq_len,
            a.run().prompt_len,
            a.run().completion_len,
        )
    };
    assert_eq!(parts(&a), (1024, 256, 768));
    keys(&mut a, "jjj");
    assert_eq!(a.focused(), Knob::SequenceLength);
    type_value(&mut a, "100");
    assert_eq!(*a.mode(), Mode::Normal);
    assert_eq!(parts(&a), (100, 256, 768));
    // too short a sequence is the estimate's warning, and it stays on screen at every size
    let warning = "max_seq_length 100 is smaller than prompt + completion = 1024";
    assert!(
        a.estimate().warnings.iter().any(|w| w == warning),
        "{:?}",
        a.estimate().warnings
    );
    for (w, h) in SIZES {
        let s = screen(&a, w, h);
        assert!(
            s.contains("max_seq_length 100 is smaller than"),
            "{w}x{h}\n{s}"
        );
    }
    type_value(&mut a, "4096");
    assert_eq!(parts(&a), (4096, 256, 768));
    assert!(
        !a.estimate()
            .warnings
            .iter()
            .any(|w| w.contains("max_seq_length"))
    );
    // the prompt and the completion: sliders of their own, each on screen with its key
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::PromptLength);
    let s = screen(&a, 80, 24);
    let line = focused_line(&s).unwrap();
    assert!(
        line.contains("prompt") && line.contains("256") && line.contains("max_prompt_length"),
        "{line}"
    );
    key(&mut a, KeyCode::Right);
    assert_eq!(parts(&a), (4096, 384, 768));
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::CompletionLength);
    type_value(&mut a, "2000");
    assert_eq!(parts(&a), (4096, 384, 2000));
    let s = screen(&a, 80, 24);
    let line = focused_line(&s).unwrap();
    assert!(
        line.contains("completion")
            && line.contains("2000")
            && line.contains("max_completion_length"),
        "{line}"
    );
    // the export writes each under its own key, and it loads back the same
    keys(&mut a, "s");
    let path = dir.path().join("grpofit-qwen2.5-3b-instruct.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    for line in [
        "max_prompt_length = 384",
        "max_completion_length = 2000",
        "max_seq_length = 4096",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}\n{text}");
    }
    assert_eq!(
        config::load(&path, &grpofit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        *a.run()
    );
    keys(&mut a, "uuuu");
    assert_eq!(parts(&a), (1024, 256, 768));
}

#[test]
fn x_pins_a_baseline_that_undo_keeps_and_x_again_unpins() {
    let mut a = app();
    let pin = a.estimate().clone();
    assert!(a.pinned().is_none());
    keys(&mut a, "x");
    assert_eq!(a.pinned().map(|p| p.total_bytes), Some(pin.total_bytes));
    // pinning changes nothing to export: q still quits at once
    assert!(!a.unsaved());
    // the LoRA rank up, 32 to 64: the adapters and their states grow
    keys(&mut a, "jjjjjj");
    key(&mut a, KeyCode::Right);
    assert_eq!(a.run().lora_rank, 64);
    let then = |part| {
        pin.components
            .iter()
            .filter(|c| c.part == part)
            .map(|c| c.bytes)
            .sum::<u64>()
    };
    let total = format_change(a.estimate().total_bytes as i64 - pin.total_bytes as i64);
    assert_ne!(total, "±0");
    let s = screen(&a, 200, 60);
    // the title: the pin and the change since
    assert!(
        s.contains(&format!("◇ pin {} ({total})", format_size(pin.total_bytes))),
        "{s}"
    );
    // the legend: each component, its bytes and its change since the pin
    let mut changed = 0;
    for c in &a.estimate().components {
        let change = c.bytes as i64 - then(c.part) as i64;
        changed += usize::from(change != 0);
        let cell = format!(
            "{:<16}{:>10} {:>9}",
            c.name,
            format_size(c.bytes),
            format_change(change)
        );
        assert!(s.contains(&cell), "{cell}\n{s}");
    }
    assert!(changed >= 2, "{s}");
    // the ghost: ◇ on the scale row at the pinned total (the bars start after their labels, 27
    // cells, and span 171 cells for the 24 GiB card)
    let lines: Vec<&str> = s.lines().collect();
    let scale = lines.iter().find(|l| l.contains('┃')).unwrap();
    let column = 28 + (pin.total_bytes as f64 / (24u64 << 30) as f64 * 171.0).round() as usize;
    assert_eq!(scale.chars().nth(column), Some('◇'), "{scale}");
    // smaller screens: the marker and the total's change still
    for (w, h) in [(60, 20), (80, 24)] {
        let s = screen(&a, w, h);
        assert!(s.contains('◇') && s.contains(&total), "{w}x{h}\n{s}");
    }
    // help says what x does, and has every change
    let text = help_text(&mut a, 200, 60);
    assert!(text.contains("x pin this run as a baseline"), "{text}");
    assert!(
        text.contains(&format!(
            "since the pin ◇ {} {total}",
            format_size(pin.total_bytes)
        )),
        "{text}"
    );
    // undo goes back to the pinned run and keeps the pin: every change is ±0
    keys(&mut a, "u");
    assert_eq!(a.run().lora_rank, 32);
    assert_eq!(a.pinned().map(|p| p.total_bytes), Some(pin.total_bytes));
    let s = screen(&a, 200, 60);
    assert!(
        s.contains(&format!("◇ pin {} (±0)", format_size(pin.total_bytes))),
        "{s}"
    );
    for c in &a.estimate().components {
        assert!(
            s.contains(&format!(
                "{:<16}{:>10}        ±0",
                c.name,
                format_size(c.bytes)
            )),
            "{s}"
        );
    }
    // a preset loaded and undone: still pinned
    keys(&mut a, "p");
    key(&mut a, KeyCode::Enter);
    keys(&mut a, "u");
    assert!(a.pinned().is_some());
    // x again: unpinned, nothing of it left on screen
    keys(&mut a, "x");
    assert!(a.pinned().is_none());
    let s = screen(&a, 200, 60);
    assert!(!s.contains('◇') && !s.contains("±0"), "{s}");
}

/// The vLLM share up to 0.95, then the micro-batch up until the run no longer fits.
fn overflow(a: &mut App) {
    for _ in 0..10 {
        key(a, KeyCode::Right);
    }
    key(a, KeyCode::Tab);
    key(a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::MicroBatch);
    for _ in 0..6 {
        if !a.estimate().fits {
            break;
        }
        key(a, KeyCode::Right);
    }
    assert!(!a.estimate().fits);
}

#[test]
fn overflow_is_shown_as_a_shortfall() {
    let mut a = app();
    overflow(&mut a);
    let s = screen(&a, 80, 24);
    assert!(s.contains("SHORT BY"), "{s}");
}

#[test]
fn f_applies_the_fit_and_u_undoes_it() {
    let mut a = app();
    overflow(&mut a);
    let batch = a.run().effective_batch();
    keys(&mut a, "f");
    assert!(
        a.estimate().total_bytes as f64 <= 0.95 * a.estimate().capacity_bytes as f64,
        "{:?}",
        a.message()
    );
    assert_eq!(a.run().effective_batch(), batch);
    assert!(a.message().unwrap().starts_with("fit: "));
    keys(&mut a, "u");
    assert!(!a.estimate().fits);
}

#[test]
fn the_preset_picker_loads_the_chosen_tier() {
    let mut a = app();
    keys(&mut a, "p");
    key(&mut a, KeyCode::Down); // 8gb -> 12gb
    assert!(screen(&a, 80, 24).contains("▶ 12gb"));
    key(&mut a, KeyCode::Enter);
    assert_eq!(*a.mode(), Mode::Normal);
    assert_eq!(a.run().model_name, "unsloth/Qwen2.5-1.5B-Instruct");
    assert_eq!(a.message(), Some("preset 12gb loaded"));
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
        // beta, optimizer, pin, engine, ZeRO stage
        prop::sample::select(vec![
            'j', 'k', 'l', 'h', 'L', 'H', 'u', 'b', 't', 'c', '4', 'r', 'o', 'x', 'd', 'z'
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
            "0", "1", "2", "15", "0.6", "64", "100", "1024", "4096", "262144", "2097152",
            "2097153", "16777216", "99999999",
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
                    if matches!(*a.mode(), Mode::Entry { .. }) {
                        key(&mut a, KeyCode::Esc);
                    }
                }
            }
            proptest::prop_assert!(matches!(*a.mode(), Mode::Normal), "{:?} left {:?}", p, *a.mode());
        }
        keys(&mut a, "s");
        // a typed value may split the groups: the export is then refused with the rule
        if let Err(broken) = grpofit_core::run::rules::whole_groups(a.run()) {
            let said = a.message().unwrap_or_default().to_string();
            proptest::prop_assert_eq!(said, format!("not exported: {}", broken.message));
            return Ok(());
        }
        let name = a.run().model_name.rsplit('/').next().unwrap().to_ascii_lowercase();
        let path = dir.path().join(format!("grpofit-{name}.toml"));
        let back = config::load(&path, &grpofit_core::resolve::Offline::from_env()).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{walk:?}")))?;
        proptest::prop_assert_eq!(back.run, a.run().clone());
    }
}

#[test]
fn esc_never_quits_and_quitting_asks_before_losing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("grpofit-qwen2.5-3b-instruct.toml");
    // nothing changed: q quits at once; Esc does nothing
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Esc);
    assert!(!a.quits());
    keys(&mut a, "q");
    assert!(a.quits());
    let mut a = app_in(dir.path(), Theme::mono());
    ctrl_c(&mut a);
    assert!(a.quits());

    // changed: q asks; c and Esc cancel, n quits without writing
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Right);
    key(&mut a, KeyCode::Esc);
    assert!(!a.quits());
    keys(&mut a, "q");
    assert_eq!(*a.mode(), Mode::ConfirmQuit);
    assert!(!a.quits());
    assert!(screen(&a, 80, 24).contains("export? y/n/cancel"));
    keys(&mut a, "c");
    assert_eq!(*a.mode(), Mode::Normal);
    keys(&mut a, "q");
    key(&mut a, KeyCode::Esc);
    assert_eq!(*a.mode(), Mode::Normal);
    assert!(!a.quits());
    keys(&mut a, "qn");
    assert!(a.quits());
    assert!(!file.exists());

    // y exports, then quits
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Right);
    keys(&mut a, "qy");
    assert!(a.quits());
    assert_eq!(
        config::load(&file, &grpofit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        *a.run()
    );

    // y with the file there: asks to overwrite, then quits
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Right);
    key(&mut a, KeyCode::Right);
    keys(&mut a, "qy");
    assert!(!a.quits());
    keys(&mut a, "y");
    assert!(a.quits());
    assert_eq!(
        config::load(&file, &grpofit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        *a.run()
    );

    // exported: q quits at once; undone back to the start: nothing to lose either
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Left);
    keys(&mut a, "sy");
    keys(&mut a, "q");
    assert!(a.quits());
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Left);
    keys(&mut a, "uq");
    assert!(a.quits());

    // Ctrl-C asks too; a second Ctrl-C quits
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Right);
    ctrl_c(&mut a);
    assert_eq!(*a.mode(), Mode::ConfirmQuit);
    ctrl_c(&mut a);
    assert!(a.quits());

    // Esc cancels an entry and closes the pickers and help, never quits
    let mut a = app();
    for open in ["e", "m", "p", "?"] {
        keys(&mut a, open);
        assert_ne!(*a.mode(), Mode::Normal, "{open}");
        key(&mut a, KeyCode::Esc);
        assert_eq!(*a.mode(), Mode::Normal, "{open}");
        assert!(!a.quits());
    }
}

/// The micro-batch step the levers panel offers: (from, to).
fn panel_micro_batch(a: &App) -> Option<(String, String)> {
    a.step_downs()
        .iter()
        .find(|s| s.change.lever == grpofit_core::fit::Lever::MicroBatch)
        .map(|s| (s.change.from.clone(), s.change.to.clone()))
}

#[test]
fn the_lock_holds_the_effective_batch_exactly() {
    let mut a = app();
    keys(&mut a, "jj");
    assert_eq!(a.focused(), Knob::MicroBatch);
    assert!(a.batch_locked());
    assert_eq!((a.run().micro_batch, a.run().grad_accum), (4, 2));
    // micro-batch: only the divisors of 8
    let mut seen = vec![];
    for _ in 0..3 {
        key(&mut a, KeyCode::Left);
        seen.push((a.run().micro_batch, a.run().grad_accum));
    }
    for _ in 0..4 {
        key(&mut a, KeyCode::Right);
        seen.push((a.run().micro_batch, a.run().grad_accum));
    }
    assert_eq!(
        seen,
        [(2, 4), (1, 8), (1, 8), (2, 4), (4, 2), (8, 1), (8, 1)]
    );
    assert!(screen(&a, 80, 24).contains("batch 8 (locked)"));
    // a typed micro-batch that cannot keep 8 is refused, saying which can
    for typed in ["1024", "3", "6"] {
        type_value(&mut a, typed);
        let Mode::Entry { error: Some(e), .. } = a.mode() else {
            panic!(
                "{typed} accepted: {:?} {:?}",
                *a.mode(),
                a.run().micro_batch
            );
        };
        assert!(e.contains("1, 2, 4 or 8"), "{e}");
        key(&mut a, KeyCode::Esc);
        assert_eq!(a.run().effective_batch(), 8);
    }
    type_value(&mut a, "2");
    assert_eq!((a.run().micro_batch, a.run().grad_accum), (2, 4));
    // accumulation: the same divisors, the micro-batch follows
    keys(&mut a, "jjjjj");
    assert_eq!(a.focused(), Knob::GradAccum);
    key(&mut a, KeyCode::Left);
    assert_eq!((a.run().micro_batch, a.run().grad_accum), (4, 2));
    keys(&mut a, "H");
    assert_eq!((a.run().micro_batch, a.run().grad_accum), (8, 1));
    keys(&mut a, "L");
    assert_eq!((a.run().micro_batch, a.run().grad_accum), (1, 8));
    type_value(&mut a, "3");
    assert!(matches!(*a.mode(), Mode::Entry { error: Some(_), .. }));
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.run().effective_batch(), 8);

    // unlocked, accumulation 9: 36 completions; locked again, the micro-batch steps through
    // 36's divisors (9 and 12 are not on the unlocked ladder's way down) and the levers panel
    // offers the same step down as ←
    keys(&mut a, "b");
    type_value(&mut a, "9");
    keys(&mut a, "b");
    keys(&mut a, "kkkkk");
    assert_eq!(a.focused(), Knob::MicroBatch);
    assert_eq!((a.run().micro_batch, a.run().effective_batch()), (1, 9));
    keys(&mut a, "b");
    type_value(&mut a, "4");
    keys(&mut a, "b");
    assert_eq!(a.run().effective_batch(), 36);
    for expected in [6, 9, 12, 18, 36] {
        key(&mut a, KeyCode::Right);
        assert_eq!(a.run().micro_batch, expected);
        assert_eq!(a.run().effective_batch(), 36);
    }
    for _ in 0..8 {
        let from = a.run().micro_batch;
        let panel = panel_micro_batch(&a);
        key(&mut a, KeyCode::Left);
        let to = a.run().micro_batch;
        if to == from {
            assert_eq!(panel, None);
            break;
        }
        assert_eq!(panel, Some((from.to_string(), to.to_string())));
        assert_eq!(a.run().effective_batch(), 36);
    }
    assert_eq!(a.run().micro_batch, 1);
}

fn app_without_nvml() -> App {
    let file = config::parse(
        grpofit::presets::built_in("24gb").unwrap(),
        "24gb",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let gpu = GpuState {
        capacity: 24 << 30,
        capacity_from_user: false,
        name: "24gb's gpu_memory".into(),
        live: None,
        unavailable: Some("no driver".into()),
    };
    App::new(file, gpu, Theme::mono(), std::path::PathBuf::from("."))
}

#[test]
fn undo_restores_the_whole_state() {
    let mut a = app_without_nvml();
    let (run, capacity) = (a.run().clone(), a.estimate().capacity_bytes);
    keys(&mut a, "p");
    key(&mut a, KeyCode::Down);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.run().model_name, "unsloth/Qwen2.5-1.5B-Instruct");
    assert_ne!(a.gpu().capacity, capacity);
    keys(&mut a, "u");
    assert_eq!(*a.run(), run);
    assert_eq!(a.gpu().capacity, capacity);
    assert_eq!(a.estimate().capacity_bytes, capacity);
    assert_eq!(a.gpu().name, "24gb's gpu_memory");
    // the lock too
    assert!(a.batch_locked());
    keys(&mut a, "b");
    assert!(!a.batch_locked());
    keys(&mut a, "u");
    assert!(a.batch_locked());
}

#[test]
fn typing_replaces_the_prefilled_value() {
    // Enter pre-fills 0.45; `15%` replaces it (it used to append: 0.4515%)
    let mut a = app();
    key(&mut a, KeyCode::Enter);
    assert!(screen(&a, 80, 24).contains("[0.45]"));
    keys(&mut a, "15%");
    assert!(
        matches!(a.mode(), Mode::Entry { text, .. } if text == "15%"),
        "{:?}",
        *a.mode()
    );
    key(&mut a, KeyCode::Enter);
    assert_eq!(*a.mode(), Mode::Normal);
    assert_eq!(Knob::VllmShare.get(a.run()), Some(15));
    // an arrow key keeps the value for editing: typing then appends
    let mut a = app();
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Right);
    keys(&mut a, "5");
    assert!(matches!(a.mode(), Mode::Entry { text, .. } if text == "0.455"));
    // the refusal's example is a share that is taken, inside 5 % to 95 %
    key(&mut a, KeyCode::Enter);
    let Mode::Entry {
        error: Some(error), ..
    } = a.mode()
    else {
        panic!("{:?}", *a.mode())
    };
    assert!(error.contains("e.g. 45% or 46%"), "{error}");
    let e = Knob::VllmShare.parse("0.005").unwrap_err().to_string();
    assert!(
        e.contains("e.g. 5%") && !e.contains("0%") && !e.contains(" 1%"),
        "{e}"
    );
}

#[test]
fn a_run_of_split_groups_is_not_exported() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path(), Theme::mono());
    if a.batch_locked() {
        keys(&mut a, "b");
    }
    // typed, the generations may split the batch of 8; the export says the rule instead
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::Generations);
    key(&mut a, KeyCode::Enter);
    keys(&mut a, "3");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.run().num_generations, 3, "{:?}", *a.mode());
    keys(&mut a, "s");
    let message = a.message().unwrap().to_string();
    assert!(
        message.starts_with("not exported: num_generations = 3") && message.contains("Unsloth"),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
