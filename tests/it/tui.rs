//! The interactive screen without a terminal: keys in, state out; whole-screen snapshots at
//! 80x24 with a fixed GPU, in colour and without; any size drawn without panicking.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use vramfit::gpu::GpuInfo;
use vramfit::tui::app::{App, GpuState, Mode, Msg};
use vramfit::tui::theme::Theme;
use vramfit::tui::view;
use vramfit_core::config;
use vramfit_core::memory::estimate::Phase;
use vramfit_core::run::Stack;
use vramfit_core::run::knobs::Knob;
use vramfit_core::units::{format_change, format_size};

fn app_in(dir: &std::path::Path, theme: Theme) -> App {
    app_of(vramfit_core::presets::built_in("24gb").unwrap(), dir, theme)
}

/// The screen on the run file `text`, with the fixed 24 GiB test GPU.
fn app_of(text: &str, dir: &std::path::Path, theme: Theme) -> App {
    let file = config::parse(
        text,
        "test",
        None,
        &vramfit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let gpu = GpuState {
        capacity: 24 << 30,
        capacity_from_user: false,
        name: "Test GPU".into(),
        live: Some(GpuInfo {
            name: "Test GPU".into(),
            total_bytes: 24 << 30,
            installed_bytes: 24 << 30,
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

/// Draws `app` at `w` x `h` and hands it what was drawn, as the screen's loop does.
fn resize(app: &mut App, w: u16, h: u16) {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut drawn = None;
    t.draw(|f| drawn = Some(view::draw(f, app))).unwrap();
    app.update(Msg::Drawn(drawn.unwrap()));
}

/// Draws `app` again at the size it was last drawn at: the loop draws before each event.
fn redraw(app: &mut App) {
    if let Some((w, h)) = app.drawn.as_ref().map(|d| d.size) {
        resize(app, w, h);
    }
}

fn key(app: &mut App, code: KeyCode) {
    redraw(app);
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

fn keys(app: &mut App, text: &str) {
    text.chars().for_each(|c| key(app, KeyCode::Char(c)));
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| {
        view::draw(f, app);
    })
    .unwrap();
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
fn typed_values_are_checked_before_they_are_set() {
    let mut a = app();
    keys(&mut a, "jjjjjj"); // LoRA rank
    assert_eq!(a.focused(), Knob::LoraRank);
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
    assert!(matches!(a.mode, Mode::Help { .. }));
    keys(&mut a, "x");
    assert_eq!(a.mode, Mode::Normal);
    // changed and not exported: Ctrl-C asks, a second one quits
    ctrl_c(&mut a);
    assert_eq!(a.mode, Mode::ConfirmQuit);
    ctrl_c(&mut a);
    assert!(a.quit);
}

#[test]
fn export_writes_once_and_asks_before_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path(), Theme::mono());
    keys(&mut a, "s");
    let path = dir.path().join("vramfit-qwen2.5-3b-instruct.toml");
    let written = config::load(&path, &vramfit_core::resolve::Offline::from_env()).unwrap();
    assert_eq!(written.run, a.run);
    keys(&mut a, "l");
    keys(&mut a, "s");
    assert!(matches!(a.mode, Mode::ConfirmOverwrite { .. }));
    keys(&mut a, "n");
    assert_eq!(
        config::load(&path, &vramfit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        written.run
    );
    keys(&mut a, "sy");
    assert_eq!(
        config::load(&path, &vramfit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        a.run
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
    let mut multi = open_r1(None, std::path::Path::new("."));
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
        screen(&multi, w, h);
        keys(&mut multi, "x?");
        screen(&multi, w, h);
        key(&mut multi, KeyCode::Esc);
        keys(&mut a, "?");
        screen(&a, w, h);
        keys(&mut a, "x");
        keys(&mut a, "m");
        screen(&a, w, h);
        key(&mut a, KeyCode::Esc);
    }
}

/// The sizes the screen is drawn at in the snapshots: the minimum, the classic terminal, a
/// large one.
const SIZES: [(u16, u16); 3] = [(60, 20), (80, 24), (200, 60)];

#[test]
fn snapshots_without_colour() {
    for (w, h) in SIZES {
        insta::assert_snapshot!(format!("screen_{w}x{h}_no_colour"), screen(&app(), w, h));
    }
}

#[test]
fn snapshots_in_colour() {
    let a = app_in(std::path::Path::new("."), Theme { colour: true });
    for (w, h) in SIZES {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| {
            view::draw(f, &a);
        })
        .unwrap();
        insta::assert_debug_snapshot!(format!("screen_{w}x{h}_colour"), t.backend().buffer());
    }
}

#[test]
fn prompt_and_completion_are_knobs_of_their_own_and_the_sequence_rewrites_neither() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path(), Theme::mono());
    // the 24gb preset: prompt 256, completion 768, max_seq_length 1024
    let parts = |a: &App| (a.run.max_seq_len, a.run.prompt_len, a.run.completion_len);
    assert_eq!(parts(&a), (1024, 256, 768));
    keys(&mut a, "jjj");
    assert_eq!(a.focused(), Knob::SequenceLength);
    type_value(&mut a, "100");
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(parts(&a), (100, 256, 768));
    // too short a sequence is the estimate's warning, and it stays on screen at every size
    let warning = "max_seq_length 100 is smaller than prompt + completion = 1024";
    assert!(
        a.estimate.warnings.iter().any(|w| w == warning),
        "{:?}",
        a.estimate.warnings
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
        !a.estimate
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
    let path = dir.path().join("vramfit-qwen2.5-3b-instruct.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    for line in [
        "max_prompt_length = 384",
        "max_completion_length = 2000",
        "max_seq_length = 4096",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}\n{text}");
    }
    assert_eq!(
        config::load(&path, &vramfit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        a.run
    );
    keys(&mut a, "uuuu");
    assert_eq!(parts(&a), (1024, 256, 768));
}

/// The screen's line for `phase`'s bar (its label starts the line).
fn phase_line(s: &str, phase: Phase) -> Option<&str> {
    let label = format!("{} ", phase.label());
    s.lines().find(|l| l.trim_start().starts_with(&label))
}

#[test]
fn two_phases_are_two_bars_each_with_its_total_and_the_peak_marked() {
    let here = std::path::Path::new(".");
    let preset = vramfit_core::presets::built_in("24gb").unwrap();
    // vLLM colocated, everything kept while training: training is the peak; in standby vLLM
    // gives its KV cache back, and generation is
    let standby = preset.replace("[env]\n", "[env]\nUNSLOTH_VLLM_STANDBY = \"1\"\n");
    for (text, peak) in [
        (preset, Phase::Training),
        (standby.as_str(), Phase::Generation),
    ] {
        let a = app_of(text, here, Theme::mono());
        let e = &a.estimate;
        assert_eq!(e.phases.len(), 2);
        assert_eq!(e.peak_phase, peak);
        for (w, h) in [(60, 20), (80, 24), (200, 60)] {
            let s = screen(&a, w, h);
            let lines: Vec<&str> = s.lines().collect();
            let at = |phase| {
                let line =
                    phase_line(&s, phase).unwrap_or_else(|| panic!("{w}x{h}: no {phase} bar\n{s}"));
                lines.iter().position(|l| *l == line).unwrap()
            };
            // generation above training, one right under the other, the scale under both
            let (g, t) = (at(Phase::Generation), at(Phase::Training));
            assert_eq!(t, g + 1, "{s}");
            assert!(lines[t + 1].contains('┃'), "{s}");
            for p in &e.phases {
                let line = phase_line(&s, p.phase).unwrap();
                assert!(line.contains(&format_size(p.total_bytes)), "{line}");
                assert_eq!(line.contains(" peak "), p.phase == peak, "{w}x{h}: {line}");
            }
            // the title gives the peak's total
            assert!(
                s.contains(&format!("memory {} of", format_size(e.total_bytes))),
                "{s}"
            );
        }
        // help has each phase whole, component by component
        let mut a = a;
        let text = help_text(&mut a, 200, 60);
        for p in &a.estimate.phases {
            assert!(
                text.contains(&format!(
                    "{} {}",
                    p.phase.label(),
                    format_size(p.total_bytes)
                )),
                "{text}"
            );
            for c in &p.components {
                assert!(
                    text.contains(&format!("{} {}", c.name, format_size(c.bytes))),
                    "{text}"
                );
            }
        }
    }
    // vLLM on its own GPUs: one phase on the training GPU, so no phase bars, but one bar per
    // role, each with its GPUs and total
    let server = "[vramfit]\nstack = \"trl\"\nmax_prompt_length = 256\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n[grpo]\nuse_vllm = true\nvllm_mode = \"server\"\n";
    let a = app_of(server, here, Theme::mono());
    assert!(a.estimate.phases.is_empty());
    let s = screen(&a, 80, 24);
    assert!(phase_line(&s, Phase::Generation).is_none(), "{s}");
    for r in &a.estimate.roles {
        let label = format!(" {} ×{}", r.role.label(), r.gpus);
        let line = s
            .lines()
            .find(|l| l.starts_with(&label))
            .unwrap_or_else(|| panic!("{label}\n{s}"));
        assert!(line.contains(&format_size(r.total_bytes)), "{line}");
    }
    assert!(!s.contains(" peak "), "{s}");
}

#[test]
fn x_pins_a_baseline_that_undo_keeps_and_x_again_unpins() {
    let mut a = app();
    let pin = a.estimate.clone();
    assert!(a.pinned.is_none());
    keys(&mut a, "x");
    assert_eq!(
        a.pinned.as_ref().map(|p| p.total_bytes),
        Some(pin.total_bytes)
    );
    // pinning changes nothing to export: q still quits at once
    assert!(!a.unsaved());
    // the LoRA rank up, 32 to 64: the adapters and their states grow
    keys(&mut a, "jjjjjj");
    key(&mut a, KeyCode::Right);
    assert_eq!(a.run.lora_rank, 64);
    let then = |part| {
        pin.components
            .iter()
            .filter(|c| c.part == part)
            .map(|c| c.bytes)
            .sum::<u64>()
    };
    let total = format_change(a.estimate.total_bytes as i64 - pin.total_bytes as i64);
    assert_ne!(total, "±0");
    let s = screen(&a, 200, 60);
    // the title: the pin and the change since
    assert!(
        s.contains(&format!("◇ pin {} ({total})", format_size(pin.total_bytes))),
        "{s}"
    );
    // the legend: each component, its bytes and its change since the pin
    let mut changed = 0;
    for c in &a.estimate.components {
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
    assert_eq!(a.run.lora_rank, 32);
    assert_eq!(
        a.pinned.as_ref().map(|p| p.total_bytes),
        Some(pin.total_bytes)
    );
    let s = screen(&a, 200, 60);
    assert!(
        s.contains(&format!("◇ pin {} (±0)", format_size(pin.total_bytes))),
        "{s}"
    );
    for c in &a.estimate.components {
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
    assert!(a.pinned.is_some());
    // x again: unpinned, nothing of it left on screen
    keys(&mut a, "x");
    assert!(a.pinned.is_none());
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
        if !a.estimate.fits {
            break;
        }
        key(a, KeyCode::Right);
    }
    assert!(!a.estimate.fits);
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
                    if matches!(a.mode, Mode::Entry { .. }) {
                        key(&mut a, KeyCode::Esc);
                    }
                }
            }
            proptest::prop_assert!(matches!(a.mode, Mode::Normal), "{:?} left {:?}", p, a.mode);
        }
        keys(&mut a, "s");
        // a typed value may split the groups: the export is then refused with the rule
        if let Err(broken) = vramfit_core::run::rules::whole_groups(&a.run) {
            let said = a.message.clone().unwrap_or_default();
            proptest::prop_assert_eq!(said, format!("not exported: {}", broken.message));
            return Ok(());
        }
        let name = a.run.model_name.rsplit('/').next().unwrap().to_ascii_lowercase();
        let path = dir.path().join(format!("vramfit-{name}.toml"));
        let back = config::load(&path, &vramfit_core::resolve::Offline::from_env()).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{walk:?}")))?;
        proptest::prop_assert_eq!(back.run, a.run.clone());
    }
}

/// The value `knob` shows on its slider row.
fn shown(a: &App, knob: Knob) -> String {
    knob.get(&a.run).map_or("-".into(), |v| knob.show(v))
}

/// The screen's line that holds the focused knob (`▶ label ... value`).
fn focused_line(s: &str) -> Option<&str> {
    s.lines().find(|l| l.starts_with("▶ "))
}

#[test]
fn the_focused_knob_is_on_screen_at_every_size_down_to_the_minimum() {
    let runs: [fn() -> App; 2] = [app, || open_r1(None, std::path::Path::new("."))];
    for ((w, h), make) in [(60, 20), (61, 21), (70, 22), (80, 24), (200, 60)]
        .into_iter()
        .flat_map(|size| runs.map(|make| (size, make)))
    {
        let mut a = make();
        resize(&mut a, w, h);
        let knobs = a.knobs();
        for (i, knob) in knobs.iter().enumerate() {
            assert_eq!(a.focused(), *knob);
            let s = screen(&a, w, h);
            let line = focused_line(&s).unwrap_or_else(|| panic!("{w}x{h}: no focused knob\n{s}"));
            assert!(line.contains(knob.label()), "{w}x{h} {knob}: {line}\n{s}");
            assert!(line.contains(&shown(&a, *knob)), "{w}x{h} {knob}: {line}");
            // a step moves the focused knob and the change is on screen
            if i > 0 {
                key(&mut a, KeyCode::Right);
                let s = screen(&a, w, h);
                assert!(focused_line(&s).unwrap().contains(&shown(&a, *knob)), "{s}");
                key(&mut a, KeyCode::Char('u'));
            }
            key(&mut a, KeyCode::Tab);
        }
        // and back up, past the top
        for knob in knobs.iter().rev() {
            key(&mut a, KeyCode::BackTab);
            let s = screen(&a, w, h);
            assert!(focused_line(&s).unwrap().contains(knob.label()), "{s}");
        }
    }
}

#[test]
fn below_the_minimum_size_only_quit_and_help_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path(), Theme::mono());
    resize(&mut a, 40, 12);
    let (run, focus) = (a.run.clone(), a.focus);
    for c in "LlHhjkctr4obumpsfex".chars() {
        key(&mut a, KeyCode::Char(c));
        assert_eq!(a.mode, Mode::Normal, "{c}");
    }
    for code in [KeyCode::Right, KeyCode::Left, KeyCode::Tab, KeyCode::Enter] {
        key(&mut a, code);
    }
    assert_eq!(a.run, run);
    assert_eq!(a.focus, focus);
    assert!(a.pinned.is_none());
    assert!(!a.quit);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(screen(&a, 40, 12).contains("60x20"));
    keys(&mut a, "?");
    assert!(matches!(a.mode, Mode::Help { .. }), "{:?}", a.mode);
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.mode, Mode::Normal);
    // grown back: keys work again
    resize(&mut a, 80, 24);
    keys(&mut a, "l");
    assert_ne!(a.run, run);
    resize(&mut a, 40, 12);
    keys(&mut a, "q");
    assert_eq!(a.mode, Mode::ConfirmQuit);
    keys(&mut a, "n");
    assert!(a.quit);
}

