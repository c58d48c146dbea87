use super::bar::*;
use super::header::*;
use super::legend::*;
use super::panel::*;
use crate::tui::app::App;
use ratatui::layout::{Constraint, Layout, Rect};

/// The smallest screen the full view fits in.
pub const MIN_WIDTH: u16 = 60;

pub const MIN_HEIGHT: u16 = 20;

/// Whether a `w` x `h` screen is below the minimum: the view is a notice, and only quit and
/// help answer.
pub fn too_small(w: u16, h: u16) -> bool {
    w < MIN_WIDTH || h < MIN_HEIGHT
}

/// Where each part of the main view goes on a screen of `area` (at least the minimum size).
pub struct Areas {
    pub header: Rect,
    pub sliders: Rect,
    pub bar: Rect,
    /// the step's seconds by phase (`timebar`)
    pub time: Rect,
    /// the followed run's status, its notices and, on a tall screen, its figures
    pub follow: Rect,
    pub legend: Rect,
    pub batch: Rect,
    pub advice: Rect,
    pub message: Rect,
    pub footer: Rect,
}

/// The header, the bar, the time bar, the batch line, the message and the footer take what they need; the
/// sliders come next (all of them when the height allows), then the levers panel (up to four
/// lines), then the legend; the panel takes whatever is left.
pub fn areas(app: &App, area: Rect) -> Areas {
    let w = area.width;
    let header_h = header_lines(app, w).len() as u16;
    let message_h = message_lines(app, w).len() as u16;
    let bar_h = bar_height(app);
    let time_h = super::timebar::time_lines(app, w, area.height).len() as u16;
    let follow_h = follow_lines(app, w, area.height).len() as u16;
    let fixed = header_h + bar_h + time_h + follow_h + 1 + message_h + 1;
    let rest = area.height.saturating_sub(fixed);
    let slider_h = (app.knobs().len() as u16).min(rest.saturating_sub(2).max(rest.min(1)));
    let rest = rest - slider_h;
    let advice_wants = (advice_lines(app, w).len() as u16).min(4);
    let components = legend_len(app);
    let pinned = app.pinned.is_some();
    let mut legend_h = legend_rows(w, components, pinned).min(rest.saturating_sub(advice_wants));
    if legend_h == 1 && legend_columns(w, pinned) == 1 && components > 1 {
        // one cell would only count the components: the bar says as much
        legend_h = 0;
    }
    let advice_h = rest - legend_h;
    let rows = Layout::vertical([
        Constraint::Length(header_h),
        Constraint::Length(slider_h),
        Constraint::Length(bar_h),
        Constraint::Length(time_h),
        Constraint::Length(follow_h),
        Constraint::Length(legend_h),
        Constraint::Length(1),
        Constraint::Length(advice_h),
        Constraint::Length(message_h),
        Constraint::Length(1),
    ])
    .split(area);
    Areas {
        header: rows[0],
        sliders: rows[1],
        bar: rows[2],
        time: rows[3],
        follow: rows[4],
        legend: rows[5],
        batch: rows[6],
        advice: rows[7],
        message: rows[8],
        footer: rows[9],
    }
}
