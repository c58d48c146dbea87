//! Drawing: a pure function of the app state.

use super::app::{App, Mode};
use super::keymap::BINDINGS;
use super::theme::Theme;
use super::widgets::{MemoryBar, Slider};
use crate::model::knobs::Knob;
use crate::model::units::format_size;
use crate::text::{count, count_f, decimal_places};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// The smallest screen the full view fits in.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 20;

pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = format!(
            "vramfit needs {MIN_WIDTH}x{MIN_HEIGHT}, this is {}x{}; q quits",
            area.width, area.height
        );
        frame.render_widget(
            Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: true }),
            area,
        );
        return;
    }
    let legend_height = legend_rows(area.width, app.estimate.components.len()).min(6);
    let rows = Layout::vertical([
        Constraint::Length(2), // title, GPU
        Constraint::Length(6), // sliders
        Constraint::Length(3), // bar title, bar, scale
        Constraint::Length(legend_height),
        Constraint::Length(1), // effective batch
        Constraint::Min(2),    // warnings and levers
        Constraint::Length(1), // message / entry
        Constraint::Length(1), // footer
    ])
    .split(area);
    header(frame, app, rows[0]);
    sliders(frame, app, rows[1]);
    bar(frame, app, rows[2]);
    legend(frame, app, rows[3]);
    batch(frame, app, rows[4]);
    advice(frame, app, rows[5]);
    message(frame, app, rows[6]);
    footer(frame, app, rows[7]);
    match &app.mode {
        Mode::Help => help(frame, area),
        Mode::Models { filter, selected } => models(frame, app, area, filter, *selected),
        Mode::Presets { selected, choices } => presets(frame, area, *selected, choices),
        _ => {}
    }
}

fn header(frame: &mut Frame, app: &App, area: Rect) {
    let r = &app.run;
    let title = format!(
        " vramfit  {} · {} · {} · gc {} · {} · beta {}",
        r.model_name, r.stack, r.quant, r.checkpointing, r.optimizer, r.beta,
    );
    let g = &app.gpu;
    let gpu = match (&g.live, &g.unavailable) {
        (Some(live), _) => format!(
            " GPU {} · {} · NVML in use {}{}{}",
            live.name,
            format_size(g.capacity),
            live.used_bytes.map_or("?".into(), format_size),
            processes(live),
            if g.capacity_from_user {
                " · capacity from --gpu-mem"
            } else {
                ""
            }
        ),
        (None, Some(why)) => format!(
            " GPU {} from {} · no NVML: {why}",
            format_size(g.capacity),
            g.name
        ),
        (None, None) => format!(" GPU {} · {}", g.name, format_size(g.capacity)),
    };
    let lines = vec![
        Line::styled(
            title,
            Style::default().add_modifier(ratatui::style::Modifier::BOLD),
        ),
        Line::raw(gpu),
    ];
    frame.render_widget(Paragraph::new(lines), area);
}

/// ` · pid 4242 1.00 GiB, pid 17 …`: who holds the GPU, biggest first.
fn processes(gpu: &crate::gpu::GpuInfo) -> String {
    let mut p = gpu.processes.clone();
    p.sort_by_key(|x| std::cmp::Reverse(x.bytes));
    let shown: Vec<String> = p
        .iter()
        .take(2)
        .map(|x| format!("pid {} {}", x.pid, x.bytes.map_or("?".into(), format_size)))
        .collect();
    match p.len() {
        0 => String::new(),
        1 | 2 => format!(" · {}", shown.join(", ")),
        n => format!(" · {} (+{} more)", shown.join(", "), n - 2),
    }
}

