//! The screen's pickers and mouse, and the spread over GPUs (engine, ZeRO stage, the GPUs knob),
//! vLLM's refusals and the levers offered, without a terminal.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::tui::*;
use grpofit::tui::app::{App, GpuState, Mode, Msg};
use grpofit::tui::theme::Theme;
use grpofit::tui::view;
use grpofit_core::config;
use grpofit_core::run::Stack;
use grpofit_core::run::knobs::Knob;
use ratatui::crossterm::event::{KeyCode, KeyModifiers};

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
    assert_eq!(a.run().model_name, "Qwen/Qwen3-8B");

    for (w, h) in [(60, 20), (80, 24)] {
        let mut a = app();
        resize(&mut a, w, h);
        let all = App::model_matches("");
        keys(&mut a, "m");
        key(&mut a, KeyCode::Tab); // browse: j/k move
        key(&mut a, KeyCode::Home);
        // every model can be reached and is on screen when selected
        for (i, id) in all.iter().enumerate() {
            let Mode::Models { selected, .. } = *a.mode() else {
                panic!("{:?}", *a.mode())
            };
            assert_eq!(selected, i);
            let s = screen(&a, w, h);
            let row = selected_row(&s).unwrap_or_default();
            assert!(row.starts_with(id), "{w}x{h} {id}: {row}\n{s}");
            keys(&mut a, "j");
        }
        key(&mut a, KeyCode::Home);
        key(&mut a, KeyCode::PageDown);
        let Mode::Models { selected, .. } = *a.mode() else {
            panic!()
        };
        assert!(selected > 1 && selected < all.len() - 1, "{selected}");
        key(&mut a, KeyCode::PageUp);
        assert!(matches!(*a.mode(), Mode::Models { selected: 0, .. }));
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
        let Mode::Presets { selected, .. } = a.mode() else {
            panic!()
        };
        assert!(*selected > 0);
        key(&mut a, KeyCode::Home);
        keys(&mut a, "j");
        key(&mut a, KeyCode::Enter);
        assert_eq!(a.run().model_name, "unsloth/Qwen2.5-1.5B-Instruct");
    }
}

fn mouse(a: &mut App, kind: ratatui::crossterm::event::MouseEventKind, column: u16, row: u16) {
    redraw(a);
    let at = ratatui::crossterm::event::MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    send(a, Msg::Mouse(at));
}