fn ctrl_c(a: &mut App) {
    a.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
}

#[test]
fn esc_never_quits_and_quitting_asks_before_losing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vramfit-qwen2.5-3b-instruct.toml");
    // nothing changed: q quits at once; Esc does nothing
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Esc);
    assert!(!a.quit);
    keys(&mut a, "q");
    assert!(a.quit);
    let mut a = app_in(dir.path(), Theme::mono());
    ctrl_c(&mut a);
    assert!(a.quit);

    // changed: q asks; c and Esc cancel, n quits without writing
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Right);
    key(&mut a, KeyCode::Esc);
    assert!(!a.quit);
    keys(&mut a, "q");
    assert_eq!(a.mode, Mode::ConfirmQuit);
    assert!(!a.quit);
    assert!(screen(&a, 80, 24).contains("export? y/n/cancel"));
    keys(&mut a, "c");
    assert_eq!(a.mode, Mode::Normal);
    keys(&mut a, "q");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.mode, Mode::Normal);
    assert!(!a.quit);
    keys(&mut a, "qn");
    assert!(a.quit);
    assert!(!file.exists());

    // y exports, then quits
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Right);
    keys(&mut a, "qy");
    assert!(a.quit);
    assert_eq!(
        config::load(&file, &vramfit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        a.run
    );

    // y with the file there: asks to overwrite, then quits
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Right);
    key(&mut a, KeyCode::Right);
    keys(&mut a, "qy");
    assert!(!a.quit);
    keys(&mut a, "y");
    assert!(a.quit);
    assert_eq!(
        config::load(&file, &vramfit_core::resolve::Offline::from_env())
            .unwrap()
            .run,
        a.run
    );

    // exported: q quits at once; undone back to the start: nothing to lose either
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Left);
    keys(&mut a, "sy");
    keys(&mut a, "q");
    assert!(a.quit);
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Left);
    keys(&mut a, "uq");
    assert!(a.quit);

    // Ctrl-C asks too; a second Ctrl-C quits
    let mut a = app_in(dir.path(), Theme::mono());
    key(&mut a, KeyCode::Right);
    ctrl_c(&mut a);
    assert_eq!(a.mode, Mode::ConfirmQuit);
    ctrl_c(&mut a);
    assert!(a.quit);

    // Esc cancels an entry and closes the pickers and help, never quits
    let mut a = app();
    for open in ["e", "m", "p", "?"] {
        keys(&mut a, open);
        assert_ne!(a.mode, Mode::Normal, "{open}");
        key(&mut a, KeyCode::Esc);
        assert_eq!(a.mode, Mode::Normal, "{open}");
        assert!(!a.quit);
    }
}

