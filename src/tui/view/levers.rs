//! The levers panel on a screen with room for it: every warning and every lever's trade-off
//! whole, then the levers of the fit that have no step down here; where that does not fit, the
//! one-line-each panel (`panel::advice_lines`).

use super::panel::{advice_lines, step_parts};
use super::text::{width_of, wrap};
use crate::tui::app::App;
use grpofit_core::fit::Lever;
use ratatui::text::Line;

/// The levers panel for `height` rows: the full list when it fits, else one line a lever.
pub(super) fn advice_in(app: &App, width: u16, height: u16) -> Vec<Line<'static>> {
    // as many of each lever's further rungs as the rows hold, then none, then one line a lever
    let most = app.deeper_steps.len();
    (0..=most)
        .rev()
        .map(|deeper| full_lines(app, width, deeper))
        .find(|full| full.len() <= height as usize)
        .unwrap_or_else(|| advice_lines(app, width))
}

/// Warnings and trade-offs whole, wrapped under their own column, with at most `deeper` further
/// rungs of each lever, then the levers that do not step here.
fn full_lines(app: &App, width: u16, deeper: usize) -> Vec<Line<'static>> {
    let w = width as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    for warning in &app.estimate.warnings {
        for l in wrap(&format!(" ! {warning}"), w, 3) {
            lines.push(Line::styled(l, app.theme.warn()));
        }
    }
    lines.push(Line::raw(" levers, one step down:"));
    for (i, step) in app.step_downs.iter().enumerate() {
        let c = &step.change;
        let (label, _, saved) = step_parts(step, app.step_seconds.get(i).copied().flatten());
        let head = format!("   {label:<13} {:>6} → {:<6} {saved:<15} ", c.from, c.to);
        let column = width_of(&head);
        if w < column + 16 {
            lines.extend(
                wrap(&format!("{head}{}", c.trade_off), w, 5)
                    .into_iter()
                    .map(Line::raw),
            );
            continue;
        }
        let text = wrap(c.trade_off, w - column, 0);
        for (i, part) in text.into_iter().enumerate() {
            let lead = if i == 0 {
                head.clone()
            } else {
                " ".repeat(column)
            };
            lines.push(Line::raw(format!("{lead}{part}")));
        }
        // the lever's further rungs, each from the run as it is
        let further = app
            .deeper_steps
            .iter()
            .zip(&app.deeper_seconds)
            .filter(|(d, _)| d.change.lever == c.lever);
        for (deeper, seconds) in further.take(deeper) {
            let (_, _, saved) = step_parts(deeper, *seconds);
            let to = &deeper.change.to;
            lines.push(Line::styled(
                format!("   {:<13} {:>6} → {to:<6} {saved}", "", ""),
                app.theme.dim(),
            ));
        }
    }
    let still: Vec<&str> = Lever::ORDER
        .iter()
        .filter(|l| l.applies(&app.run))
        .filter(|l| !app.step_downs.iter().any(|s| s.change.lever == **l))
        .map(|l| l.label())
        .collect();
    if !still.is_empty() {
        lines.push(Line::raw(""));
        for l in wrap(
            &format!(
                " no step down here (at its floor, or the next rung breaks a rule or vLLM's start): {}",
                still.join(", ")
            ),
            w,
            3,
        ) {
            lines.push(Line::styled(l, app.theme.dim()));
        }
    }
    lines
}
