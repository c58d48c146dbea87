//! The screen's time bar (`view::timebar`): one step's seconds by phase on the card the run
//! file names, recomputed as the knobs move, said plainly when the card is unknown; and TRL's
//! sequence knob (`vllm_max_model_length`) hidden when the run generates without vLLM.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::tui::*;
use grpofit::tui::app::{App, GpuState};
use grpofit::tui::theme::Theme;
use grpofit_core::config;
use grpofit_core::run::knobs::Knob;

/// The screen on `text` without NVML: the card is the run file's `[grpofit] gpu`.
fn app_without_nvml(text: &str) -> App {
    let file = config::parse(
        text,
        "test",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let gpu = GpuState {
        capacity: 24 << 30,
        capacity_from_user: true,
        name: "--gpu-mem".into(),
        live: None,
        unavailable: Some("--no-gpu".into()),
    };
    App::new(file, gpu, Theme::mono(), std::path::PathBuf::from("."))
}

fn preset_24gb() -> App {
    app_without_nvml(grpofit::presets::built_in("24gb").unwrap())
}

#[test]
fn the_time_bar_at_80x24_and_on_a_tall_screen() {
    let a = preset_24gb();
    let small = screen(&a, 80, 24);
    assert!(
        small.contains("step ≈ ") && small.contains("on RTX 4090"),
        "{small}"
    );
    insta::assert_snapshot!("time_bar_80x24", small);
    let tall = screen(&a, 120, 40);
    assert!(tall.contains("g generation"), "{tall}");
    insta::assert_snapshot!("time_bar_120x40", tall);
}

#[test]
fn the_time_bar_follows_the_knobs() {
    let mut a = preset_24gb();
    resize(&mut a, 80, 24);
    let before = a.step_time().unwrap().phase("generation");
    while a.focused() != Knob::CompletionLength {
        keys(&mut a, "j");
    }
    keys(&mut a, "l");
    let after = a.step_time().unwrap().phase("generation");
    assert!(a.run().completion_len > 768, "{}", a.run().completion_len);
    assert!(after > before * 1.1, "{before} → {after}");
    let s = screen(&a, 80, 24);
    let shown = format!(
        "step ≈ {}",
        grpofit_core::time::seconds(a.step_time().unwrap().seconds)
    );
    assert!(s.contains(&shown), "{shown}\n{s}");
}

#[test]
fn an_unknown_card_is_said_not_invented() {
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("gpu = \"RTX 4090\"", "gpu = \"Voodoo 5\"");
    let a = app_without_nvml(&text);
    assert!(a.step_time().unwrap_err().contains("Voodoo 5"));
    for (w, h) in [(60, 20), (80, 24), (200, 60)] {
        let s = screen(&a, w, h);
        assert!(s.contains("step time: "), "{w}x{h}\n{s}");
        assert!(!s.contains("step ≈"), "{w}x{h}\n{s}");
    }
}

/// A TRL run, generating with vLLM or without.
fn trl(use_vllm: bool) -> String {
    format!(
        "[grpofit]\nstack = \"trl\"\ngpu = \"H100\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\n[grpo]\nper_device_train_batch_size = 4\ngradient_accumulation_steps = 2\nnum_generations = 8\nmax_completion_length = 512\nuse_vllm = {use_vllm}\n"
    )
}

#[test]
fn trls_sequence_knob_only_with_vllm() {
    assert!(
        app_without_nvml(&trl(true))
            .knobs()
            .contains(&Knob::SequenceLength)
    );
    let a = app_without_nvml(&trl(false));
    assert!(!a.knobs().contains(&Knob::SequenceLength));
    assert!(!screen(&a, 80, 24).contains("sequence "));
    // Unsloth's max_seq_length is the model's own: it stays without vLLM
    let unsloth = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("fast_inference = true", "fast_inference = false");
    let u = app_without_nvml(&unsloth);
    assert!(u.knobs().contains(&Knob::SequenceLength));
}

#[test]
fn each_lever_states_its_seconds() {
    let a = preset_24gb();
    let s = screen(&a, 120, 40);
    // QLoRA dequantises the frozen weights each pass: slower; a shorter context is quicker
    let line = |label: &str| s.lines().find(|l| l.contains(label)).unwrap().to_string();
    assert!(line("4-bit weights").contains(" +"), "{s}");
    assert!(line("saves 159.5 MiB").contains(" -"), "{s}");
    // help has the same figures
    let mut a = a;
    keys(&mut a, "?");
    let help = screen(&a, 200, 60);
    assert!(
        help.lines()
            .any(|l| l.contains("4-bit") && l.contains(" +")),
        "{help}"
    );
}

#[test]
fn f_searches_the_fastest_run_through_the_runner() {
    use grpofit::tui::app::Msg;
    use grpofit::tui::cmd::Cmd;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let mut a = preset_24gb();
    resize(&mut a, 80, 24);
    // update asks the loop for the search, and runs none itself
    let cmds = a.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('F'),
        KeyModifiers::SHIFT,
    )));
    assert!(matches!(cmds.as_slice(), [Cmd::Fastest { .. }]), "{cmds:?}");
    // through the runner: the answer applied, the speed-up said
    let before = a.step_time().unwrap().seconds;
    let learning = |r: &grpofit_core::run::RunConfig| {
        (
            r.num_generations,
            r.effective_batch(),
            r.completion_len,
            r.lora_rank,
        )
    };
    let kept = learning(a.run());
    keys(&mut a, "F");
    let msg = a.message().unwrap_or_default().to_string();
    assert!(msg.starts_with("fastest: "), "{msg}");
    let after = a.step_time().unwrap().seconds;
    assert!(after <= before + 1e-9, "{before} → {after}: {msg}");
    assert_eq!(learning(a.run()), kept);
    if after < before {
        assert!(msg.contains('×'), "{msg}");
        keys(&mut a, "u");
        assert!((a.step_time().unwrap().seconds - before).abs() < 1e-9);
    }
}