/// The micro-batch step the levers panel offers: (from, to).
fn panel_micro_batch(a: &App) -> Option<(String, String)> {
    a.step_downs
        .iter()
        .find(|s| s.change.lever == vramfit_core::fit::Lever::MicroBatch)
        .map(|s| (s.change.from.clone(), s.change.to.clone()))
}

fn type_value(a: &mut App, text: &str) {
    key(a, KeyCode::Enter);
    for _ in 0..16 {
        key(a, KeyCode::Backspace);
    }
    keys(a, text);
    key(a, KeyCode::Enter);
}

#[test]
fn the_lock_holds_the_effective_batch_exactly() {
    let mut a = app();
    keys(&mut a, "jj");
    assert_eq!(a.focused(), Knob::MicroBatch);
    assert!(a.lock);
    assert_eq!((a.run.micro_batch, a.run.grad_accum), (4, 2));
    // micro-batch: only the divisors of 8
    let mut seen = vec![];
    for _ in 0..3 {
        key(&mut a, KeyCode::Left);
        seen.push((a.run.micro_batch, a.run.grad_accum));
    }
    for _ in 0..4 {
        key(&mut a, KeyCode::Right);
        seen.push((a.run.micro_batch, a.run.grad_accum));
    }
    assert_eq!(
        seen,
        [(2, 4), (1, 8), (1, 8), (2, 4), (4, 2), (8, 1), (8, 1)]
    );
    assert!(screen(&a, 80, 24).contains("batch 8 (locked)"));
    // a typed micro-batch that cannot keep 8 is refused, saying which can
    for typed in ["1024", "3", "6"] {
        type_value(&mut a, typed);
        let Mode::Entry { error: Some(e), .. } = &a.mode else {
            panic!("{typed} accepted: {:?} {:?}", a.mode, a.run.micro_batch);
        };
        assert!(e.contains("1, 2, 4 or 8"), "{e}");
        key(&mut a, KeyCode::Esc);
        assert_eq!(a.run.effective_batch(), 8);
    }
    type_value(&mut a, "2");
    assert_eq!((a.run.micro_batch, a.run.grad_accum), (2, 4));
    // accumulation: the same divisors, the micro-batch follows
    keys(&mut a, "jjjjj");
    assert_eq!(a.focused(), Knob::GradAccum);
    key(&mut a, KeyCode::Left);
    assert_eq!((a.run.micro_batch, a.run.grad_accum), (4, 2));
    keys(&mut a, "H");
    assert_eq!((a.run.micro_batch, a.run.grad_accum), (8, 1));
    keys(&mut a, "L");
    assert_eq!((a.run.micro_batch, a.run.grad_accum), (1, 8));
    type_value(&mut a, "3");
    assert!(matches!(a.mode, Mode::Entry { error: Some(_), .. }));
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.run.effective_batch(), 8);

    // unlocked, accumulation 9: 36 completions; locked again, the micro-batch steps through
    // 36's divisors (9 and 12 are not on the unlocked ladder's way down) and the levers panel
    // offers the same step down as ←
    keys(&mut a, "b");
    type_value(&mut a, "9");
    keys(&mut a, "b");
    keys(&mut a, "kkkkk");
    assert_eq!(a.focused(), Knob::MicroBatch);
    assert_eq!((a.run.micro_batch, a.run.effective_batch()), (1, 9));
    keys(&mut a, "b");
    type_value(&mut a, "4");
    keys(&mut a, "b");
    assert_eq!(a.run.effective_batch(), 36);
    for expected in [6, 9, 12, 18, 36] {
        key(&mut a, KeyCode::Right);
        assert_eq!(a.run.micro_batch, expected);
        assert_eq!(a.run.effective_batch(), 36);
    }
    for _ in 0..8 {
        let from = a.run.micro_batch;
        let panel = panel_micro_batch(&a);
        key(&mut a, KeyCode::Left);
        let to = a.run.micro_batch;
        if to == from {
            assert_eq!(panel, None);
            break;
        }
        assert_eq!(panel, Some((from.to_string(), to.to_string())));
        assert_eq!(a.run.effective_batch(), 36);
    }
    assert_eq!(a.run.micro_batch, 1);
}

