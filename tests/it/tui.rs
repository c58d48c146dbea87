//! The interactive screen without a terminal: keys in, state out; whole-screen snapshots at
//! 80x24 with a fixed GPU, in colour and without; any size drawn without panicking; help, the
//! header and the followed run at every size. The helpers here (a screen on a preset, a key as the
//! loop hands it over, a frame drawn) serve `tui_keys` and `tui_spread` too.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit::gpu::GpuInfo;
use grpofit::tui::app::{App, GpuState, Mode, Msg};
use grpofit::tui::runner::Runner;
use grpofit::tui::theme::Theme;
use grpofit::tui::view;
use grpofit_core::config;
use grpofit_core::memory::estimate::Phase;
use grpofit_core::run::knobs::Knob;
use grpofit_core::units::format_size;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub(crate) fn app_in(dir: &std::path::Path, theme: Theme) -> App {
    app_of(grpofit::presets::built_in("24gb").unwrap(), dir, theme)
}

/// The screen on the run file `text`, with the fixed 24 GiB test GPU.
pub(crate) fn app_of(text: &str, dir: &std::path::Path, theme: Theme) -> App {
    let file = config::parse(
        text,
        "test",
        None,
        &grpofit_core::resolve::Offline::from_env(),
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

pub(crate) fn app() -> App {
    app_in(std::path::Path::new("."), Theme::mono())
}

/// Hands `msg` to `app` as the screen's loop does: the commands it answers with are run (a file
/// written, the fit searched) and their answers handed back.
pub(crate) fn send(app: &mut App, msg: Msg) {
    Runner::new().dispatch(app, msg);
}

/// Draws `app` at `w` x `h` and hands it what was drawn, as the screen's loop does.
pub(crate) fn resize(app: &mut App, w: u16, h: u16) {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut drawn = None;
    t.draw(|f| drawn = Some(view::draw(f, app))).unwrap();
    send(app, Msg::Drawn(drawn.unwrap()));
}

/// Draws `app` again at the size it was last drawn at: the loop draws before each event.
pub(crate) fn redraw(app: &mut App) {
    if let Some((w, h)) = app.drawn_size() {
        resize(app, w, h);
    }
}

pub(crate) fn key(app: &mut App, code: KeyCode) {
    redraw(app);
    send(app, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

pub(crate) fn keys(app: &mut App, text: &str) {
    text.chars().for_each(|c| key(app, KeyCode::Char(c)));
}

pub(crate) fn screen(app: &App, w: u16, h: u16) -> String {
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

/// Types `text` into the vLLM share's entry (focused at start) and presses Enter.
pub(crate) fn type_share(text: &str) -> App {
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
pub(crate) const SIZES: [(u16, u16); 3] = [(60, 20), (80, 24), (200, 60)];

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

/// The screen's line for `phase`'s bar (its label starts the line).
fn phase_line(s: &str, phase: Phase) -> Option<&str> {
    let label = format!("{} ", phase.label());
    s.lines().find(|l| l.trim_start().starts_with(&label))
}

#[test]
fn two_phases_are_two_bars_each_with_its_total_and_the_peak_marked() {
    let here = std::path::Path::new(".");
    let preset = grpofit::presets::built_in("24gb").unwrap();
    // vLLM colocated, everything kept while training: training is the peak; in standby vLLM
    // gives its KV cache back, and generation is
    let standby = preset.replace("[env]\n", "[env]\nUNSLOTH_VLLM_STANDBY = \"1\"\n");
    for (text, peak) in [
        (preset, Phase::Training),
        (standby.as_str(), Phase::Generation),
    ] {
        let a = app_of(text, here, Theme::mono());
        let e = a.estimate();
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
        for p in &a.estimate().phases {
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
    let server = "[grpofit]\nstack = \"trl\"\nmax_prompt_length = 256\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n[grpo]\nuse_vllm = true\nvllm_mode = \"server\"\n";
    let a = app_of(server, here, Theme::mono());
    assert!(a.estimate().phases.is_empty());
    let s = screen(&a, 80, 24);
    assert!(phase_line(&s, Phase::Generation).is_none(), "{s}");
    for r in &a.estimate().roles {
        let label = format!(" {} ×{}", r.role.label(), r.gpus);
        let line = s
            .lines()
            .find(|l| l.starts_with(&label))
            .unwrap_or_else(|| panic!("{label}\n{s}"));
        assert!(line.contains(&format_size(r.total_bytes)), "{line}");
    }
    assert!(!s.contains(" peak "), "{s}");
}

/// The value `knob` shows on its slider row.
pub(crate) fn shown(a: &App, knob: Knob) -> String {
    knob.get(a.run()).map_or("-".into(), |v| knob.show(v))
}

/// The screen's line that holds the focused knob (`▶ label ... value`).
pub(crate) fn focused_line(s: &str) -> Option<&str> {
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
    let (run, focus) = (a.run().clone(), a.focused());
    for c in "LlHhjkctr4obumpsfex".chars() {
        key(&mut a, KeyCode::Char(c));
        assert_eq!(*a.mode(), Mode::Normal, "{c}");
    }
    for code in [KeyCode::Right, KeyCode::Left, KeyCode::Tab, KeyCode::Enter] {
        key(&mut a, code);
    }
    assert_eq!(*a.run(), run);
    assert_eq!(a.focused(), focus);
    assert!(a.pinned().is_none());
    assert!(!a.quits());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(screen(&a, 40, 12).contains("60x20"));
    keys(&mut a, "?");
    assert!(matches!(*a.mode(), Mode::Help { .. }), "{:?}", *a.mode());
    key(&mut a, KeyCode::Esc);
    assert_eq!(*a.mode(), Mode::Normal);
    // grown back: keys work again
    resize(&mut a, 80, 24);
    keys(&mut a, "l");
    assert_ne!(*a.run(), run);
    resize(&mut a, 40, 12);
    keys(&mut a, "q");
    assert_eq!(*a.mode(), Mode::ConfirmQuit);
    keys(&mut a, "n");
    assert!(a.quits());
}

pub(crate) fn ctrl_c(a: &mut App) {
    send(
        a,
        Msg::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
    );
}

pub(crate) fn type_value(a: &mut App, text: &str) {
    key(a, KeyCode::Enter);
    for _ in 0..16 {
        key(a, KeyCode::Backspace);
    }
    keys(a, text);
    key(a, KeyCode::Enter);
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

/// An attention other than transformers' default is a setting of the header: the step's memory
/// follows it (`RunConfig::modelled_attention`); SDPA, the default, is not shown.
#[test]
fn the_header_names_an_attention_other_than_sdpa() {
    let run = |line: &str| {
        format!(
            "[grpofit]\nstack = \"trl\"\nmax_prompt_length = 512\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n{line}\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 512\nuse_vllm = false\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    for (line, shown) in [
        (
            "attn_implementation = \"flash_attention_2\"\n",
            Some("flash_attention_2 attention"),
        ),
        ("attn_implementation = \"eager\"\n", Some("eager attention")),
        ("", None),
    ] {
        let a = app_of(&run(line), dir.path(), Theme::mono());
        let header = header_of(&screen(&a, 120, 40));
        match shown {
            Some(setting) => assert!(header.contains(setting), "{header}"),
            None => assert!(!header.contains("attention"), "{header}"),
        }
    }
}

/// All of help's text at `w` x `h`, page after page, its frame taken off and its lines joined
/// with single spaces.
pub(crate) fn help_text(a: &mut App, w: u16, h: u16) -> String {
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
        assert!(matches!(*a.mode(), Mode::Help { .. }));
    }
    key(a, KeyCode::Esc);
    assert_eq!(*a.mode(), Mode::Normal);
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
        for step in a.step_downs() {
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
        for step in a.step_downs() {
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
    for step in a.step_downs() {
        assert!(s.lines().any(|l| l.contains(step.change.trade_off)), "{s}");
    }
    assert!(
        s.contains("fit: the nearest configuration that fits (5% headroom)"),
        "{s}"
    );
}

/// The open-r1 example (7 training H100s under DeepSpeed ZeRO-3, `trl vllm-serve` on an
/// eighth), its `[distributed]` engine replaced by `engine` when given, on its own 79.19 GiB
/// with no NVML.
pub(crate) fn open_r1(engine: Option<&str>, dir: &std::path::Path) -> App {
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
        &grpofit_core::resolve::Offline::from_env(),
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
    for role in &a.estimate().roles {
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

/// Appends `text` to the log at `path`, as `grpofit run` and the callback do.
pub(crate) fn append(path: &std::path::Path, text: &str) {
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
    tail: grpofit_core::measure::tail::Tail,
}

impl Followed {
    fn new(path: &std::path::Path) -> Followed {
        let mut app = app();
        app.follow(grpofit::tui::follow::Following::new("run.jsonl"));
        let tail = grpofit_core::measure::tail::Tail::open(path).unwrap();
        Followed { app, tail }
    }

    fn look(&mut self) {
        let change = self.tail.look();
        send(&mut self.app, Msg::Log(change));
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
    let predicted = format_size(f.app.estimate().total_bytes);
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
        .estimate()
        .components
        .iter()
        .find(|c| c.part == grpofit_core::memory::estimate::Part::CudaContext)
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