fn sliders(frame: &mut Frame, app: &App, area: Rect) {
    for (i, knob) in Knob::ALL.iter().enumerate() {
        let y = area.y + i as u16;
        if y >= area.bottom() {
            break;
        }
        let row = Rect::new(area.x, y, area.width, 1);
        let focused = i == app.focus;
        let style = if focused {
            app.theme.focus()
        } else {
            Style::default()
        };
        let value = knob.get(&app.run);
        let cells = Layout::horizontal([
            Constraint::Length(15),
            Constraint::Min(10),
            Constraint::Length(8),
            Constraint::Length(29),
        ])
        .split(row);
        let mark = if focused { "▶ " } else { "  " };
        frame.render_widget(
            Paragraph::new(format!("{mark}{}", knob.label())).style(style),
            cells[0],
        );
        let shown = match value {
            Some(v) => {
                let ladder = knob.ladder();
                let rung = ladder
                    .iter()
                    .position(|&x| x >= v)
                    .unwrap_or(ladder.len() - 1);
                let slider = Slider {
                    position: rung as f64 / (ladder.len() - 1) as f64,
                    style,
                };
                frame.render_widget(&slider, cells[1]);
                knob.show(v)
            }
            None => {
                frame.render_widget(
                    Paragraph::new("(no vLLM on this GPU)").style(app.theme.dim()),
                    cells[1],
                );
                "-".into()
            }
        };
        frame.render_widget(
            Paragraph::new(format!(" {shown:>6}")).style(style),
            cells[2],
        );
        frame.render_widget(
            Paragraph::new(format!(" {}", knob.trainer_key(app.run.stack))).style(app.theme.dim()),
            cells[3],
        );
    }
}

fn bar(frame: &mut Frame, app: &App, area: Rect) {
    let e = &app.estimate;
    let cap = e.capacity_bytes.max(1) as f64;
    let margin = e.headroom_bytes.unsigned_abs();
    let verdict = if e.fits {
        Span::styled(
            format!(
                "headroom {} ({:.1}%)",
                format_size(margin),
                100.0 * margin as f64 / cap
            ),
            app.theme.good(),
        )
    } else {
        Span::styled(
            format!(
                "SHORT BY {} ({:.1}%)",
                format_size(margin),
                100.0 * margin as f64 / cap
            ),
            app.theme.bad(),
        )
    };
    let title = Line::from(vec![
        Span::raw(format!(
            " memory {} of {}   ",
            format_size(e.total_bytes),
            format_size(e.capacity_bytes)
        )),
        verdict,
    ]);
    frame.render_widget(Paragraph::new(title), Rect { height: 1, ..area });
    if area.height < 3 {
        return;
    }
    let bar_area = Rect::new(area.x + 1, area.y + 1, area.width.saturating_sub(2), 2);
    let widget = MemoryBar {
        components: &e.components,
        capacity: e.capacity_bytes,
        live_used: app.gpu.live.as_ref().and_then(|g| g.used_bytes),
        theme: app.theme,
    };
    frame.render_widget(&widget, bar_area);
}

/// Legend columns that fit in `width`: each needs about 38 cells.
fn legend_columns(width: u16) -> usize {
    (width as usize / 38).clamp(1, 3)
}

/// Rows the legend takes for `components` entries.
fn legend_rows(width: u16, components: usize) -> u16 {
    components.div_ceil(legend_columns(width)) as u16
}

fn legend(frame: &mut Frame, app: &App, area: Rect) {
    let n = legend_columns(area.width);
    let columns = Layout::horizontal(vec![Constraint::Ratio(1, n as u32); n]).split(area);
    let rows = area.height.max(1) as usize;
    for (i, c) in app.estimate.components.iter().enumerate() {
        let col = i / rows;
        if col >= n {
            break;
        }
        let cell = columns[col];
        let y = cell.y + (i % rows) as u16;
        let line = Line::from(vec![
            Span::styled(
                format!(" {}{} ", Theme::fill(c.part), Theme::fill(c.part)),
                app.theme.segment(c.part),
            ),
            Span::raw(format!("{:<17}{:>11}", c.name, format_size(c.bytes))),
        ]);
        frame.render_widget(Paragraph::new(line), Rect::new(cell.x, y, cell.width, 1));
    }
}

fn batch(frame: &mut Frame, app: &App, area: Rect) {
    let e = &app.estimate;
    let lock = if app.lock { "locked" } else { "free" };
    let mut text = format!(
        " batch {} ({}) = {} × {} accum × {} · {} × {} gens",
        e.effective_batch,
        lock,
        app.run.micro_batch,
        app.run.grad_accum,
        count(app.run.gpus, "GPU", "GPUs"),
        count_f(e.prompts_per_step, 2, "prompt", "prompts"),
        app.run.num_generations
    );
    if let Some(v) = &e.vllm {
        text.push_str(&format!(
            " · KV {} seq",
            decimal_places(v.full_length_sequences, 1)
        ));
    }
    frame.render_widget(Paragraph::new(text), area);
}