fn app_without_nvml() -> App {
    let file = config::parse(
        vramfit_core::presets::built_in("24gb").unwrap(),
        "24gb",
        None,
        &vramfit_core::resolve::Offline::from_env(),
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
    let (run, capacity) = (a.run.clone(), a.estimate.capacity_bytes);
    keys(&mut a, "p");
    key(&mut a, KeyCode::Down);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.run.model_name, "unsloth/Qwen2.5-1.5B-Instruct");
    assert_ne!(a.gpu.capacity, capacity);
    keys(&mut a, "u");
    assert_eq!(a.run, run);
    assert_eq!(a.gpu.capacity, capacity);
    assert_eq!(a.estimate.capacity_bytes, capacity);
    assert_eq!(a.gpu.name, "24gb's gpu_memory");
    // the lock too
    assert!(a.lock);
    keys(&mut a, "b");
    assert!(!a.lock);
    keys(&mut a, "u");
    assert!(a.lock);
}

/// The header: the lines above the GPU's.
fn header_of(s: &str) -> String {
    s.lines()
        .take_while(|l| !l.starts_with(" GPU"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_setting_is_in_the_header_whole_at_every_size() {
    let unsloth = [
        "unsloth",
        "16-bit weights",
        "gc unsloth",
        "ref off",
        "adamw_8bit",
        "standby off",
        "fp8 KV off",
    ];
    let trl = [
        "trl",
        "4-bit NF4 weights",
        "gc on",
        "ref β 0.04",
        "paged_adamw_8bit",
        "vLLM sleep off",
    ];
    for (w, h) in SIZES {
        let mut a = app();
        let s = screen(&a, w, h);
        for setting in unsloth {
            assert!(header_of(&s).contains(setting), "{w}x{h}: {setting}\n{s}");
        }
        keys(&mut a, "t4ro");
        let s = screen(&a, w, h);
        for setting in trl {
            assert!(header_of(&s).contains(setting), "{w}x{h}: {setting}\n{s}");
        }
        assert!(!header_of(&s).contains("fp8 KV"), "{s}");
    }
}

/// All of help's text at `w` x `h`, page after page, its frame taken off and its lines joined
/// with single spaces.
fn help_text(a: &mut App, w: u16, h: u16) -> String {
    resize(a, w, h);
    keys(a, "?");
    let mut pages = vec![];
    loop {
        let s = screen(a, w, h);
        if pages.last() == Some(&s) {
            break;
        }
        pages.push(s);
        key(a, KeyCode::PageDown);
        assert!(matches!(a.mode, Mode::Help { .. }));
    }
    key(a, KeyCode::Esc);
    assert_eq!(a.mode, Mode::Normal);
    let mut lines: Vec<String> = vec![];
    for page in &pages {
        for l in page.lines() {
            let inner = l
                .trim()
                .trim_start_matches('│')
                .trim_end_matches('│')
                .trim();
            if !inner.is_empty()
                && !inner.starts_with('┌')
                && !inner.starts_with('└')
                && lines.last().map(String::as_str) != Some(inner)
            {
                lines.push(inner.to_string());
            }
        }
    }
    lines
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn long_text_is_cut_at_a_word_and_help_has_all_of_it() {
    let mut a = app();
    let mut cut = 0;
    for (w, h) in SIZES {
        let s = screen(&a, w, h);
        for step in &a.step_downs {
            let c = &step.change;
            let Some(line) = s
                .lines()
                .find(|l| l.contains(c.lever.label()) && l.contains(&format!("{} → ", c.from)))
            else {
                continue;
            };
            // the trade-off follows what the step saves or costs
            let first_word = c.trade_off.split(' ').next().unwrap();
            let Some(saved) = line.find("saves ").or(line.find("costs ")) else {
                continue;
            };
            let Some(at) = line[saved..].find(first_word).map(|i| saved + i) else {
                continue;
            };
            let shown = &line[at..];
            match shown.strip_suffix('…') {
                Some(part) => {
                    cut += 1;
                    assert!(c.trade_off.starts_with(part), "{line}");
                    assert!(
                        c.trade_off[part.len()..].starts_with(' '),
                        "cut in a word: {line}"
                    );
                }
                None => assert_eq!(shown, c.trade_off, "{w}x{h}"),
            }
        }
    }
    assert!(cut > 0, "nothing was long enough to be shortened");
    // help has the whole of it, at the minimum size (wrapped, paged) as at 200 columns (each on
    // one line), and its own lines are never cut
    for (w, h) in [(60, 20), (200, 60)] {
        let text = help_text(&mut a, w, h);
        for step in &a.step_downs {
            assert!(
                text.contains(step.change.trade_off),
                "{w}x{h}: {}\n{text}",
                step.change.trade_off
            );
        }
        assert!(
            text.contains("fit: the nearest configuration that fits (5% headroom)"),
            "{text}"
        );
        assert!(text.contains("q, Ctrl-C"), "{text}");
    }
    resize(&mut a, 200, 60);
    keys(&mut a, "?");
    let s = screen(&a, 200, 60);
    for step in &a.step_downs {
        assert!(s.lines().any(|l| l.contains(step.change.trade_off)), "{s}");
    }
    assert!(
        s.contains("fit: the nearest configuration that fits (5% headroom)"),
        "{s}"
    );
}

/// The id or preset name on a picker's selected row (`│ ▶ name ...`).
fn selected_row(s: &str) -> Option<String> {
    s.lines()
        .find_map(|l| l.split_once("│ ▶ ").map(|(_, rest)| rest.to_string()))
}

#[test]
fn the_pickers_scroll_with_the_same_keys_and_the_filter_takes_words_in_any_order() {
    assert_eq!(App::model_matches("qwen3 8b"), ["Qwen/Qwen3-8B"]);
    assert_eq!(App::model_matches("8B QWEN3"), ["Qwen/Qwen3-8B"]);
    let mut a = app();
    keys(&mut a, "m");
    keys(&mut a, "8b qwen3");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.run.model_name, "Qwen/Qwen3-8B");

    for (w, h) in [(60, 20), (80, 24)] {
        let mut a = app();
        resize(&mut a, w, h);
        let all = App::model_matches("");
        keys(&mut a, "m");
        key(&mut a, KeyCode::Tab); // browse: j/k move
        key(&mut a, KeyCode::Home);
        // every model can be reached and is on screen when selected
        for (i, id) in all.iter().enumerate() {
            let Mode::Models { selected, .. } = a.mode else {
                panic!("{:?}", a.mode)
            };
            assert_eq!(selected, i);
            let s = screen(&a, w, h);
            let row = selected_row(&s).unwrap_or_default();
            assert!(row.starts_with(id), "{w}x{h} {id}: {row}\n{s}");
            keys(&mut a, "j");
        }
        key(&mut a, KeyCode::Home);
        key(&mut a, KeyCode::PageDown);
        let Mode::Models { selected, .. } = a.mode else {
            panic!()
        };
        assert!(selected > 1 && selected < all.len() - 1, "{selected}");
        key(&mut a, KeyCode::PageUp);
        assert!(matches!(a.mode, Mode::Models { selected: 0, .. }));
        key(&mut a, KeyCode::End);
        assert!(
            selected_row(&screen(&a, w, h))
                .unwrap()
                .starts_with(all[all.len() - 1])
        );
        keys(&mut a, "k");
        assert!(
            selected_row(&screen(&a, w, h))
                .unwrap()
                .starts_with(all[all.len() - 2])
        );
        key(&mut a, KeyCode::Esc);

        // presets: the same keys; each row shows the model and the capacity
        keys(&mut a, "p");
        keys(&mut a, "j");
        let s = screen(&a, w, h);
        let row = selected_row(&s).unwrap();
        assert!(row.starts_with("12gb"), "{s}");
        assert!(
            row.contains("unsloth/Qwen2.5-1.5B-Instruct") || w < 80,
            "{row}"
        );
        assert!(row.contains("GiB") || row.contains("GB"), "{row}");
        key(&mut a, KeyCode::End);
        key(&mut a, KeyCode::Home);
        key(&mut a, KeyCode::PageDown);
        keys(&mut a, "k");
        key(&mut a, KeyCode::Up);
        key(&mut a, KeyCode::Down);
        let Mode::Presets { selected, .. } = &a.mode else {
            panic!()
        };
        assert!(*selected > 0);
        key(&mut a, KeyCode::Home);
        keys(&mut a, "j");
        key(&mut a, KeyCode::Enter);
        assert_eq!(a.run.model_name, "unsloth/Qwen2.5-1.5B-Instruct");
    }
}

fn mouse(a: &mut App, kind: ratatui::crossterm::event::MouseEventKind, column: u16, row: u16) {
    redraw(a);
    a.update(Msg::Mouse(ratatui::crossterm::event::MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }));
}

/// The track of `knob` on a `w` x `h` screen: (first column, last column, row).
fn track(a: &App, knob: Knob, w: u16, h: u16) -> (u16, u16, u16) {
    let sliders = view::areas(a, ratatui::layout::Rect::new(0, 0, w, h)).sliders;
    let i = a.knobs().iter().position(|k| *k == knob).unwrap();
    let (_, cells) = view::knob_rows(a, sliders)
        .into_iter()
        .find(|(k, _)| *k == i)
        .unwrap();
    (cells[1].x, cells[1].right() - 1, cells[1].y)
}

#[test]
fn the_mouse_focuses_sets_drags_and_steps() {
    use ratatui::crossterm::event::{MouseButton, MouseEventKind as M};
    for (w, h) in SIZES {
        let mut a = app();
        resize(&mut a, w, h);
        // a click on a knob's label focuses it
        let (x0, x1, y) = track(&a, Knob::Generations, w, h);
        mouse(&mut a, M::Down(MouseButton::Left), 3, y);
        mouse(&mut a, M::Up(MouseButton::Left), 3, y);
        assert_eq!(a.focused(), Knob::Generations);
        assert_eq!(a.run.num_generations, 4);
        // on its track: the ladder's rung there; a drag follows; one undo takes the whole drag
        mouse(&mut a, M::Down(MouseButton::Left), x0, y);
        assert_eq!(a.run.num_generations, 2);
        mouse(&mut a, M::Drag(MouseButton::Left), (x0 + x1) / 2, y);
        mouse(&mut a, M::Drag(MouseButton::Left), x1 + 5, y + 3);
        mouse(&mut a, M::Up(MouseButton::Left), x1 + 5, y + 3);
        // the far end is the largest rung that divides the batch of 8 (64 would be 0.125
        // prompts a step)
        assert_eq!(a.run.num_generations, 8, "{w}x{h}");
        assert_eq!(a.focused(), Knob::Generations);
        keys(&mut a, "u");
        assert_eq!(a.run.num_generations, 4);
        // the wheel over a knob focuses and steps it
        // (the list may scroll to keep the focused knob mid-window: its row is found again)
        let (_, _, y) = track(&a, Knob::LoraRank, w, h);
        mouse(&mut a, M::ScrollUp, 2, y);
        assert_eq!((a.focused(), a.run.lora_rank), (Knob::LoraRank, 64));
        for _ in 0..2 {
            let (_, _, y) = track(&a, Knob::LoraRank, w, h);
            mouse(&mut a, M::ScrollDown, 2, y);
        }
        assert_eq!(a.run.lora_rank, 16);
        // the lock holds under the mouse too: the far end of the micro-batch is 8 of 8
        let (_, x1, y) = track(&a, Knob::MicroBatch, w, h);
        mouse(&mut a, M::Down(MouseButton::Left), x1, y);
        mouse(&mut a, M::Up(MouseButton::Left), x1, y);
        assert_eq!((a.run.micro_batch, a.run.grad_accum), (8, 1));
        // with a popup open, clicks do nothing; the wheel moves the list
        keys(&mut a, "p");
        mouse(&mut a, M::Down(MouseButton::Left), x1, y);
        mouse(&mut a, M::ScrollDown, x1, y);
        assert!(
            matches!(a.mode, Mode::Presets { selected: 1, .. }),
            "{:?}",
            a.mode
        );
        key(&mut a, KeyCode::Esc);
        assert_eq!(a.run.micro_batch, 8);
    }
    // below the minimum size the mouse changes nothing either
    let mut a = app();
    resize(&mut a, 40, 12);
    let run = a.run.clone();
    for y in 0..12 {
        mouse(&mut a, M::Down(MouseButton::Left), 20, y);
        mouse(&mut a, M::ScrollUp, 20, y);
    }
    assert_eq!(a.run, run);
}

/// The open-r1 example (7 training H100s under DeepSpeed ZeRO-3, `trl vllm-serve` on an
/// eighth), its `[distributed]` engine replaced by `engine` when given, on its own 79.19 GiB
/// with no NVML.
fn open_r1(engine: Option<&str>, dir: &std::path::Path) -> App {
    let mut text = std::fs::read_to_string("examples/multi-gpu/open-r1-7plus1-h100.toml").unwrap();
    if let Some(engine) = engine {
        text = text
            .replace("engine = \"deepspeed\"", &format!("engine = \"{engine}\""))
            .replace("zero_stage = 3\n", "zero_stage = 0\n");
    }
    let file = config::parse(
        &text,
        "open-r1",
        None,
        &vramfit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let capacity = file.gpu_memory.unwrap();
    let gpu = GpuState {
        capacity,
        capacity_from_user: true,
        name: "H100".into(),
        live: None,
        unavailable: None,
    };
    App::new(file, gpu, Theme::mono(), dir.to_path_buf())
}

#[test]
fn both_roles_are_drawn_at_80x24() {
    let a = open_r1(None, std::path::Path::new("."));
    let s = screen(&a, 80, 24);
    insta::assert_snapshot!("open_r1_80x24", s);
    // larger, the legend names every part of both roles; at the minimum both bars stay
    let large = screen(&a, 200, 60);
    for role in &a.estimate.roles {
        for c in &role.components {
            assert!(large.contains(c.name), "{}\n{large}", c.name);
        }
    }
    let small = screen(&a, 60, 20);
    assert!(
        small.contains(" training ×7") && small.contains(" vLLM server ×1"),
        "{small}"
    );
    assert!(small.contains("vLLM 7.10 GiB free"), "{small}");
}

#[test]
fn a_vllm_server_that_cannot_start_is_said_so_and_the_run_does_not_fit() {
    let text = std::fs::read_to_string("examples/multi-gpu/open-r1-7plus1-h100.toml")
        .unwrap()
        .replace(
            "gpu_memory_utilization = 0.9",
            "gpu_memory_utilization = 0.15",
        );
    let file = config::parse(
        &text,
        "open-r1",
        None,
        &vramfit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let gpu = GpuState {
        capacity: file.gpu_memory.unwrap(),
        capacity_from_user: true,
        name: "H100".into(),
        live: None,
        unavailable: None,
    };
    let a = App::new(file, gpu, Theme::mono(), ".".into());
    assert!(a.estimate.roles[0].fits && !a.estimate.fits);
    // wide, the title names the start-up check that fails on the server's GPUs
    let server = a.estimate.roles[1].vllm.as_ref().unwrap();
    let reason = server.refusal.as_ref().unwrap().reason.name();
    let s = screen(&a, 200, 40);
    assert!(
        s.contains(&format!("vLLM server ×1 vLLM cannot start: {reason}")),
        "{s}"
    );
    let s = screen(&a, 80, 24);
    assert!(s.contains("DOES NOT FIT"), "{s}");
    assert!(
        s.contains("vLLM refuses to start") || s.contains("won't start"),
        "{s}"
    );
}

/// Exports `a` into `dir` and loads the file back: the run, and its estimate's verdict per role.
fn export_and_reload(a: &mut App, dir: &std::path::Path) -> config::RunFile {
    let name = a
        .run
        .model_name
        .rsplit('/')
        .next()
        .unwrap()
        .to_ascii_lowercase();
    let path = dir.join(format!("vramfit-{name}.toml"));
    _ = std::fs::remove_file(&path);
    keys(a, "s");
    config::load(&path, &vramfit_core::resolve::Offline::from_env())
        .unwrap_or_else(|e| panic!("{e}\n{}", std::fs::read_to_string(&path).unwrap()))
}

#[test]
fn the_engine_and_zero_stage_keys_move_the_spread_and_the_estimate() {
    use vramfit_core::memory::estimate::{Estimator, GpuBudget};
    use vramfit_core::run::spread::Engine;
    let dir = tempfile::tempdir().unwrap();
    let mut a = open_r1(Some("ddp"), dir.path());
    let spread = |a: &App| (a.run.spread.engine, a.run.spread.stage());
    assert_eq!(spread(&a), (Engine::Ddp, 0));
    // DDP holds the whole 7B model's states on every rank: the training GPUs are short
    assert!(!a.estimate.fits && !a.estimate.roles[0].fits);
    let s = screen(&a, 80, 24);
    assert!(s.contains("DOES NOT FIT") && s.contains("SHORT BY"), "{s}");
    assert!(
        s.contains("training ×7") && s.contains("vLLM server ×1"),
        "{s}"
    );
    // DDP has no stages: z says so and changes nothing
    keys(&mut a, "z");
    assert_eq!(spread(&a), (Engine::Ddp, 0));
    assert!(a.message.as_deref().unwrap().contains("DDP has no ZeRO"));
    keys(&mut a, "d");
    assert_eq!(spread(&a), (Engine::DeepSpeed, 0));
    let mut totals = vec![a.estimate.total_bytes];
    for stage in 1..=3 {
        keys(&mut a, "z");
        assert_eq!(spread(&a), (Engine::DeepSpeed, stage));
        totals.push(a.estimate.total_bytes);
    }
    assert!(totals.windows(2).all(|w| w[0] > w[1]), "{totals:?}");
    // ZeRO-3 fits, every role
    assert!(a.estimate.fits && a.estimate.roles.iter().all(|r| r.fits));
    let s = screen(&a, 80, 24);
    assert!(
        s.contains("DeepSpeed ZeRO-3") && s.contains(" fits ·"),
        "{s}"
    );
    // every engine and stage the keys reach exports a file that loads back to the same run
    // and the same estimate
    let capacity = a.gpu.capacity;
    let budget = GpuBudget {
        capacity,
        used_by_others: 0,
        context: None,
    };
    for press in ["", "z", "d", "z", "z", "d", "d", "z"] {
        keys(&mut a, press);
        assert_eq!(a.mode, Mode::Normal, "{press}: {:?}", a.message);
        let back = export_and_reload(&mut a, dir.path());
        assert_eq!(back.run, a.run, "{:?}", a.run.spread);
        let again = Estimator::new().estimate(&back.run, budget);
        assert_eq!(again.total_bytes, a.estimate.total_bytes);
        assert_eq!(again.fits, a.estimate.fits);
    }
    // undo walks back through the engines
    while a.run.spread.engine != Engine::Ddp || a.run.spread.stage() != 0 {
        keys(&mut a, "u");
    }
    assert!(!a.estimate.fits);
}

#[test]
fn the_gpus_knob_keeps_the_locked_effective_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = open_r1(None, dir.path());
    assert!(a.lock);
    while a.focused() != Knob::Gpus {
        key(&mut a, KeyCode::Tab);
    }
    let shape = |a: &App| (a.run.gpus, a.run.grad_accum, a.run.effective_batch());
    assert_eq!(shape(&a), (7, 8, 896));
    // locked, the GPU counts that keep 896 = 16 per device x accumulation x GPUs
    key(&mut a, KeyCode::Right);
    assert_eq!(shape(&a), (8, 7, 896));
    assert_eq!(a.estimate.roles[0].gpus, 8);
    key(&mut a, KeyCode::Right);
    assert_eq!(shape(&a), (14, 4, 896));
    key(&mut a, KeyCode::Left);
    key(&mut a, KeyCode::Left);
    assert_eq!(shape(&a), (7, 8, 896));
    // 6 GPUs would need 9.33 accumulation steps: refused, the counts that keep it named
    type_value(&mut a, "6");
    assert_eq!(shape(&a), (7, 8, 896));
    let Mode::Entry {
        error: Some(error), ..
    } = &a.mode
    else {
        panic!("6 accepted: {:?}", a.mode);
    };
    assert!(error.contains("batch locked at 896"), "{error}");
    key(&mut a, KeyCode::Esc);
    // unlocked, the batch follows the GPUs
    keys(&mut a, "b");
    key(&mut a, KeyCode::Right);
    assert_eq!(shape(&a), (8, 8, 1024));
    let back = export_and_reload(&mut a, dir.path());
    assert_eq!(back.run, a.run);
}

#[test]
fn a_single_gpu_run_shows_the_gpus_knob_once_the_engine_key_is_pressed() {
    let mut a = app();
    assert!(!a.knobs().contains(&Knob::Gpus));
    assert!(!screen(&a, 80, 24).contains("d engine"));
    keys(&mut a, "d");
    assert!(a.knobs().contains(&Knob::Gpus));
    let s = screen(&a, 200, 60);
    assert!(
        s.contains("DeepSpeed ZeRO-0") && s.contains("d engine"),
        "{s}"
    );
    assert!(s.contains("GPUs") && s.contains(" gpus"), "{s}");
    // undo takes the engine back, the knob stays for the session
    keys(&mut a, "u");
    assert_eq!(a.run.spread, vramfit_core::run::spread::Spread::default());
    assert!(a.knobs().contains(&Knob::Gpus));
}

/// Appends `text` to the log at `path`, as `vramfit run` and the callback do.
fn append(path: &std::path::Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// The screen on the 24 GiB preset following the log at `path`: each look is what the screen's
/// poller would hand it.
struct Followed {
    app: App,
    tail: vramfit_core::measure::tail::Tail,
}

impl Followed {
    fn new(path: &std::path::Path) -> Followed {
        let mut app = app();
        app.follow = Some(vramfit::tui::follow::Following::new("run.jsonl"));
        let tail = vramfit_core::measure::tail::Tail::open(path).unwrap();
        Followed { app, tail }
    }

    fn look(&mut self) {
        let change = self.tail.look();
        self.app.update(Msg::Log(change));
    }
}

const GIB: u64 = 1 << 30;

fn nvml_line(tree: u64) -> String {
    format!(
        "{{\"kind\": \"nvml\", \"t\": 0.5, \"gpus\": [{{\"index\": 0, \"name\": \"Test GPU\", \"used\": {}, \"total\": {}}}], \"tree\": {tree}}}\n",
        tree + GIB,
        24 * GIB
    )
}

fn step_line(step: u64, reserved: u64) -> String {
    format!(
        "{{\"kind\": \"step\", \"step\": {step}, \"max_allocated\": {}, \"max_reserved\": {reserved}, \"free\": {}, \"total\": {}}}\n",
        reserved - GIB,
        8 * GIB,
        24 * GIB
    )
}

/// The row of the bar that carries `label` (` training`), and where ◆ is on it.
fn marker_on(s: &str, label: &str) -> Option<usize> {
    let line = s.lines().find(|l| l.starts_with(label))?;
    line.chars().position(|c| c == '◆')
}

#[test]
fn the_screen_follows_a_run_log_written_in_steps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    append(
        &path,
        &format!(
            "{{\"kind\": \"prediction\", \"device\": \"Test GPU\", \"total\": {}, \"stack\": \"unsloth\"}}\n{}{}",
            24 * GIB,
            nvml_line(9 * GIB),
            nvml_line(11 * GIB)
        ),
    );
    let mut f = Followed::new(&path);
    let predicted = format_size(f.app.estimate.total_bytes);
    f.look();
    // NVML's peak for the process tree, no step yet
    let s = screen(&f.app, 200, 60);
    assert!(
        s.contains(&format!(
            "◆ following run.jsonl · measured peak 11.00 GiB (predicted {predicted}, +11.6 %)"
        )),
        "{s}"
    );
    assert!(marker_on(&s, " training").is_some(), "{s}");
    assert!(marker_on(&s, " generation").is_none(), "{s}");
    assert!(s.contains("whole process (NVML peak)"), "{s}");
    assert!(
        !s.contains("peak reserved (torch)"),
        "no step line yet\n{s}"
    );

    // a step line: torch's reserved peak and the CUDA context pass NVML's peak
    append(&path, &step_line(1, 11 * GIB));
    f.look();
    let context = f
        .app
        .estimate
        .components
        .iter()
        .find(|c| c.part == vramfit_core::memory::estimate::Part::CudaContext)
        .unwrap()
        .bytes;
    let peak = format_size(11 * GIB + context);
    let s = screen(&f.app, 200, 60);
    assert!(
        s.contains(&format!(
            "following run.jsonl · step 1 · measured peak {peak}"
        )),
        "{s}"
    );
    assert!(s.contains("peak reserved (torch)"), "{s}");
    let at = |w: u16| {
        28 + ((11 * GIB + context) as f64 / (24 * GIB) as f64 * f64::from(w - 29)).round() as usize
    };
    assert_eq!(marker_on(&s, " training"), Some(at(200)), "{s}");

    // half a line: nothing new, no notice; the rest of it later: step 2
    let line = step_line(2, 10 * GIB);
    let (head, tail) = line.split_at(40);
    append(&path, head);
    f.look();
    let s = screen(&f.app, 80, 24);
    assert!(
        s.contains(&format!("◆ step 1 · measured peak {peak}")),
        "{s}"
    );
    assert!(!s.contains(" ! "), "half a line is no error\n{s}");
    append(&path, tail);
    f.look();
    let s = screen(&f.app, 80, 24);
    assert!(
        s.contains(&format!("◆ step 2 · measured peak {peak}")),
        "{s}"
    );
    assert_eq!(marker_on(&s, " training"), Some(at(80)), "{s}");
    insta::assert_snapshot!("follow_80x24", s);
    // at the minimum size the footer is still there and the status shortened
    let s = screen(&f.app, 60, 20);
    assert!(s.lines().last().unwrap().contains("q quit"), "{s}");
    assert!(
        s.contains(&format!(
            "◆ measured {peak}, predicted {predicted} (+3.8 %)"
        )),
        "{s}"
    );
    assert!(marker_on(&s, " training").is_some(), "{s}");
}

#[test]
fn a_followed_log_that_goes_wrong_is_a_notice_on_screen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    append(&path, &nvml_line(11 * GIB));
    let mut f = Followed::new(&path);
    f.look();
    assert!(!screen(&f.app, 80, 24).contains(" ! "));
    // junk
    append(&path, "Traceback (most recent call last):\n");
    f.look();
    let s = screen(&f.app, 200, 60);
    assert!(s.contains(" ! run.jsonl:2: not a JSON line"), "{s}");
    // another GPU than the screen's
    append(
        &path,
        "{\"kind\": \"start\", \"device\": \"NVIDIA H200\", \"total\": 150754820096}\n",
    );
    f.look();
    let s = screen(&f.app, 200, 60);
    assert!(
        s.contains(
            "the log's GPU (NVIDIA H200, 140.40 GiB) is not the one estimated for (24.00 GiB)"
        ),
        "{s}"
    );
    // gone, then written anew
    std::fs::remove_file(&path).unwrap();
    f.look();
    let s = screen(&f.app, 200, 60);
    assert!(s.contains("run.jsonl: cannot read"), "{s}");
    append(&path, &nvml_line(5 * GIB));
    f.look();
    let s = screen(&f.app, 200, 60);
    assert!(s.contains("run.jsonl was cut or written anew"), "{s}");
    assert!(s.contains("measured peak 5.00 GiB"), "{s}");
    assert!(
        !s.contains("not a JSON line"),
        "the new file has no junk\n{s}"
    );
    // help has the figures and the notices whole (read at the size the screen is drawn at)
    resize(&mut f.app, 200, 60);
    keys(&mut f.app, "?");
    key(&mut f.app, KeyCode::End);
    let s = screen(&f.app, 200, 60);
    assert!(s.contains("measured, in the run followed"), "{s}");
    assert!(s.contains("whole process (NVML peak)"), "{s}");
    for (w, h) in [(0, 0), (10, 5), (59, 19), (60, 20), (80, 24), (300, 80)] {
        screen(&f.app, w, h);
    }
}

/// `d` on an Unsloth run with vLLM here passes over FSDP, which Unsloth refuses with vLLM.
#[test]
fn the_engine_key_passes_over_what_unsloth_refuses() {
    use vramfit_core::run::spread::Engine;
    let mut a = app();
    assert_eq!(a.run.spread.engine, Engine::Ddp);
    keys(&mut a, "d");
    assert_eq!(a.run.spread.engine, Engine::DeepSpeed);
    keys(&mut a, "d");
    assert_eq!(a.run.spread.engine, Engine::Ddp);
}

/// A full fine-tune has no adapter: no LoRA-rank slider.
#[test]
fn a_full_fine_tune_has_no_lora_rank_knob() {
    let text = std::fs::read_to_string("examples/multi-gpu/open-r1-7plus1-h100.toml").unwrap();
    let a = app_of(&text, std::path::Path::new("."), Theme::mono());
    assert!(a.run.full_finetuning);
    assert!(!a.knobs().contains(&Knob::LoraRank));
    assert!(app().knobs().contains(&Knob::LoraRank));
}

#[test]
fn a_vllm_refusal_is_named_not_shown_as_a_shortfall() {
    // 24gb preset, vLLM share 0.15: the memory fits but vLLM's start-up check fails
    let a = type_share("0.15");
    assert_eq!(Knob::VllmShare.get(&a.run), Some(15));
    assert!(!a.estimate.fits && a.estimate.headroom_bytes > 0);
    let reason = a
        .estimate
        .vllm
        .as_ref()
        .unwrap()
        .refusal
        .as_ref()
        .unwrap()
        .reason;
    for w in [80, 120] {
        let s = screen(&a, w, 24);
        assert!(!s.contains("SHORT BY"), "{s}");
        assert!(
            s.contains(&format!("vLLM cannot start: {}", reason.name())),
            "{s}"
        );
    }
}

#[test]
fn the_levers_never_offer_a_step_that_stops_vllm_starting() {
    use vramfit_core::memory::estimate::{Estimator, GpuBudget};
    // Llama-3.1-8B in 16-bit: `f` raises the share to 0.70, where one rung down (0.65) leaves
    // vLLM no room to start
    let mut a = app();
    keys(&mut a, "m");
    keys(&mut a, "llama-3.1");
    key(&mut a, KeyCode::Enter);
    if a.run.quant != vramfit_core::run::Quant::Bf16 {
        keys(&mut a, "4");
    }
    assert_eq!(a.run.quant, vramfit_core::run::Quant::Bf16);
    keys(&mut a, "f");
    assert_eq!(Knob::VllmShare.get(&a.run), Some(70), "{:?}", a.message);
    assert!(a.estimate.vllm.as_ref().unwrap().starts);
    assert!(!a.step_downs.is_empty());
    let gpu = GpuBudget {
        capacity: 24 << 30,
        used_by_others: 0,
        context: None,
    };
    let mut est = Estimator::new();
    for step in &a.step_downs {
        let e = est.estimate(&step.run, gpu);
        assert!(
            e.vllm.as_ref().is_none_or(|v| v.starts),
            "{:?}",
            step.change
        );
    }
    let s = screen(&a, 120, 40);
    assert!(!s.contains("0.70 → 0.65"), "{s}");
}

#[test]
fn typing_replaces_the_prefilled_value() {
    // Enter pre-fills 0.45; `15%` replaces it (it used to append: 0.4515%)
    let mut a = app();
    key(&mut a, KeyCode::Enter);
    assert!(screen(&a, 80, 24).contains("[0.45]"));
    keys(&mut a, "15%");
    assert!(
        matches!(&a.mode, Mode::Entry { text, .. } if text == "15%"),
        "{:?}",
        a.mode
    );
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(Knob::VllmShare.get(&a.run), Some(15));
    // an arrow key keeps the value for editing: typing then appends
    let mut a = app();
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Right);
    keys(&mut a, "5");
    assert!(matches!(&a.mode, Mode::Entry { text, .. } if text == "0.455"));
    // the refusal's example is a share that is taken, inside 5 % to 95 %
    key(&mut a, KeyCode::Enter);
    let Mode::Entry {
        error: Some(error), ..
    } = &a.mode
    else {
        panic!("{:?}", a.mode)
    };
    assert!(error.contains("e.g. 45% or 46%"), "{error}");
    let e = Knob::VllmShare.parse("0.005").unwrap_err().to_string();
    assert!(
        e.contains("e.g. 5%") && !e.contains("0%") && !e.contains(" 1%"),
        "{e}"
    );
}

/// Whether `a`'s run is a whole number of prompts per step (generations divide the batch).
fn whole_prompts(a: &App) -> bool {
    a.run
        .effective_batch()
        .is_multiple_of(a.run.num_generations)
        && !a.run.unsloth_raises_batch()
}

#[test]
fn unlocked_steps_and_clicks_land_only_on_whole_groups() {
    use ratatui::crossterm::event::{MouseButton, MouseEventKind};
    let mut a = app();
    resize(&mut a, 80, 24);
    if a.lock {
        keys(&mut a, "b");
    }
    assert!(!a.lock);
    // micro-batch, every rung up then down: never batch 6 = 1.5 prompts x 4 generations
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::MicroBatch);
    for code in [KeyCode::Right, KeyCode::Left] {
        for _ in 0..16 {
            key(&mut a, code);
            assert!(whole_prompts(&a), "{:?}", a.run);
        }
    }
    // a click anywhere on the generations track
    let (x0, x1, y) = track(&a, Knob::Generations, 80, 24);
    for x in x0..=x1 {
        mouse(&mut a, MouseEventKind::Down(MouseButton::Left), x, y);
        mouse(&mut a, MouseEventKind::Up(MouseButton::Left), x, y);
        assert!(
            whole_prompts(&a),
            "click at {x}: {} gens, batch {}",
            a.run.num_generations,
            a.run.effective_batch()
        );
    }
    let s = screen(&a, 80, 24);
    assert!(!s.contains(".5 prompts"), "{s}");
}