/// Whether `knob`'s row is drawn on a `w` x `h` screen.
fn shown(a: &App, knob: Knob, w: u16, h: u16) -> bool {
    let sliders = view::areas(a, ratatui::layout::Rect::new(0, 0, w, h)).sliders;
    let i = a.knobs().iter().position(|k| *k == knob).unwrap();
    view::knob_rows(a, sliders).into_iter().any(|(k, _)| k == i)
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
        assert_eq!(a.run().num_generations, 4);
        // on its track: the ladder's rung there; a drag follows; one undo takes the whole drag
        mouse(&mut a, M::Down(MouseButton::Left), x0, y);
        assert_eq!(a.run().num_generations, 2);
        mouse(&mut a, M::Drag(MouseButton::Left), (x0 + x1) / 2, y);
        mouse(&mut a, M::Drag(MouseButton::Left), x1 + 5, y + 3);
        mouse(&mut a, M::Up(MouseButton::Left), x1 + 5, y + 3);
        // the far end is the largest rung that divides the batch of 8 (64 would be 0.125
        // prompts a step)
        assert_eq!(a.run().num_generations, 8, "{w}x{h}");
        assert_eq!(a.focused(), Knob::Generations);
        keys(&mut a, "u");
        assert_eq!(a.run().num_generations, 4);
        // the wheel over a knob focuses and steps it
        // (the list may scroll to keep the focused knob mid-window: its row is found again;
        // on the smallest screen, under the time bar, the knob is first scrolled into view)
        if !shown(&a, Knob::LoraRank, w, h) {
            while a.focused() != Knob::LoraRank {
                keys(&mut a, "j");
            }
            redraw(&mut a);
        }
        let (_, _, y) = track(&a, Knob::LoraRank, w, h);
        mouse(&mut a, M::ScrollUp, 2, y);
        assert_eq!((a.focused(), a.run().lora_rank), (Knob::LoraRank, 64));
        for _ in 0..2 {
            let (_, _, y) = track(&a, Knob::LoraRank, w, h);
            mouse(&mut a, M::ScrollDown, 2, y);
        }
        assert_eq!(a.run().lora_rank, 16);
        // the lock holds under the mouse too: the far end of the micro-batch is 8 of 8
        let (_, x1, y) = track(&a, Knob::MicroBatch, w, h);
        mouse(&mut a, M::Down(MouseButton::Left), x1, y);
        mouse(&mut a, M::Up(MouseButton::Left), x1, y);
        assert_eq!((a.run().micro_batch, a.run().grad_accum), (8, 1));
        // with a popup open, clicks do nothing; the wheel moves the list
        keys(&mut a, "p");
        mouse(&mut a, M::Down(MouseButton::Left), x1, y);
        mouse(&mut a, M::ScrollDown, x1, y);
        assert!(
            matches!(*a.mode(), Mode::Presets { selected: 1, .. }),
            "{:?}",
            *a.mode()
        );
        key(&mut a, KeyCode::Esc);
        assert_eq!(a.run().micro_batch, 8);
    }
    // below the minimum size the mouse changes nothing either
    let mut a = app();
    resize(&mut a, 40, 12);
    let run = a.run().clone();
    for y in 0..12 {
        mouse(&mut a, M::Down(MouseButton::Left), 20, y);
        mouse(&mut a, M::ScrollUp, 20, y);
    }
    assert_eq!(*a.run(), run);
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
        &grpofit_core::resolve::Offline::from_env(),
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
    assert!(a.estimate().roles[0].fits && !a.estimate().fits);
    // wide, the title names the start-up check that fails on the server's GPUs
    let server = a.estimate().roles[1].vllm.as_ref().unwrap();
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
        .run()
        .model_name
        .rsplit('/')
        .next()
        .unwrap()
        .to_ascii_lowercase();
    let path = dir.join(format!("grpofit-{name}.toml"));
    _ = std::fs::remove_file(&path);
    keys(a, "s");
    config::load(&path, &grpofit_core::resolve::Offline::from_env())
        .unwrap_or_else(|e| panic!("{e}\n{}", std::fs::read_to_string(&path).unwrap()))
}

