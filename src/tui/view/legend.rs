use crate::tui::app::App;
use crate::tui::theme::Theme;
use grpofit_core::memory::estimate::Part;
use grpofit_core::units::{format_change, format_size};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Legend columns that fit in `width`: each needs about 38 cells, 40 with the change since
/// a pin.
pub(super) fn legend_columns(width: u16, pinned: bool) -> usize {
    (width as usize / if pinned { 40 } else { 38 }).clamp(1, 3)
}

/// Rows the legend takes for `entries` at `width`.
pub(super) fn legend_rows(width: u16, entries: usize, pinned: bool) -> u16 {
    entries.div_ceil(legend_columns(width, pinned)) as u16
}

/// One line of the legend: a part, its bytes, and its change since the pin (when pinned).
pub(super) struct Entry {
    pub part: Part,
    pub name: &'static str,
    pub bytes: u64,
    pub change: Option<i64>,
    /// a part only the phase that does not set the peak, or another role's GPUs, hold: dimmed,
    /// its bytes that phase's or role's
    pub other: bool,
}

/// The legend's entries: the peak's components (summing to the total), each with its change
/// since the pin, and the parts the pin had that the run no longer has (now 0), so that the
/// changes add up to the total's; then the parts only the other phase holds, then those only
/// the other roles' GPUs hold (the vLLM server's).
pub(super) fn legend_entries(app: &App) -> (Vec<Entry>, Vec<Entry>) {
    let e = &app.estimate;
    let change = |part: Part, bytes: u64| {
        app.pinned.as_ref().map(|pin| {
            let then: u64 = pin
                .components
                .iter()
                .filter(|c| c.part == part)
                .map(|c| c.bytes)
                .sum();
            bytes as i64 - then as i64
        })
    };
    let mut main: Vec<Entry> = e
        .components
        .iter()
        .map(|c| Entry {
            part: c.part,
            name: c.name,
            bytes: c.bytes,
            change: change(c.part, c.bytes),
            other: false,
        })
        .collect();
    if let Some(pin) = &app.pinned {
        for c in &pin.components {
            if !main.iter().any(|m| m.part == c.part) {
                main.push(Entry {
                    part: c.part,
                    name: c.name,
                    bytes: 0,
                    change: change(c.part, 0),
                    other: false,
                });
            }
        }
    }
    let mut extra: Vec<Entry> = Vec::new();
    let others = e
        .phases
        .iter()
        .filter(|p| p.phase != e.peak_phase)
        .map(|p| &p.components)
        .chain(e.roles.iter().skip(1).map(|r| &r.components));
    for components in others {
        for c in components {
            let known = |list: &[Entry]| list.iter().any(|m| m.part == c.part);
            if !known(&main) && !known(&extra) {
                extra.push(Entry {
                    part: c.part,
                    name: c.name,
                    bytes: c.bytes,
                    change: None,
                    other: true,
                });
            }
        }
    }
    (main, extra)
}

/// Entries the legend has.
pub(super) fn legend_len(app: &App) -> usize {
    let (main, extra) = legend_entries(app);
    main.len() + extra.len()
}

/// The legend's text for one entry: name, bytes and, pinned, the change (9 cells).
pub(super) fn entry_text(name: &str, bytes: u64, change: Option<i64>, pinned: bool) -> String {
    if pinned {
        let change = change.map_or(String::new(), format_change);
        format!("{name:<16}{:>10} {change:>9}", format_size(bytes))
    } else {
        format!("{name:<17}{:>11}", format_size(bytes))
    }
}

/// `all` with its `shown` largest entries first, in their own order, then the rest (the ones
/// the legend counts under "+N more"), in theirs.
fn largest_first_kept(all: Vec<Entry>, shown: usize) -> Vec<Entry> {
    if shown >= all.len() {
        return all;
    }
    let mut by_size: Vec<usize> = (0..all.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(all[i].bytes));
    let mut kept = vec![false; all.len()];
    by_size.iter().take(shown).for_each(|&i| kept[i] = true);
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    for (e, keep) in all.into_iter().zip(kept) {
        if keep { head.push(e) } else { tail.push(e) }
    }
    head.extend(tail);
    head
}

/// The components by column: the peak's (summing to the total) with their change since the
/// pin, then, dimmed, the parts only the other phase holds, with that phase's bytes. When the
/// peak's do not all fit, the last cell counts the rest of them.
pub(super) fn legend(frame: &mut Frame, app: &App, area: Rect) {
    if area.height == 0 {
        return;
    }
    let pinned = app.pinned.is_some();
    let n = legend_columns(area.width, pinned);
    let columns = Layout::horizontal(vec![Constraint::Ratio(1, n as u32); n]).split(area);
    let rows = area.height as usize;
    let (all, extra) = legend_entries(app);
    let cells = n * rows;
    let shown = if all.len() > cells {
        cells - 1
    } else {
        all.len()
    };
    // when not all fit, the largest are shown (in their order) and the smallest counted
    let all = largest_first_kept(all, shown);
    let cell_at = |i: usize| {
        let cell = columns[i / rows];
        Rect::new(cell.x, cell.y + (i % rows) as u16, cell.width, 1)
    };
    let line = |e: &Entry| {
        Line::from(vec![
            Span::styled(
                format!(" {}{} ", Theme::fill(e.part), Theme::fill(e.part)),
                app.theme.segment(e.part),
            ),
            Span::styled(
                entry_text(e.name, e.bytes, e.change, pinned),
                if e.other {
                    app.theme.dim()
                } else {
                    Style::default()
                },
            ),
        ])
    };
    for (i, e) in all.iter().take(shown).enumerate() {
        frame.render_widget(Paragraph::new(line(e)), cell_at(i));
    }
    if shown < all.len() {
        let rest = &all[shown..];
        let bytes: u64 = rest.iter().map(|e| e.bytes).sum();
        let change = pinned.then(|| rest.iter().filter_map(|e| e.change).sum());
        let name = format!("+{} more", rest.len());
        frame.render_widget(
            Paragraph::new(format!("    {}", entry_text(&name, bytes, change, pinned)))
                .style(app.theme.dim()),
            cell_at(shown),
        );
        return;
    }
    for (i, e) in extra.iter().enumerate().take(cells - shown) {
        frame.render_widget(Paragraph::new(line(e)), cell_at(shown + i));
    }
}