#[test]
fn a_run_of_split_groups_is_not_exported() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app_in(dir.path(), Theme::mono());
    if a.lock {
        keys(&mut a, "b");
    }
    // typed, the generations may split the batch of 8; the export says the rule instead
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::Generations);
    key(&mut a, KeyCode::Enter);
    keys(&mut a, "3");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.run.num_generations, 3, "{:?}", a.mode);
    keys(&mut a, "s");
    let message = a.message.clone().unwrap();
    assert!(
        message.starts_with("not exported: num_generations = 3") && message.contains("Unsloth"),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_long_refusal_wraps_and_keeps_its_fix() {
    let mut a = app();
    keys(&mut a, "t");
    assert_eq!(a.run.stack, Stack::Trl);
    if a.lock {
        keys(&mut a, "b");
    }
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::Generations);
    key(&mut a, KeyCode::Enter);
    keys(&mut a, "3");
    key(&mut a, KeyCode::Enter);
    let Mode::Entry {
        error: Some(error), ..
    } = &a.mode
    else {
        panic!("{:?}", a.mode)
    };
    assert!(error.len() > 120, "{error}");
    // at 80 columns the refusal is whole, its rule's source included
    let s = screen(&a, 80, 24);
    let words: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("= 8) divisible by it (GRPOConfig.__post_init__) · Esc cancels"),
        "{s}"
    );
    // narrower, the middle gives way but the end (how to get out) stays
    let s = screen(&a, 60, 20);
    assert!(s.contains("Esc cancels"), "{s}");
}
