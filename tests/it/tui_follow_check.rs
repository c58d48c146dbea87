//! `--follow` and `check` on the same log show one comparison: the same predicted figure and
//! verdict, with the CUDA context `grpofit calibrate` learned for the log's device.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use grpofit::tui::app::{App, GpuState, Msg};
use grpofit::tui::follow::Following;
use grpofit::tui::theme::Theme;
use grpofit::tui::view;
use grpofit_core::config;
use grpofit_core::measure::calibration::{self, Calibration, Entry, RunSample};
use grpofit_core::measure::tail::Tail;
use grpofit_core::units::format_size;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const GIB: u64 = 1 << 30;

fn screen(a: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(200, 60)).unwrap();
    t.draw(|f| {
        view::draw(f, a);
    })
    .unwrap();
    let buf = t.backend().buffer();
    buf.content()
        .chunks(200)
        .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn follow_and_check_share_one_comparison_calibration_included() {
    let dir = tempfile::tempdir().unwrap();
    let preset = grpofit::presets::built_in("24gb").unwrap();
    let file = config::parse(
        preset,
        "24gb",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let stack = file.run.stack.name();
    // a context learned on this card: 2 GiB, far from the built-in one
    let learned = Calibration {
        entries: vec![Entry {
            gpu: "Test GPU".into(),
            stack: stack.into(),
            runs: vec![RunSample {
                log: "earlier.jsonl".into(),
                context: 2 * GIB,
                steps: 3,
                slack: 1.05,
                predicted_slack: None,
                time: None,
            }],
        }],
    };
    std::fs::write(
        dir.path().join("calibration.toml"),
        calibration::to_toml(&learned),
    )
    .unwrap();
    let log = dir.path().join("run.jsonl");
    std::fs::write(
        &log,
        format!(
            "{{\"kind\": \"start\", \"device\": \"Test GPU\", \"total\": {t}}}\n\
             {{\"kind\": \"step\", \"step\": 1, \"max_allocated\": {a}, \"max_reserved\": {r}, \"free\": {f}, \"total\": {t}}}\n",
            t = 24 * GIB,
            a = 9 * GIB,
            r = 10 * GIB,
            f = 11 * GIB,
        ),
    )
    .unwrap();
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env("GRPOFIT_CONFIG_DIR", dir.path())
        .args(["check", "--no-gpu", "--json", "--preset", "24gb"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let checked: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(checked["calibrated"].is_string(), "{checked}");
    let used = checked["predicted"]["used"].as_u64().unwrap();

    // the screen on the same run, following the same log with the same calibration
    let gpu = GpuState {
        capacity: 24 * GIB,
        capacity_from_user: false,
        name: "Test GPU".into(),
        live: None,
        unavailable: None,
    };
    let mut a = App::new(file, gpu, Theme::mono(), dir.path().to_path_buf());
    let mut following = Following::new("run.jsonl");
    following.calibration = Some(learned);
    a.follow(following);
    let mut tail = Tail::open(&log).unwrap();
    grpofit::tui::runner::Runner::new().dispatch(&mut a, Msg::Log(tail.look()));
    // the screen's own estimate keeps the built-in context; the comparison is check's
    assert_ne!(a.estimate().total_bytes, used);
    let s = screen(&a);
    assert!(
        s.contains(&format!("(predicted {}", format_size(used))),
        "{s}"
    );
    for row in checked["rows"].as_array().unwrap() {
        let name = row["name"].as_str().unwrap();
        let line = s
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name}\n{s}"));
        let predicted = format_size(row["predicted_bytes"].as_u64().unwrap());
        let error = format!("{:+.1} %", row["error_percent"].as_f64().unwrap());
        let verdict = row["verdict"].as_str().unwrap().replace('_', " ");
        assert!(
            line.contains(&predicted) && line.contains(&error) && line.contains(&verdict),
            "{line}\n{row}"
        );
    }
}