#[test]
fn the_engine_and_zero_stage_keys_move_the_spread_and_the_estimate() {
    use grpofit_core::memory::estimate::{Estimator, GpuBudget};
    use grpofit_core::run::spread::Engine;
    let dir = tempfile::tempdir().unwrap();
    let mut a = open_r1(Some("ddp"), dir.path());
    let spread = |a: &App| (a.run().spread.engine, a.run().spread.stage());
    assert_eq!(spread(&a), (Engine::Ddp, 0));
    // DDP holds the whole 7B model's states on every rank: the training GPUs are short
    assert!(!a.estimate().fits && !a.estimate().roles[0].fits);
    let s = screen(&a, 80, 24);
    assert!(s.contains("DOES NOT FIT") && s.contains("SHORT BY"), "{s}");
    assert!(
        s.contains("training ×7") && s.contains("vLLM server ×1"),
        "{s}"
    );
    // DDP has no stages: z says so and changes nothing
    keys(&mut a, "z");
    assert_eq!(spread(&a), (Engine::Ddp, 0));
    assert!(a.message().unwrap().contains("DDP has no ZeRO"));
    keys(&mut a, "d");
    assert_eq!(spread(&a), (Engine::DeepSpeed, 0));
    let mut totals = vec![a.estimate().total_bytes];
    for stage in 1..=3 {
        keys(&mut a, "z");
        assert_eq!(spread(&a), (Engine::DeepSpeed, stage));
        totals.push(a.estimate().total_bytes);
    }
    assert!(totals.windows(2).all(|w| w[0] > w[1]), "{totals:?}");
    // ZeRO-3 fits, every role
    assert!(a.estimate().fits && a.estimate().roles.iter().all(|r| r.fits));
    let s = screen(&a, 80, 24);
    assert!(
        s.contains("DeepSpeed ZeRO-3") && s.contains(" fits ·"),
        "{s}"
    );
    // every engine and stage the keys reach exports a file that loads back to the same run
    // and the same estimate
    let capacity = a.gpu().capacity;
    let budget = GpuBudget {
        capacity,
        used_by_others: 0,
        context: None,
    };
    for press in ["", "z", "d", "z", "z", "d", "d", "z"] {
        keys(&mut a, press);
        assert_eq!(*a.mode(), Mode::Normal, "{press}: {:?}", a.message());
        let back = export_and_reload(&mut a, dir.path());
        assert_eq!(back.run, *a.run(), "{:?}", a.run().spread);
        let again = Estimator::new().estimate(&back.run, budget);
        assert_eq!(again.total_bytes, a.estimate().total_bytes);
        assert_eq!(again.fits, a.estimate().fits);
    }
    // undo walks back through the engines
    while a.run().spread.engine != Engine::Ddp || a.run().spread.stage() != 0 {
        keys(&mut a, "u");
    }
    assert!(!a.estimate().fits);
}

#[test]
fn the_gpus_knob_keeps_the_locked_effective_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = open_r1(None, dir.path());
    assert!(a.batch_locked());
    while a.focused() != Knob::Gpus {
        key(&mut a, KeyCode::Tab);
    }
    let shape = |a: &App| (a.run().gpus, a.run().grad_accum, a.run().effective_batch());
    assert_eq!(shape(&a), (7, 8, 896));
    // locked, the GPU counts that keep 896 = 16 per device x accumulation x GPUs
    key(&mut a, KeyCode::Right);
    assert_eq!(shape(&a), (8, 7, 896));
    assert_eq!(a.estimate().roles[0].gpus, 8);
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
    } = a.mode()
    else {
        panic!("6 accepted: {:?}", *a.mode());
    };
    assert!(error.contains("batch locked at 896"), "{error}");
    key(&mut a, KeyCode::Esc);
    // unlocked, the batch follows the GPUs
    keys(&mut a, "b");
    key(&mut a, KeyCode::Right);
    assert_eq!(shape(&a), (8, 8, 1024));
    let back = export_and_reload(&mut a, dir.path());
    assert_eq!(back.run, *a.run());
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
    assert_eq!(a.run().spread, grpofit_core::run::spread::Spread::default());
    assert!(a.knobs().contains(&Knob::Gpus));
}

/// `d` on an Unsloth run with vLLM here passes over FSDP, which Unsloth refuses with vLLM.
#[test]
fn the_engine_key_passes_over_what_unsloth_refuses() {
    use grpofit_core::run::spread::Engine;
    let mut a = app();
    assert_eq!(a.run().spread.engine, Engine::Ddp);
    keys(&mut a, "d");
    assert_eq!(a.run().spread.engine, Engine::DeepSpeed);
    keys(&mut a, "d");
    assert_eq!(a.run().spread.engine, Engine::Ddp);
}

/// A full fine-tune has no adapter: no LoRA-rank slider.
#[test]
fn a_full_fine_tune_has_no_lora_rank_knob() {
    let text = std::fs::read_to_string("examples/multi-gpu/open-r1-7plus1-h100.toml").unwrap();
    let a = app_of(&text, std::path::Path::new("."), Theme::mono());
    assert!(a.run().full_finetuning);
    assert!(!a.knobs().contains(&Knob::LoraRank));
    assert!(app().knobs().contains(&Knob::LoraRank));
}

