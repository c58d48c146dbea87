//! The model picker with a name the catalog lacks: the lookup (the cache, then the Hub
//! stand-in on 127.0.0.1) runs off the UI thread with a spinner line, Esc cancels it, and offline
//! the picker says it did not look on the Hub.
#![allow(clippy::unwrap_used)]

use grpofit::hub::online::{Access, Hub, Say};
use grpofit::hub::remote::Remote;
use grpofit::tui::app::{App, GpuState, Mode, Msg};
use grpofit::tui::runner::Runner;
use grpofit::tui::theme::Theme;
use grpofit::tui::view;
use grpofit_core::config;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::hub_repos::{TINY, TINY_CONFIG, sharded, tiny_tensors};
use crate::common::hub_server::HubServer;

/// The 24gb preset's screen, looking names up in `cache` and on the Hub at `endpoint`.
fn app(cache: &std::path::Path, endpoint: Option<&str>) -> App {
    app_saying(cache, endpoint, Arc::new(|_| {}))
}

/// `app`, with the Hub client's `say` (the program's writes to standard error).
fn app_saying(cache: &std::path::Path, endpoint: Option<&str>, say: Say) -> App {
    let file = config::parse(
        grpofit::presets::built_in("24gb").unwrap(),
        "test",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let gpu = GpuState {
        capacity: 24 << 30,
        capacity_from_user: true,
        name: "Test GPU".into(),
        live: None,
        unavailable: None,
    };
    let mut a = App::new(file, gpu, Theme::mono(), cache.to_path_buf());
    let access = match endpoint {
        Some(e) => Access::Online(Hub {
            remote: Arc::new(Remote::new(e.to_string(), None)),
            say,
        }),
        None => Access::Offline("HF_HUB_OFFLINE=1".into()),
    };
    a.look_up_in(Some(cache.to_path_buf()), access);
    a
}

/// A key, as the screen's loop hands it over; `r` runs what it asks (the lookup).
fn press(a: &mut App, r: &mut Runner, code: KeyCode) {
    r.dispatch(a, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// `m`, the name typed, Enter: returns how long the UI thread took.
fn pick(a: &mut App, r: &mut Runner, name: &str) -> Duration {
    let started = Instant::now();
    press(a, r, KeyCode::Char('m'));
    name.chars().for_each(|c| press(a, r, KeyCode::Char(c)));
    press(a, r, KeyCode::Enter);
    started.elapsed()
}

fn screen(a: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(120, 30)).unwrap();
    t.draw(|f| {
        view::draw(f, a);
    })
    .unwrap();
    let buf = t.backend().buffer();
    buf.content().iter().map(|c| c.symbol()).collect()
}

/// Polls as the event loop does until the lookup answers (10 s at most).
fn wait(a: &mut App, r: &mut Runner) {
    let started = Instant::now();
    while r.looking_up() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        for news in r.poll() {
            r.dispatch(a, news);
        }
    }
    assert!(!r.looking_up(), "the lookup did not answer");
}

#[test]
fn a_typed_name_is_fetched_off_the_ui_thread() {
    let hub = HubServer::start(
        [(TINY.to_string(), sharded(TINY_CONFIG, tiny_tensors()))]
            .into_iter()
            .collect(),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut a = app(dir.path(), Some(&hub.endpoint));
    let mut r = Runner::new();
    press(&mut a, &mut r, KeyCode::Char('m'));
    TINY.chars()
        .for_each(|c| press(&mut a, &mut r, KeyCode::Char(c)));
    let s = screen(&a);
    assert!(
        s.contains("no match in the catalog: Enter looks \"test/tiny-llama\" up"),
        "{s}"
    );
    press(&mut a, &mut r, KeyCode::Esc);
    let took = pick(&mut a, &mut r, TINY);
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert_eq!(
        *a.mode(),
        Mode::Fetching {
            name: TINY.to_string()
        }
    );
    let s = screen(&a);
    assert!(s.contains(&format!("fetching… {TINY}")), "{s}");
    assert!(s.contains("Esc cancels"), "{s}");
    wait(&mut a, &mut r);
    assert_eq!(*a.mode(), Mode::Normal);
    assert_eq!(a.run().model_name, TINY, "{:?}", a.message());
    assert_eq!(a.run().arch.parameters(), 106_816);
    assert_eq!(a.run().stored_weights.map(|w| w.bytes), Some(213_632));
    let message = a.message().unwrap().to_string();
    assert!(
        message.contains("Hugging Face Hub, test/tiny-llama"),
        "{message}"
    );
    // it is in the cache now: offline finds it there
    let mut offline = app(dir.path(), None);
    let mut ro = Runner::new();
    pick(&mut offline, &mut ro, TINY);
    wait(&mut offline, &mut ro);
    assert_eq!(offline.run().model_name, TINY, "{:?}", offline.message());
    assert!(offline.message().unwrap().contains("Hugging Face cache"));
}

#[test]
fn esc_cancels_a_lookup_that_does_not_answer() {
    // accepts, never answers: only the Hub client's read timeout would end it
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mut a = app(dir.path(), Some(&endpoint));
    let mut r = Runner::new();
    let before = a.run().model_name.clone();
    let took = pick(&mut a, &mut r, "org/never-answers");
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert!(matches!(*a.mode(), Mode::Fetching { .. }));
    press(&mut a, &mut r, KeyCode::Esc);
    assert_eq!(*a.mode(), Mode::Normal);
    assert!(!r.looking_up());
    assert_eq!(a.run().model_name, before);
    assert_eq!(a.message(), Some("looking up org/never-answers: cancelled"));
}

#[test]
fn offline_the_picker_says_it_did_not_look_on_the_hub() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app(dir.path(), None);
    let mut r = Runner::new();
    let before = a.run().model_name.clone();
    pick(&mut a, &mut r, "org/nowhere");
    wait(&mut a, &mut r);
    assert_eq!(a.run().model_name, before);
    let message = a.message().unwrap().to_string();
    assert!(
        message.contains("unknown model org/nowhere")
            && message.contains("did not look on the Hugging Face Hub (HF_HUB_OFFLINE=1)"),
        "{message}"
    );
}

#[test]
fn the_hubs_notices_go_to_the_status_line_not_under_the_screen() {
    let hub = HubServer::start(
        [(TINY.to_string(), sharded(TINY_CONFIG, tiny_tensors()))]
            .into_iter()
            .collect(),
    );
    let dir = tempfile::tempdir().unwrap();
    // the program's own `say` writes to standard error: record what reaches it
    let written = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = written.clone();
    let say: Say = Arc::new(move |s| record.lock().unwrap().push(s.to_string()));
    let mut a = app_saying(dir.path(), Some(&hub.endpoint), say);
    let mut r = Runner::new();
    pick(&mut a, &mut r, TINY);
    wait(&mut a, &mut r);
    assert_eq!(a.run().model_name, TINY, "{:?}", a.message());
    assert!(
        written.lock().unwrap().is_empty(),
        "{:?}",
        written.lock().unwrap()
    );
    // kept for standard error once the screen is closed, the latest shown while fetching
    assert!(
        a.hub_notices()
            .iter()
            .any(|n| n.contains("fetching config.json of test/tiny-llama")),
        "{:?}",
        a.hub_notices()
    );
    let last = a.lookup_notice().unwrap().to_string();
    assert!(last.contains("safetensors headers"), "{last}");
    assert!(!last.starts_with("grpofit: "), "{last}");
}