fn advice(frame: &mut Frame, app: &App, area: Rect) {
    let mut lines: Vec<Line> = Vec::new();
    if let Some(note) = &app.batch_note {
        lines.push(Line::styled(format!(" ! {note}"), app.theme.warn()));
    }
    for w in app.estimate.warnings.iter().take(2) {
        lines.push(Line::styled(format!(" ! {w}"), app.theme.warn()));
    }
    lines.push(Line::raw(" levers, one step down:"));
    for step in &app.step_downs {
        let c = &step.change;
        let saved = if c.bytes_saved >= 0 {
            format!("saves {}", format_size(c.bytes_saved as u64))
        } else {
            format!("costs {}", format_size(c.bytes_saved.unsigned_abs()))
        };
        lines.push(Line::raw(format!(
            "   {:<13} {:>6} → {:<6} {:<18} {}",
            c.lever.label(),
            c.from,
            c.to,
            saved,
            c.trade_off
        )));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn message(frame: &mut Frame, app: &App, area: Rect) {
    let (text, style) = match &app.mode {
        // the error, once there is one, takes the hint's place: both do not fit in 80 columns
        Mode::Entry { knob, text, error } => (
            match error {
                Some(e) => format!(" {} = {text}▏ {e} · Esc cancels", knob.label()),
                None => format!(
                    " {} = {text}▏ {} · Enter sets, Esc cancels",
                    knob.label(),
                    knob.entry_hint()
                ),
            },
            app.theme.focus(),
        ),
        Mode::ConfirmOverwrite(p) => (
            format!(
                " {} exists: y overwrites, any other key cancels",
                p.display()
            ),
            app.theme.warn(),
        ),
        _ => (
            app.message
                .as_ref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default(),
            Style::default(),
        ),
    };
    frame.render_widget(Paragraph::new(text).style(style), area);
}

fn footer(frame: &mut Frame, app: &App, area: Rect) {
    let mut spans = vec![Span::raw(" ")];
    for b in BINDINGS {
        if let Some((keys, word)) = b.footer {
            spans.push(Span::styled(keys, app.theme.focus()));
            spans.push(Span::raw(format!(" {word}  ")));
        }
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn popup(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// A framed overlay of `lines`, centred, over whatever is beneath.
fn overlay(frame: &mut Frame, area: Rect, width: u16, lines: Vec<Line>, title: &str) {
    let r = popup(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        r,
    );
}

fn help(frame: &mut Frame, area: Rect) {
    let lines: Vec<Line> = BINDINGS
        .iter()
        .map(|b| Line::raw(format!(" {:<10} {}", b.keys, b.help)))
        .collect();
    overlay(frame, area, 58, lines, " keys (any key closes) ");
}

fn models(frame: &mut Frame, app: &App, area: Rect, filter: &str, selected: usize) {
    let matches = super::app::App::model_matches(filter);
    let visible = popup(area, 56, 16).height.saturating_sub(3) as usize;
    let first = selected.saturating_sub(visible.saturating_sub(1));
    let mut lines = vec![Line::raw(format!(" filter: {filter}▏"))];
    for (i, id) in matches.iter().enumerate().skip(first).take(visible) {
        let style = if i == selected {
            app.theme.focus()
        } else {
            Style::default()
        };
        lines.push(Line::styled(format!(" {id}"), style));
    }
    if matches.is_empty() {
        lines.push(Line::raw(
            " no match: give any model by its config.json in a run file",
        ));
    }
    // the popup keeps its height while the filter narrows the list
    lines.resize(visible + 1, Line::raw(""));
    overlay(
        frame,
        area,
        56,
        lines,
        " model (type to filter, Enter picks, Esc) ",
    );
}

fn presets(
    frame: &mut Frame,
    area: Rect,
    selected: usize,
    choices: &[(String, crate::presets::PresetSource)],
) {
    let lines: Vec<Line> = choices
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            let mark = if i == selected { "▶" } else { " " };
            Line::raw(format!(" {mark} {name}"))
        })
        .collect();
    overlay(frame, area, 40, lines, " presets (Enter loads, Esc) ");
}