#[test]
fn a_vllm_refusal_is_named_not_shown_as_a_shortfall() {
    // 24gb preset, vLLM share 0.15: the memory fits but vLLM's start-up check fails
    let a = type_share("0.15");
    assert_eq!(Knob::VllmShare.get(a.run()), Some(15));
    assert!(!a.estimate().fits && a.estimate().headroom_bytes > 0);
    let reason = a
        .estimate()
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
    use grpofit_core::memory::estimate::{Estimator, GpuBudget};
    // Llama-3.1-8B in 16-bit: `f` raises the share to 0.70, where one rung down (0.65) leaves
    // vLLM no room to start
    let mut a = app();
    keys(&mut a, "m");
    keys(&mut a, "llama-3.1");
    key(&mut a, KeyCode::Enter);
    if a.run().quant != grpofit_core::run::Quant::Bf16 {
        keys(&mut a, "4");
    }
    assert_eq!(a.run().quant, grpofit_core::run::Quant::Bf16);
    keys(&mut a, "f");
    assert_eq!(Knob::VllmShare.get(a.run()), Some(70), "{:?}", a.message());
    assert!(a.estimate().vllm.as_ref().unwrap().starts);
    assert!(!a.step_downs().is_empty());
    let gpu = GpuBudget {
        capacity: 24 << 30,
        used_by_others: 0,
        context: None,
    };
    let mut est = Estimator::new();
    for step in a.step_downs() {
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

/// Whether `a`'s run is a whole number of prompts per step (generations divide the batch).
fn whole_prompts(a: &App) -> bool {
    a.run()
        .effective_batch()
        .is_multiple_of(a.run().num_generations)
        && !a.run().unsloth_raises_batch()
}

#[test]
fn unlocked_steps_and_clicks_land_only_on_whole_groups() {
    use ratatui::crossterm::event::{MouseButton, MouseEventKind};
    let mut a = app();
    resize(&mut a, 80, 24);
    if a.batch_locked() {
        keys(&mut a, "b");
    }
    assert!(!a.batch_locked());
    // micro-batch, every rung up then down: never batch 6 = 1.5 prompts x 4 generations
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::MicroBatch);
    for code in [KeyCode::Right, KeyCode::Left] {
        for _ in 0..16 {
            key(&mut a, code);
            assert!(whole_prompts(&a), "{:?}", *a.run());
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
            a.run().num_generations,
            a.run().effective_batch()
        );
    }
    let s = screen(&a, 80, 24);
    assert!(!s.contains(".5 prompts"), "{s}");
}

#[test]
fn a_long_refusal_wraps_and_keeps_its_fix() {
    let mut a = app();
    keys(&mut a, "t");
    assert_eq!(a.run().stack, Stack::Trl);
    if a.batch_locked() {
        keys(&mut a, "b");
    }
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focused(), Knob::Generations);
    key(&mut a, KeyCode::Enter);
    keys(&mut a, "3");
    key(&mut a, KeyCode::Enter);
    let Mode::Entry {
        error: Some(error), ..
    } = a.mode()
    else {
        panic!("{:?}", *a.mode())
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

/// The preset picker cuts a model name wider than the frame with an ellipsis (found at 60x20:
/// `unsloth/Meta-Llama-3.1-8B-Instruct-b│`).
#[test]
fn the_preset_picker_cuts_a_long_model_name_with_an_ellipsis() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = crate::tui::app_in(dir.path(), Theme::mono());
    crate::tui::resize(&mut a, 60, 20);
    keys(&mut a, "p");
    let s = screen(&a, 60, 20);
    let row = s
        .lines()
        .find(|l| l.contains("22gib"))
        .unwrap_or_else(|| panic!("{s}"));
    assert!(row.contains("unsloth/Meta-Llama-3.1-8B-Instruct…"), "{row}");
    assert!(row.trim_end().ends_with('│'), "{row}");
}
