//! Drawing: a pure function of the app state. The layout gives the sliders their rows first,
//! lets the list scroll to the focused knob when they do not all fit, wraps the header's
//! settings rather than clipping them, and shortens long text at a word with `…` (help has the
//! whole of it).

mod bar;
mod header;
mod help;
mod layout;
mod legend;
mod levers;
mod panel;
mod pickers;
mod sliders;
mod text;
mod timebar;

use super::app::{App, Mode};
use super::drawn::Drawn;
use bar::*;
use header::*;
use help::*;
pub use layout::{Areas, MIN_HEIGHT, MIN_WIDTH, areas, too_small};
use legend::*;
use panel::*;
use pickers::*;
use ratatui::Frame;
use ratatui::widgets::Paragraph;
pub use sliders::knob_rows;
use sliders::*;

/// Draws the screen, and returns what the keys and the mouse need of it.
pub fn draw(frame: &mut Frame, app: &App) -> Drawn {
    let area = frame.area();
    let mut drawn = Drawn {
        size: (area.width, area.height),
        too_small: too_small(area.width, area.height),
        picker_rows: picker_rows(&app.mode, area.width, area.height),
        ..Drawn::default()
    };
    if drawn.too_small {
        let text = format!(
            "grpofit needs {MIN_WIDTH}x{MIN_HEIGHT}, this is {}x{}; q quits, ? helps",
            area.width, area.height
        );
        frame.render_widget(
            Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: true }),
            area,
        );
    } else {
        let a = areas(app, area);
        drawn.knob_rows = knob_rows(app, a.sliders);
        header(frame, app, a.header);
        sliders(frame, app, a.sliders);
        bar(frame, app, a.bar);
        frame.render_widget(
            Paragraph::new(timebar::time_lines(app, area.width, area.height)),
            a.time,
        );
        frame.render_widget(
            Paragraph::new(follow_lines(app, area.width, area.height)),
            a.follow,
        );
        legend(frame, app, a.legend);
        frame.render_widget(Paragraph::new(batch_line(app, area.width)), a.batch);
        frame.render_widget(
            Paragraph::new(levers::advice_in(app, area.width, a.advice.height)),
            a.advice,
        );
        frame.render_widget(Paragraph::new(message_lines(app, area.width)), a.message);
        footer(frame, app, a.footer);
    }
    match &app.mode {
        Mode::Help { scroll } => {
            drawn.help_rows = help_rows(app, area.width, area.height);
            drawn.help_max_scroll = help_max_scroll(app, area.width, area.height);
            help(frame, app, area, *scroll)
        }
        Mode::Models {
            filter,
            selected,
            typing,
        } => models(frame, app, area, filter, *selected, *typing),
        Mode::Presets { selected, choices } => presets(frame, app, area, *selected, choices),
        _ => {}
    }
    drawn
}