#[test]
fn f_without_a_card_says_why() {
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("gpu = \"RTX 4090\"", "gpu = \"Voodoo 5\"");
    let mut a = app_without_nvml(&text);
    use grpofit::tui::app::Msg;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let cmds = a.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('F'),
        KeyModifiers::SHIFT,
    )));
    assert!(cmds.is_empty());
    assert!(a.message().unwrap().contains("Voodoo 5"));
}

/// The screen on open-r1's full 7B fine-tune with one training GPU: no knob fits it there, and
/// `grpofit fit` adds GPUs (`multi_gpu::fit_names_the_fewest_gpus_that_fit`).
fn one_gpu_open_r1() -> App {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/multi-gpu/open-r1-7plus1-h100.toml"
    ))
    .unwrap()
    .replace("gpus = 7\n", "gpus = 1\n");
    let mut a = app_without_nvml(&text);
    resize(&mut a, 80, 24);
    a
}

#[test]
fn f_and_shift_f_keep_the_gpus_the_screen_shows() {
    let mut a = one_gpu_open_r1();
    assert_eq!(a.run().gpus, 1);
    let stage = a.run().spread;
    keys(&mut a, "f");
    let said = a.message().unwrap_or_default().to_string();
    assert_eq!((a.run().gpus, a.run().spread), (1, stage), "{said}");
    assert!(said.contains("1 GPU"), "{said}");
    keys(&mut a, "F");
    let said = a.message().unwrap_or_default().to_string();
    assert_eq!((a.run().gpus, a.run().spread), (1, stage), "{said}");
}

#[test]
fn the_screen_times_the_step_with_what_calibrate_learned_for_its_card() {
    use grpofit_core::measure::calibration::{Calibration, Entry, RunSample};
    use grpofit_core::measure::step_time::TimeSample;
    use grpofit_core::time::Efficiencies;
    let mut a = preset_24gb();
    resize(&mut a, 120, 40);
    let before = a.step_time().unwrap().seconds;
    let stack = a.run().stack.name();
    let sample = |gpu: &str| Entry {
        gpu: gpu.into(),
        stack: stack.into(),
        runs: vec![RunSample {
            log: "4090.jsonl".into(),
            context: 1 << 29,
            steps: 9,
            slack: 1.05,
            predicted_slack: None,
            time: Some(TimeSample {
                measured_seconds: 3.0,
                steps: 8,
                predicted_seconds: 2.0,
                generation: None,
                efficiencies: Efficiencies::default().slower_by(1.5),
            }),
        }],
    };
    // learned on another card: the declared efficiencies stay
    a.calibrated_with(Some(Calibration {
        entries: vec![sample("NVIDIA L4")],
    }));
    assert!((a.step_time().unwrap().seconds - before).abs() < 1e-12);
    a.calibrated_with(Some(Calibration {
        entries: vec![sample("NVIDIA GeForce RTX 4090")],
    }));
    let after = a.step_time().unwrap().seconds;
    // every term the efficiencies set takes 1.5 times as long; vLLM's host work a decode step
    // (`VLLM_STEP_SECONDS`) does not, so the whole step grows by less
    let grew = after / before;
    assert!(grew > 1.2 && grew < 1.5 + 1e-9, "{before} → {after}");
    let s = screen(&a, 120, 40);
    assert!(s.contains("(calibrated)"), "{s}");
    // a wide screen's phase line says what it was learned from
    let s = screen(&a, 200, 40);
    assert!(
        s.contains("step time calibrated on 8 steps of 4090.jsonl"),
        "{s}"
    );
}
