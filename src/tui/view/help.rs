use super::bar::*;
use super::header::*;
use super::legend::*;
use super::panel::*;
use super::text::*;
use crate::tui::app::App;
use crate::tui::follow;
use crate::tui::keymap::BINDINGS;
use crate::tui::theme::Theme;
use grpofit_core::memory::estimate::Component;
use grpofit_core::units::{format_change, format_size};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// Help's text for a popup `inner` cells wide: the keys, then the whole of what the main view
/// shortens (the levers' trade-offs, the warnings, the settings, the batch and the GPU).
pub(super) fn help_lines(app: &App, inner: usize) -> Vec<String> {
    let mut out = vec![" keys".to_string()];
    let add = |text: String, indent: usize, out: &mut Vec<String>| {
        out.extend(wrap(&text, inner, indent));
    };
    for b in BINDINGS {
        add(format!("  {:<10} {}", b.keys, b.help), 13, &mut out);
    }
    add(
        "  Esc        closes a popup, cancels an entry (never quits)".into(),
        13,
        &mut out,
    );
    add(
        "  q, Ctrl-C  quit; with changes not exported, asks: export? y/n/cancel".into(),
        13,
        &mut out,
    );
    add(
        "  mouse      click a knob to focus it, click or drag its track to set it, the wheel steps it (--no-mouse leaves the mouse to the terminal)".into(),
        13,
        &mut out,
    );
    out.push(String::new());
    out.push(" levers, one step down".into());
    for (i, step) in app.step_downs.iter().enumerate() {
        let (label, change, saved) = step_parts(step, app.step_seconds.get(i).copied().flatten());
        add(
            format!("  {label} {change}: {saved}; {}", step.change.trade_off),
            4,
            &mut out,
        );
    }
    if !app.estimate.warnings.is_empty() {
        out.push(String::new());
        out.push(" warnings".into());
        for w in &app.estimate.warnings {
            add(format!("  ! {w}"), 4, &mut out);
        }
    }
    out.push(String::new());
    out.extend(memory_lines(app));
    if app.follow.is_some() {
        out.push(String::new());
        out.extend(measured_lines(app, inner));
    }
    out.push(String::new());
    out.push(" run".into());
    add(
        format!("  {} · {}", app.run.model_name, settings(app).join(" · ")),
        4,
        &mut out,
    );
    add(format!(" {}", batch_line(app, u16::MAX)), 4, &mut out);
    add(format!(" {}", gpu_text(app)), 4, &mut out);
    out
}

/// Help's view of the followed run: its status and notices whole, then the figures `grpofit
/// check` attributes, predicted against measured.
pub(super) fn measured_lines(app: &App, inner: usize) -> Vec<String> {
    let mut out = vec![" measured, in the run followed".to_string()];
    let status = follow::status_lines(&follow_screen(app));
    out.extend(wrap(status.first().map_or("", String::as_str), inner, 4));
    for notice in follow::notices(&follow_screen(app)) {
        out.extend(wrap(&format!("  ! {notice}"), inner, 4));
    }
    let rows = follow::rows(&follow_screen(app));
    if rows.is_empty() {
        out.push("  no step line nor NVML sample yet".into());
        return out;
    }
    out.push(follow::rows_header());
    out.extend(rows.iter().map(follow::row_text));
    out.extend(wrap(
        "  error: (predicted - measured) / measured, as `grpofit check` gives it; good within 5 %. ◆ on the bar: the whole process's measured peak (NVML's, or torch's reserved plus the CUDA context)",
        inner,
        4,
    ));
    out
}

/// Help's memory table: each phase's components (the run's, with one phase), the peak named.
pub(super) fn memory_lines(app: &App) -> Vec<String> {
    let e = &app.estimate;
    let mut out = vec![" memory, component by component".to_string()];
    let phases = phases(app);
    let mut tables: Vec<(String, &[Component])> = if phases.is_empty() {
        let name = match e.roles.first() {
            Some(r) if e.roles.len() > 1 || r.gpus > 1 => format!("{} ×{}", r.role.label(), r.gpus),
            _ => "the run".into(),
        };
        vec![(
            format!("  {name:<20} {:>10}", format_size(e.total_bytes)),
            &e.components,
        )]
    } else {
        phases
            .iter()
            .map(|p| {
                let peak = if p.phase == e.peak_phase {
                    "  the peak"
                } else {
                    ""
                };
                (
                    format!(
                        "  {:<20} {:>10}{peak}",
                        p.phase.label(),
                        format_size(p.total_bytes)
                    ),
                    p.components.as_slice(),
                )
            })
            .collect()
    };
    for role in e.roles.iter().skip(1) {
        let (verdict, _) = role_verdict(role);
        tables.push((
            format!(
                "  {:<20} {:>10}  each GPU: {verdict}",
                format!("{} ×{}", role.role.label(), role.gpus),
                format_size(role.total_bytes)
            ),
            &role.components,
        ));
    }
    for (head, components) in tables {
        out.push(head);
        for c in components {
            out.push(format!(
                "    {} {:<16} {:>10}",
                Theme::fill(c.part),
                c.name,
                format_size(c.bytes)
            ));
        }
    }
    if let Some(pin) = &app.pinned {
        out.push(format!(
            "  {:<20} {:>10} {:>9}",
            "since the pin ◇",
            format_size(pin.total_bytes),
            format_change(e.total_bytes as i64 - pin.total_bytes as i64)
        ));
        for entry in legend_entries(app).0 {
            out.push(format!(
                "    {} {:<16} {:>10} {:>9}",
                Theme::fill(entry.part),
                entry.name,
                format_size(entry.bytes),
                entry.change.map_or(String::new(), format_change)
            ));
        }
    }
    out
}

/// The help popup on `area`: as wide as its longest line allows, within the screen.
pub(super) fn help_area(app: &App, area: Rect) -> (Rect, Vec<String>) {
    let natural = help_lines(app, usize::MAX / 2)
        .iter()
        .map(|l| width_of(l))
        .max()
        .unwrap_or(0) as u16;
    let w = (natural + 3).min(area.width);
    let lines = help_lines(app, w.saturating_sub(3) as usize);
    let r = popup(area, w, lines.len() as u16 + 2);
    (r, lines)
}

/// Lines of help on screen at `w` x `h`.
pub(super) fn help_rows(app: &App, w: u16, h: u16) -> usize {
    help_area(app, Rect::new(0, 0, w, h))
        .0
        .height
        .saturating_sub(2) as usize
}

/// How far help scrolls at `w` x `h`.
pub(super) fn help_max_scroll(app: &App, w: u16, h: u16) -> usize {
    let (_, lines) = help_area(app, Rect::new(0, 0, w, h));
    lines.len().saturating_sub(help_rows(app, w, h))
}

pub(super) fn help(frame: &mut Frame, app: &App, area: Rect, scroll: usize) {
    let (r, lines) = help_area(app, area);
    let rows = r.height.saturating_sub(2) as usize;
    let scroll = scroll.min(lines.len().saturating_sub(rows));
    let title = if lines.len() > rows {
        format!(
            " help {}-{} of {} · ↑↓ PgUp PgDn · other keys close ",
            scroll + 1,
            (scroll + rows).min(lines.len()),
            lines.len()
        )
    } else {
        " help · any key closes ".to_string()
    };
    let shown: Vec<Line> = lines
        .into_iter()
        .skip(scroll)
        .take(rows)
        .map(Line::raw)
        .collect();
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(shown).block(Block::default().borders(Borders::ALL).title(title)),
        r,
    );
}
