//! The interactive screen: Elm-style (state, `Msg`, a pure `update` that returns commands, pure
//! `draw`); the loop runs the commands (`runner`) and hands their answers back as messages. NVML
//! polled off the UI thread, the terminal restored on every exit.

pub mod app;
pub mod cmd;
pub mod drawn;
pub mod follow;
pub mod keymap;
pub mod log_poller;
pub mod lookup;
pub mod runner;
pub mod theme;
pub mod view;
pub mod widgets;

use crate::gpu::{GpuProbe, NvmlSession};
use app::{App, Msg};
use grpofit_core::measure::tail::Tail;
use log_poller::LogPoller;
use ratatui::crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind,
};
use runner::Runner;
use std::sync::mpsc;
use std::time::Duration;

/// Polls a GPU probe about twice a second on its own thread; stops when the screen closes.
/// NVML is opened on that thread, so a slow or missing driver never delays a frame.
fn spawn_gpu_poller() -> mpsc::Receiver<Result<crate::gpu::GpuInfo, String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let probe: Box<dyn GpuProbe> = match NvmlSession::open() {
            Ok(session) => Box::new(session),
            Err(why) => {
                let _ = tx.send(Err(why));
                return;
            }
        };
        while tx.send(probe.probe()).is_ok() {
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    rx
}

/// Mouse reporting on while it lives: turned off again however the screen ends (a return, an
/// error, a panic unwinding through it).
struct MouseCapture;

impl MouseCapture {
    fn on() -> std::io::Result<MouseCapture> {
        ratatui::crossterm::execute!(std::io::stdout(), EnableMouseCapture)?;
        Ok(MouseCapture)
    }
}

impl Drop for MouseCapture {
    fn drop(&mut self) {
        _ = ratatui::crossterm::execute!(std::io::stdout(), DisableMouseCapture);
    }
}

/// Runs the screen until the user quits. `poll_gpu` is false with `--no-gpu`, `mouse` with
/// `--no-mouse`; `follow`: the run log to follow (`--follow`).
pub fn run(mut app: App, poll_gpu: bool, mouse: bool, follow: Option<Tail>) -> Result<(), String> {
    let readings = poll_gpu.then(spawn_gpu_poller);
    let log = follow.map(LogPoller::spawn);
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot open the terminal: {e}"))?;
    let capture = if mouse {
        match MouseCapture::on() {
            Ok(c) => Some(c),
            Err(e) => {
                ratatui::restore();
                return Err(format!("cannot turn the mouse on ({e}): try --no-mouse"));
            }
        }
    } else {
        None
    };
    let result = event_loop(&mut terminal, &mut app, readings.as_ref(), log.as_ref());
    drop(capture);
    // the alternate screen blanked before it is left: a terminal that grew while it was up
    // (tmux) keeps its rows past the main screen's old height, and they would show the frame
    _ = terminal.clear();
    ratatui::restore();
    // what the Hub client said while the screen was up, and the file `q` then `y` wrote, now
    // that the terminal is the shell's
    for notice in &app.notices {
        eprintln!("{notice}");
    }
    // the log's reader is stopped once the terminal is the shell's again: a read stuck on a slow
    // disk delays the exit, never leaves the terminal raw
    if let Some(log) = log {
        log.stop();
    }
    result
}

/// How long one frame reads the followed log at most (a look at least): a log of gigabytes is
/// read over many frames, and a key waits for no more than this and a frame.
const LOG_PER_FRAME: Duration = Duration::from_millis(100);

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    readings: Option<&mpsc::Receiver<Result<crate::gpu::GpuInfo, String>>>,
    log: Option<&LogPoller>,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("terminal error: {e}");
    let mut runner = Runner::new();
    // looks of the log left for the next frame: keys are read at once, not waited for
    let mut behind = false;
    while !app.quit {
        let mut drawn = None;
        terminal
            .draw(|f| drawn = Some(view::draw(f, app)))
            .map_err(io)?;
        // keys and clicks are read against what was drawn: below the minimum size they change
        // nothing
        if let Some(drawn) = drawn
            && app.drawn.as_ref() != Some(&drawn)
        {
            runner.dispatch(app, Msg::Drawn(drawn));
        }
        let wait = if behind { 0 } else { 250 };
        if event::poll(Duration::from_millis(wait)).map_err(io)? {
            match event::read().map_err(io)? {
                Event::Key(key) if key.kind == KeyEventKind::Press => {
                    runner.dispatch(app, Msg::Key(key))
                }
                Event::Mouse(m) => runner.dispatch(app, Msg::Mouse(m)),
                _ => {}
            }
        }
        for news in runner.poll() {
            runner.dispatch(app, news);
        }
        if let Some(rx) = readings {
            while let Ok(reading) = rx.try_recv() {
                runner.dispatch(app, Msg::Gpu(reading));
            }
        }
        if let Some(log) = log {
            behind = log.take_for(LOG_PER_FRAME, |change| {
                runner.dispatch(app, Msg::Log(change))
            });
        }
    }
    Ok(())
}
