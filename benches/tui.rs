// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use grpofit::tui::app::{App, GpuState, Msg};
use grpofit::tui::theme::Theme;
use grpofit::tui::view;
use grpofit_core::config;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::hint::black_box;

fn start(preset: &str, trl: bool) -> App {
    let mut file = config::parse(
        grpofit::presets::built_in(preset).unwrap(),
        preset,
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    if trl {
        file.run.stack = grpofit_core::run::Stack::Trl;
    }
    let gpu = GpuState {
        capacity: 24 << 30,
        capacity_from_user: true,
        name: "bench".into(),
        live: None,
        unavailable: None,
    };
    App::new(file, gpu, Theme::from_env(), std::env::temp_dir())
}

fn bench(c: &mut Criterion) {
    for trl in [false, true] {
        let stack = if trl { "trl" } else { "unsloth" };
        let mut app = start("24gb", trl);
        let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
        let mut up = true;
        // alternate the vLLM share up and down: each press recomputes the estimate and the levers
        c.bench_function(&format!("key press + full render 80x24 ({stack})"), |b| {
            b.iter(|| {
                let code = if up { KeyCode::Right } else { KeyCode::Left };
                up = !up;
                _ = app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
                term.draw(|f| {
                    black_box(view::draw(f, black_box(&app)));
                })
                .unwrap();
            })
        });
        let mut micro = true;
        let mut app = start("24gb", trl);
        _ = app.update(Msg::Key(KeyEvent::new(
            KeyCode::Char('j'),
            KeyModifiers::NONE,
        )));
        _ = app.update(Msg::Key(KeyEvent::new(
            KeyCode::Char('j'),
            KeyModifiers::NONE,
        )));
        c.bench_function(
            &format!("micro-batch key + full render 80x24 ({stack})"),
            |b| {
                b.iter(|| {
                    let code = if micro { KeyCode::Right } else { KeyCode::Left };
                    micro = !micro;
                    _ = app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
                    term.draw(|f| {
                        black_box(view::draw(f, black_box(&app)));
                    })
                    .unwrap();
                })
            },
        );
        c.bench_function(&format!("start to first frame, no GPU ({stack})"), |b| {
            b.iter(|| {
                let app = start("24gb", trl);
                let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
                term.draw(|f| {
                    black_box(view::draw(f, &app));
                })
                .unwrap();
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
