use super::text::*;
use crate::tui::app::{App, Mode, PresetChoice};
use crate::tui::widgets::PickList;
use grpofit_core::units::format_size;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// A picker's frame on `area`.
pub(super) fn picker_area(mode: &Mode, area: Rect) -> Rect {
    match mode {
        Mode::Presets { choices, .. } => popup(area, 72, choices.len() as u16 + 2),
        _ => popup(area, 64, 20),
    }
}

/// Rows of a picker's list at `w` x `h` (PgUp/PgDn move this many).
pub(super) fn picker_rows(mode: &Mode, w: u16, h: u16) -> usize {
    let r = picker_area(mode, Rect::new(0, 0, w, h));
    let filter = u16::from(matches!(mode, Mode::Models { .. }));
    r.height.saturating_sub(2 + filter) as usize
}

pub(super) fn framed(frame: &mut Frame, r: Rect, title: String, bottom: &str) -> Rect {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title)
        .title_bottom(bottom.to_string());
    let inner = block.inner(r);
    frame.render_widget(Clear, r);
    frame.render_widget(block, r);
    inner
}

pub(super) fn models(
    frame: &mut Frame,
    app: &App,
    area: Rect,
    filter: &str,
    selected: usize,
    typing: bool,
) {
    let matches = App::model_matches(filter);
    let r = picker_area(&app.mode, area);
    let bottom = if typing {
        " ↑↓ PgUp PgDn Home End · Tab: j/k · Enter · Esc "
    } else {
        " j/k ↑↓ PgUp PgDn Home End · / types · Enter · Esc "
    };
    let title = format!(
        " model {}/{} ",
        (selected + 1).min(matches.len()),
        matches.len()
    );
    let inner = framed(frame, r, title, bottom);
    if inner.height == 0 {
        return;
    }
    let cursor = if typing { "▏" } else { "" };
    frame.render_widget(
        Paragraph::new(format!(" filter: {filter}{cursor}")).style(if typing {
            app.theme.focus()
        } else {
            Style::default()
        }),
        Rect { height: 1, ..inner },
    );
    let list = Rect::new(
        inner.x,
        inner.y + 1,
        inner.width,
        inner.height.saturating_sub(1),
    );
    if matches.is_empty() {
        frame.render_widget(
            Paragraph::new(format!(
                " no match in the catalog: Enter looks {:?} up in the Hugging Face cache, then on the Hub",
                filter.trim()
            ))
                .wrap(ratatui::widgets::Wrap { trim: true }),
            list,
        );
        return;
    }
    let items = matches.iter().map(|id| Line::raw(id.to_string())).collect();
    let widget = PickList {
        items,
        selected,
        highlight: app.theme.focus(),
    };
    frame.render_widget(&widget, list);
}

pub(super) fn presets(
    frame: &mut Frame,
    app: &App,
    area: Rect,
    selected: usize,
    choices: &[PresetChoice],
) {
    let r = picker_area(&app.mode, area);
    let title = format!(
        " preset {}/{} ",
        (selected + 1).min(choices.len()),
        choices.len()
    );
    let inner = framed(
        frame,
        r,
        title,
        " j/k ↑↓ PgUp PgDn Home End · Enter loads · Esc ",
    );
    let name_w = choices.iter().map(|c| width_of(&c.name)).max().unwrap_or(0);
    // the list's marker (3 columns) and scroll arrow (1) beside the name and capacity: a model
    // name longer than the rest is cut with an ellipsis, not mid-word at the frame
    let model_w = (inner.width as usize).saturating_sub(3 + name_w + 2 + 10 + 2 + 1);
    let items = choices
        .iter()
        .map(|c| {
            let capacity = c.capacity.map_or("-".into(), format_size);
            Line::from(vec![
                Span::raw(format!("{:<name_w$}  {capacity:>10}  ", c.name)),
                Span::styled(ellipsize(&c.model, model_w), app.theme.dim()),
            ])
        })
        .collect();
    let widget = PickList {
        items,
        selected,
        highlight: app.theme.focus(),
    };
    frame.render_widget(&widget, inner);
}
