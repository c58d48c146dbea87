//! Drawing: a pure function of the app state. The layout gives the sliders their rows first,
//! lets the list scroll to the focused knob when they do not all fit, wraps the header's
//! settings rather than clipping them, and shortens long text at a word with `…` (help has the
//! whole of it).

use super::app::{App, Mode, PresetChoice};
use super::follow;
use super::keymap::BINDINGS;
use super::theme::Theme;
use super::widgets::{MemoryBar, PickList, Slider, window_start};
use crate::model::estimate::{Component, Part, Phase, PhaseMemory};
use crate::model::roles::{Role, RoleKind};
use crate::model::run::{Generation, Stack};
use crate::model::units::{format_change, format_size};
use crate::text::{count, count_f, decimal_places};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// The smallest screen the full view fits in.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 20;

/// Whether a `w` x `h` screen is below the minimum: the view is a notice, and only quit and
/// help answer.
pub fn too_small(w: u16, h: u16) -> bool {
    w < MIN_WIDTH || h < MIN_HEIGHT
}

pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    if too_small(area.width, area.height) {
        let text = format!(
            "vramfit needs {MIN_WIDTH}x{MIN_HEIGHT}, this is {}x{}; q quits, ? helps",
            area.width, area.height
        );
        frame.render_widget(
            Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: true }),
            area,
        );
    } else {
        let a = areas(app, area);
        header(frame, app, a.header);
        sliders(frame, app, a.sliders);
        bar(frame, app, a.bar);
        frame.render_widget(
            Paragraph::new(follow_lines(app, area.width, area.height)),
            a.follow,
        );
        legend(frame, app, a.legend);
        frame.render_widget(Paragraph::new(batch_line(app, area.width)), a.batch);
        frame.render_widget(Paragraph::new(advice_lines(app, area.width)), a.advice);
        frame.render_widget(Paragraph::new(message_lines(app, area.width)), a.message);
        footer(frame, app, a.footer);
    }
    match &app.mode {
        Mode::Help { scroll } => help(frame, app, area, *scroll),
        Mode::Models {
            filter,
            selected,
            typing,
        } => models(frame, app, area, filter, *selected, *typing),
        Mode::Presets { selected, choices } => presets(frame, app, area, *selected, choices),
        _ => {}
    }
}

/// Where each part of the main view goes on a screen of `area` (at least the minimum size).
pub struct Areas {
    pub header: Rect,
    pub sliders: Rect,
    pub bar: Rect,
    /// the followed run's status, its notices and, on a tall screen, its figures
    pub follow: Rect,
    pub legend: Rect,
    pub batch: Rect,
    pub advice: Rect,
    pub message: Rect,
    pub footer: Rect,
}

/// The phases the bars show, in their order (generation, then training): both when the
/// estimate has two, else none (one bar for the run).
pub fn phases(app: &App) -> Vec<&PhaseMemory> {
    let mut phases: Vec<&PhaseMemory> = app.estimate.phases.iter().collect();
    if phases.len() < 2 {
        return Vec::new();
    }
    phases.sort_by_key(|p| match p.phase {
        Phase::Generation => 0,
        Phase::Training => 1,
    });
    phases
}

/// One bar on the memory scale: its label (empty for a lone bar), the components it stacks,
/// and the label's style.
pub struct BarRow<'a> {
    pub label: String,
    pub components: &'a [Component],
    pub style: Style,
}

/// The bars, top to bottom: the training GPUs' phases (generation, then training, the peak
/// bold) when vLLM shares them, else one bar for them; then one bar per other role (the vLLM
/// server's GPUs). With more than one role or training process, the bars say the role and its
/// GPUs (`training ×7`, `vLLM server ×1`); a role that does not fit has its label in red.
pub fn bar_list(app: &App) -> Vec<BarRow<'_>> {
    let e = &app.estimate;
    let mut rows: Vec<BarRow<'_>> = phases(app)
        .into_iter()
        .map(|p| {
            let peak = p.phase == e.peak_phase;
            BarRow {
                label: format!(
                    "{:<10} {:>10} {}",
                    p.phase.label(),
                    format_size(p.total_bytes),
                    if peak { "peak" } else { "" }
                ),
                components: p.components.as_slice(),
                style: if peak {
                    Style::default().add_modifier(Modifier::BOLD)
                } else {
                    app.theme.dim()
                },
            }
        })
        .collect();
    let several = e.roles.len() > 1 || app.run.processes() > 1;
    if rows.is_empty() {
        let training = e.roles.first().filter(|_| several);
        rows.push(BarRow {
            label: training.map_or(String::new(), role_label),
            components: &e.components,
            style: role_style(app, training),
        });
    }
    for role in e.roles.iter().skip(1) {
        rows.push(BarRow {
            label: role_label(role),
            components: &role.components,
            style: role_style(app, Some(role)),
        });
    }
    rows
}

/// `vLLM server ×1  72.09 GiB`: the role, its GPUs and what each one holds.
fn role_label(role: &Role) -> String {
    format!(
        "{:<15}{:>10}",
        format!("{} ×{}", role.role.label(), role.gpus),
        format_size(role.total_bytes)
    )
}

fn role_style(app: &App, role: Option<&Role>) -> Style {
    match role {
        Some(r) if !r.fits => app.theme.bad(),
        _ => Style::default(),
    }
}

/// A role's verdict: its headroom, what it is short by, or that vLLM would not start there;
/// and whether that is good news.
pub fn role_verdict(role: &Role) -> (String, bool) {
    if role.vllm.as_ref().is_some_and(|v| !v.starts) {
        ("vLLM refuses to start".into(), false)
    } else if role.fits {
        (
            format!(
                "headroom {}",
                format_size(role.headroom_bytes.unsigned_abs())
            ),
            true,
        )
    } else {
        (
            format!(
                "SHORT BY {}",
                format_size(role.headroom_bytes.unsigned_abs())
            ),
            false,
        )
    }
}

/// The bar's rows: its title, the bars, the scale.
fn bar_height(app: &App) -> u16 {
    2 + bar_list(app).len() as u16
}

/// The header, the bar, the batch line, the message and the footer take what they need; the
/// sliders come next (all of them when the height allows), then the levers panel (up to four
/// lines), then the legend; the panel takes whatever is left.
pub fn areas(app: &App, area: Rect) -> Areas {
    let w = area.width;
    let header_h = header_lines(app, w).len() as u16;
    let message_h = message_lines(app, w).len() as u16;
    let bar_h = bar_height(app);
    let follow_h = follow_lines(app, w, area.height).len() as u16;
    let fixed = header_h + bar_h + follow_h + 1 + message_h + 1;
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
        follow: rows[3],
        legend: rows[4],
        batch: rows[5],
        advice: rows[6],
        message: rows[7],
        footer: rows[8],
    }
}

/// Display width of `text` in cells.
fn width_of(text: &str) -> usize {
    Span::raw(text).width()
}

/// `text` in at most `width` cells: whole words, then `…` when something was left out. Only a
/// single word longer than the whole width is cut inside.
pub fn ellipsize(text: &str, width: usize) -> String {
    if width_of(text) <= width {
        return text.to_string();
    }
    // the leading spaces are the text's margin: kept
    let body = text.trim_start_matches(' ');
    let lead = &text[..text.len() - body.len()];
    if width <= lead.len() {
        return " ".repeat(width);
    }
    format!("{lead}{}", ellipsize_words(body, width - lead.len()))
}

fn ellipsize_words(text: &str, width: usize) -> String {
    let mut out = String::new();
    for word in text.split(' ') {
        let candidate = if out.is_empty() {
            word.to_string()
        } else {
            format!("{out} {word}")
        };
        if width_of(&candidate) + 1 > width {
            break;
        }
        out = candidate;
    }
    let out = out
        .trim_end_matches([' ', ',', ';', ':', '·', '(', '-'])
        .to_string();
    if out.is_empty() {
        // one word wider than the line: its start
        let mut cut = String::new();
        for c in text.chars() {
            if width_of(&cut) + width_of(&c.to_string()) + 1 > width {
                break;
            }
            cut.push(c);
        }
        return format!("{cut}…");
    }
    format!("{out}…")
}

/// `text` broken at spaces into lines of at most `width` cells, the lines after the first
/// indented by `indent` spaces; a word wider than a line is cut.
pub fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(indent + 8);
    let body = text.trim_start_matches(' ');
    let mut lines = Vec::new();
    // the first line keeps the text's leading spaces
    let mut line = text[..text.len() - body.len()].to_string();
    for word in body.split(' ') {
        let candidate = if line.trim().is_empty() {
            format!("{line}{word}")
        } else {
            format!("{line} {word}")
        };
        if width_of(&candidate) <= width || line.trim().is_empty() {
            line = candidate;
        } else {
            lines.push(std::mem::replace(
                &mut line,
                format!("{}{word}", " ".repeat(indent)),
            ));
        }
    }
    lines.push(line);
    lines
        .into_iter()
        .flat_map(|l| {
            // a single overlong word: hard breaks
            let chars: Vec<char> = l.chars().collect();
            if width_of(&l) <= width {
                return vec![l];
            }
            chars.chunks(width).map(|c| c.iter().collect()).collect()
        })
        .collect()
}

/// Every setting a key toggles, where it applies to the run: what the header shows.
pub fn settings(app: &App) -> Vec<String> {
    let r = &app.run;
    let on = |b: bool| if b { "on" } else { "off" };
    let mut s = vec![
        r.stack.to_string(),
        format!("{} weights", r.quant),
        format!("gc {}", r.checkpointing),
        if r.beta > 0.0 {
            format!("ref β {}", r.beta)
        } else {
            "ref off".into()
        },
        r.optimizer.to_string(),
    ];
    // the trainer versions, when the run is pinned to others than vramfit's targets
    if r.versions != crate::model::versions::StackVersions::default() {
        let v = r.versions;
        s.insert(
            1,
            match r.stack {
                Stack::Trl => format!("trl {}", v.trl),
                Stack::Unsloth => format!("unsloth {}, trl {}", v.unsloth, v.trl),
            },
        );
    }
    match r.generation {
        Generation::ColocatedVllm { .. } => {
            match r.stack {
                Stack::Unsloth => s.push(format!("standby {}", on(r.unsloth_standby))),
                Stack::Trl => s.push(format!("vLLM sleep {}", on(r.vllm_sleep))),
            }
            if r.stack == Stack::Unsloth {
                s.push(format!("fp8 KV {}", on(r.vllm_kv_fp8)));
            }
        }
        Generation::VllmServer => s.push("vLLM server".into()),
        Generation::Transformers => s.push("no vLLM: transformers generate".into()),
    }
    if app.spread_shown() {
        s.push(r.spread.describe());
        if r.spread.nodes > 1 {
            s.push(count(r.spread.nodes, "node", "nodes"));
        }
    }
    s
}

/// The model, then the settings, wrapped at a setting (never inside one), then the GPU.
fn header_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let w = width as usize;
    let model = ellipsize(&app.run.model_name, w.saturating_sub(1));
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut spans = vec![
        Span::raw(" "),
        Span::styled(model.clone(), Style::default().add_modifier(Modifier::BOLD)),
    ];
    let mut used = 1 + width_of(&model);
    let sep = app.theme.dim();
    for s in settings(app) {
        let sw = width_of(&s);
        if used + 3 + sw <= w {
            spans.push(Span::styled(" · ", sep));
            used += 3 + sw;
        } else {
            lines.push(Line::from(std::mem::take(&mut spans)));
            spans.push(Span::raw(" "));
            used = 1 + sw;
        }
        spans.push(Span::raw(s));
    }
    lines.push(Line::from(spans));
    lines.push(Line::raw(ellipsize(&gpu_text(app), w)));
    lines
}

fn gpu_text(app: &App) -> String {
    let g = &app.gpu;
    match (&g.live, &g.unavailable) {
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
    }
}

fn header(frame: &mut Frame, app: &App, area: Rect) {
    frame.render_widget(Paragraph::new(header_lines(app, area.width)), area);
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

/// The trainer keys column shows from this width on; narrower, the slider takes its room.
const KEYS_FROM_WIDTH: u16 = 70;

/// The index of the first knob on screen when `rows` of them fit: the focused one is always
/// among them.
pub fn first_knob(app: &App, rows: usize) -> usize {
    window_start(app.focus, app.knobs().len(), rows)
}

/// The knobs on screen in the sliders' `area`: each one's index in [`App::knobs`] and its cells
/// (label, track, value, trainer key). The mouse reads the same geometry the draw uses.
pub fn knob_rows(app: &App, area: Rect) -> Vec<(usize, std::rc::Rc<[Rect]>)> {
    let rows = area.height as usize;
    let first = first_knob(app, rows);
    let keys = if area.width >= KEYS_FROM_WIDTH { 29 } else { 0 };
    (first..app.knobs().len())
        .take(rows)
        .enumerate()
        .map(|(row, i)| {
            let line = Rect::new(area.x, area.y + row as u16, area.width, 1);
            let cells = Layout::horizontal([
                Constraint::Length(15),
                Constraint::Min(10),
                Constraint::Length(8),
                Constraint::Length(keys),
            ])
            .split(line);
            (i, cells)
        })
        .collect()
}

fn sliders(frame: &mut Frame, app: &App, area: Rect) {
    let rows = area.height as usize;
    let first = first_knob(app, rows);
    let knobs = app.knobs();
    for (row, (i, cells)) in knob_rows(app, area).into_iter().enumerate() {
        let knob = knobs[i];
        let focused = i == app.focus;
        let style = if focused {
            app.theme.focus()
        } else {
            Style::default()
        };
        let mark = if focused { "▶ " } else { "  " };
        // more knobs above or below the window
        let more = if row == 0 && first > 0 {
            "↑"
        } else if row + 1 == rows && i + 1 < knobs.len() {
            "↓"
        } else {
            ""
        };
        frame.render_widget(
            Paragraph::new(format!("{mark}{:<12}{more}", knob.label())).style(style),
            cells[0],
        );
        let shown = match knob.get(&app.run) {
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
        if cells[3].width > 0 {
            frame.render_widget(
                Paragraph::new(format!(" {}", knob.trainer_key(app.run.stack)))
                    .style(app.theme.dim()),
                cells[3],
            );
        }
    }
}

/// The bar's title: the total against the capacity, the headroom or the shortfall, and with a
/// pin the change since; narrower, the pin's own total, then the percentage, then the word
/// "memory" give way, so that the change since the pin stays.
fn bar_title(app: &App, width: usize) -> Line<'static> {
    let e = &app.estimate;
    if e.roles.len() > 1 {
        return roles_title(app, width);
    }
    let margin = e.headroom_bytes.unsigned_abs();
    let (word, style) = if e.fits {
        ("headroom", app.theme.good())
    } else {
        ("SHORT BY", app.theme.bad())
    };
    let percent = format!(
        " ({:.1}%)",
        100.0 * margin as f64 / e.capacity_bytes.max(1) as f64
    );
    let sizes = format!(
        "{} of {}",
        format_size(e.total_bytes),
        format_size(e.capacity_bytes)
    );
    let pin = app.pinned.as_ref().map(|p| {
        let change = format_change(e.total_bytes as i64 - p.total_bytes as i64);
        (
            format!("   ◇ pin {} ({change})", format_size(p.total_bytes)),
            format!("   ◇ {change}"),
        )
    });
    let title = |memory: bool, percent: &str, pin: &str| {
        let head = if memory {
            format!(" memory {sizes}   ")
        } else {
            format!(" {sizes}   ")
        };
        Line::from(vec![
            Span::raw(head),
            Span::styled(format!("{word} {}{percent}", format_size(margin)), style),
            Span::raw(pin.to_string()),
        ])
    };
    let Some((long, short)) = pin else {
        return title(true, &percent, "");
    };
    let candidates = [
        title(true, &percent, &long),
        title(true, &percent, &short),
        title(true, "", &short),
        title(false, "", &short),
    ];
    let fallback = title(false, "", &short);
    candidates
        .into_iter()
        .find(|l| l.width() <= width)
        .unwrap_or(fallback)
}

/// The title when the run has several roles: the run fits only when every role fits, then
/// each role's verdict; narrower, the capacity, then the GPU counts, then the pin give way.
fn roles_title(app: &App, width: usize) -> Line<'static> {
    let e = &app.estimate;
    let (overall, style) = if e.fits {
        (" fits", app.theme.good())
    } else {
        (" DOES NOT FIT", app.theme.bad())
    };
    let pin = app.pinned.as_ref().map(|p| {
        format!(
            "   ◇ {}",
            format_change(e.total_bytes as i64 - p.total_bytes as i64)
        )
    });
    let title = |capacity: bool, counts: bool, compact: bool, pin: Option<&str>| {
        let mut spans = vec![Span::styled(overall, style)];
        if capacity {
            spans.push(Span::raw(format!(
                " · {} GPUs",
                format_size(e.capacity_bytes)
            )));
        }
        for role in &e.roles {
            let name = match (counts, compact, role.role) {
                (true, _, kind) => format!("{} ×{}", kind.label(), role.gpus),
                (false, true, RoleKind::VllmServer) => "vLLM".to_string(),
                (false, _, kind) => kind.label().to_string(),
            };
            let (verdict, good) = if compact {
                compact_verdict(role)
            } else {
                role_verdict(role)
            };
            spans.push(Span::raw(format!(" · {name} ")));
            spans.push(Span::styled(
                verdict,
                if good {
                    app.theme.good()
                } else {
                    app.theme.bad()
                },
            ));
        }
        spans.extend(pin.map(|p| Span::raw(p.to_string())));
        Line::from(spans)
    };
    let pin = pin.as_deref();
    let candidates = [
        title(true, true, false, pin),
        title(false, true, false, pin),
        title(false, false, false, pin),
        title(false, false, true, pin),
        title(false, false, true, None),
    ];
    let fallback = title(false, false, true, None);
    candidates
        .into_iter()
        .find(|l| l.width() <= width)
        .unwrap_or(fallback)
}

/// [`role_verdict`] in fewer words, for narrow screens: `7.10 GiB free`, `short 4.98 GiB`,
/// `won't start`.
fn compact_verdict(role: &Role) -> (String, bool) {
    let bytes = format_size(role.headroom_bytes.unsigned_abs());
    if role.vllm.as_ref().is_some_and(|v| !v.starts) {
        ("won't start".into(), false)
    } else if role.fits {
        (format!("{bytes} free"), true)
    } else {
        (format!("short {bytes}"), false)
    }
}

fn bar(frame: &mut Frame, app: &App, area: Rect) {
    let e = &app.estimate;
    frame.render_widget(
        Paragraph::new(bar_title(app, area.width as usize)),
        Rect { height: 1, ..area },
    );
    let rows = bar_list(app);
    // each bar is labelled with its phase or role and its total
    let label_w: u16 = if rows.iter().all(|r| r.label.is_empty()) {
        0
    } else {
        27
    };
    for (i, r) in rows.iter().enumerate() {
        let row = Rect::new(
            area.x + 1,
            area.y + 1 + i as u16,
            label_w.min(area.width.saturating_sub(1)),
            1,
        );
        frame.render_widget(
            Paragraph::new(r.label.clone()).style(r.style),
            row.intersection(area),
        );
    }
    let bars: Vec<&[Component]> = rows.iter().map(|r| r.components).collect();
    let x = area.x + 1 + label_w;
    let bar_area = Rect::new(
        x,
        area.y + 1,
        area.width.saturating_sub(2 + label_w),
        area.height.saturating_sub(1),
    );
    let widget = MemoryBar {
        bars,
        capacity: e.capacity_bytes,
        live_used: app.gpu.live.as_ref().and_then(|g| g.used_bytes),
        pinned: app.pinned.as_ref().map(|p| p.total_bytes),
        measured: follow::measured_peak(app).map(|m| (training_bar(app), m)),
        theme: app.theme,
    };
    frame.render_widget(&widget, bar_area.intersection(area));
}

/// The bar of the training GPUs at their peak, where the followed run's measured peak is
/// marked: the peak phase's when the bars are phases, else the first (the training role's).
fn training_bar(app: &App) -> usize {
    phases(app)
        .iter()
        .position(|p| p.phase == app.estimate.peak_phase)
        .unwrap_or(0)
}

/// The followed run's figures show on screens at least this tall and wide.
const FOLLOW_ROWS_FROM: (u16, u16) = (100, 40);

/// The followed run (`--follow`): its status (the longest that fits), its notices on one line,
/// and on a large screen the figures `vramfit check` sets side by side.
fn follow_lines(app: &App, width: u16, height: u16) -> Vec<Line<'static>> {
    if app.follow.is_none() {
        return Vec::new();
    }
    let w = width as usize;
    let candidates = follow::status_lines(app);
    let status = candidates
        .iter()
        .find(|l| width_of(l) <= w)
        .or(candidates.last())
        .map_or(String::new(), |l| ellipsize(l, w));
    let mut lines = vec![Line::raw(status)];
    let notices = follow::notices(app);
    if !notices.is_empty() {
        lines.push(Line::styled(
            ellipsize(&format!(" ! {}", notices.join(" · ")), w),
            app.theme.warn(),
        ));
    }
    let rows = follow::rows(app);
    if width >= FOLLOW_ROWS_FROM.0 && height >= FOLLOW_ROWS_FROM.1 && !rows.is_empty() {
        lines.push(Line::styled(follow::rows_header(), app.theme.dim()));
        lines.extend(rows.iter().map(|r| Line::raw(follow::row_text(r))));
    }
    lines
}

/// Legend columns that fit in `width`: each needs about 38 cells, 40 with the change since
/// a pin.
fn legend_columns(width: u16, pinned: bool) -> usize {
    (width as usize / if pinned { 40 } else { 38 }).clamp(1, 3)
}

/// Rows the legend takes for `entries` at `width`.
fn legend_rows(width: u16, entries: usize, pinned: bool) -> u16 {
    entries.div_ceil(legend_columns(width, pinned)) as u16
}

/// One line of the legend: a part, its bytes, and its change since the pin (when pinned).
pub struct Entry {
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
pub fn legend_entries(app: &App) -> (Vec<Entry>, Vec<Entry>) {
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
fn legend_len(app: &App) -> usize {
    let (main, extra) = legend_entries(app);
    main.len() + extra.len()
}

/// The legend's text for one entry: name, bytes and, pinned, the change (9 cells).
fn entry_text(name: &str, bytes: u64, change: Option<i64>, pinned: bool) -> String {
    if pinned {
        let change = change.map_or(String::new(), format_change);
        format!("{name:<16}{:>10} {change:>9}", format_size(bytes))
    } else {
        format!("{name:<17}{:>11}", format_size(bytes))
    }
}

/// The components by column: the peak's (summing to the total) with their change since the
/// pin, then, dimmed, the parts only the other phase holds, with that phase's bytes. When the
/// peak's do not all fit, the last cell counts the rest of them.
fn legend(frame: &mut Frame, app: &App, area: Rect) {
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

/// The effective batch and what it is made of, then the prompts, then vLLM's KV room: as many
/// of the three as fit.
fn batch_line(app: &App, width: u16) -> String {
    let e = &app.estimate;
    let lock = if app.lock { "locked" } else { "free" };
    let mut parts = vec![
        format!(
            " batch {} ({}) = {} × {} accum × {}",
            e.effective_batch,
            lock,
            app.run.micro_batch,
            app.run.grad_accum,
            count(app.run.processes(), "GPU", "GPUs"),
        ),
        format!(
            "{} × {} gens",
            count_f(e.prompts_per_step, 2, "prompt", "prompts"),
            app.run.num_generations
        ),
    ];
    if let Some(v) = &e.vllm {
        parts.push(format!(
            "KV {} seq",
            decimal_places(v.full_length_sequences, 1)
        ));
    }
    let mut line = String::new();
    for p in parts {
        let next = if line.is_empty() {
            p
        } else {
            format!("{line} · {p}")
        };
        if !line.is_empty() && width_of(&next) > width as usize {
            break;
        }
        line = next;
    }
    ellipsize(&line, width as usize)
}

/// A lever's one step down: `(label, from → to, saves or costs)`.
fn step_parts(step: &crate::model::fit::StepDown) -> (String, String, String) {
    let c = &step.change;
    let saved = if c.bytes_saved >= 0 {
        format!("saves {}", format_size(c.bytes_saved as u64))
    } else {
        format!("costs {}", format_size(c.bytes_saved.unsigned_abs()))
    };
    (
        c.lever.label().to_string(),
        format!("{} → {}", c.from, c.to),
        saved,
    )
}

/// Warnings, then each lever's one step down with its trade-off, shortened at a word to one
/// line each (help shows them whole).
fn advice_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let w = width as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    for warning in &app.estimate.warnings {
        lines.push(Line::styled(
            ellipsize(&format!(" ! {warning}"), w),
            app.theme.warn(),
        ));
    }
    lines.push(Line::raw(" levers, one step down (? shows all of it):"));
    for step in &app.step_downs {
        let c = &step.change;
        let (label, _, saved) = step_parts(step);
        let head = format!("   {label:<13} {:>6} → {:<6} {saved:<15} ", c.from, c.to);
        let room = w.saturating_sub(width_of(&head));
        let tail = if room >= 8 {
            ellipsize(c.trade_off, room)
        } else {
            String::new()
        };
        lines.push(Line::raw(ellipsize(&format!("{head}{tail}"), w)));
    }
    lines
}

/// A lookup under way: a spinner, the name, where it looks, and how to cancel.
fn fetching_line(app: &App, name: &str) -> String {
    const SPINNER: [char; 4] = ['|', '/', '-', '\\'];
    let ticks = app
        .lookup
        .as_ref()
        .map_or(0, |l| l.started.elapsed().as_millis() / 250);
    let spinner = SPINNER[(ticks % 4) as usize];
    let hub = match &app.hub {
        crate::hub::online::Access::Online(hub) => format!("then {}", hub.remote.endpoint()),
        crate::hub::online::Access::Offline(why) => format!("not the Hub: {why}"),
    };
    format!(" {spinner} fetching… {name}: the Hugging Face cache, {hub} · Esc cancels")
}

/// The message line (two when it needs them): the entry, a question, or the last message.
fn message_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let (text, style) = match &app.mode {
        // the error, once there is one, takes the hint's place
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
        Mode::ConfirmOverwrite { path, .. } => (
            format!(
                " {} exists: y overwrites, any other key cancels",
                path.display()
            ),
            app.theme.warn(),
        ),
        Mode::ConfirmQuit => (
            " changes not exported: export? y/n/cancel".to_string(),
            app.theme.warn(),
        ),
        Mode::Fetching { name } => (fetching_line(app, name), app.theme.focus()),
        _ => (
            app.message
                .as_ref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default(),
            Style::default(),
        ),
    };
    let w = width as usize;
    let mut lines = wrap(&text, w, 1);
    if lines.len() > 2 {
        let rest = lines[1..].join(" ");
        lines.truncate(1);
        lines.push(ellipsize(&format!(" {}", rest.trim()), w));
    }
    lines.into_iter().map(|l| Line::styled(l, style)).collect()
}

/// The footer's keys (the engine and ZeRO keys once the spread is shown); when they do not
/// all fit, the pickers give way first, then the spread keys, then undo, fit and
/// export (help and quit always stay: help lists every key).
fn footer(frame: &mut Frame, app: &App, area: Rect) {
    use super::keymap::Action;
    let spread_key = |a: Action| matches!(a, Action::CycleEngine | Action::CycleZeroStage);
    let mut shown: Vec<(Action, (&str, &str))> = BINDINGS
        .iter()
        .filter(|b| app.spread_shown() || !spread_key(b.action))
        .filter_map(|b| b.footer.map(|f| (b.action, f)))
        .collect();
    let width = |s: &[(Action, (&str, &str))]| {
        s.iter()
            .map(|(_, (k, w))| 1 + width_of(k) + 1 + width_of(w) + 1)
            .sum::<usize>()
    };
    let give_way = [
        Action::PickModel,
        Action::PickPreset,
        Action::CycleZeroStage,
        Action::CycleEngine,
        Action::Undo,
        Action::Fit,
        Action::Export,
        Action::NextKnob,
        Action::Up,
    ];
    for action in give_way {
        if width(&shown) <= area.width as usize {
            break;
        }
        shown.retain(|(a, _)| *a != action);
    }
    let shown = shown.into_iter().map(|(_, f)| f);
    let mut spans = vec![Span::raw(" ")];
    for (keys, word) in shown {
        spans.push(Span::styled(keys, app.theme.focus()));
        spans.push(Span::raw(format!(" {word}  ")));
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

/// Help's text for a popup `inner` cells wide: the keys, then the whole of what the main view
/// shortens (the levers' trade-offs, the warnings, the settings, the batch and the GPU).
fn help_lines(app: &App, inner: usize) -> Vec<String> {
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
    for step in &app.step_downs {
        let (label, change, saved) = step_parts(step);
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

/// Help's view of the followed run: its status and notices whole, then the figures `vramfit
/// check` attributes, predicted against measured.
fn measured_lines(app: &App, inner: usize) -> Vec<String> {
    let mut out = vec![" measured, in the run followed".to_string()];
    let status = follow::status_lines(app);
    out.extend(wrap(status.first().map_or("", String::as_str), inner, 4));
    for notice in follow::notices(app) {
        out.extend(wrap(&format!("  ! {notice}"), inner, 4));
    }
    let rows = follow::rows(app);
    if rows.is_empty() {
        out.push("  no step line nor NVML sample yet".into());
        return out;
    }
    out.push(follow::rows_header());
    out.extend(rows.iter().map(follow::row_text));
    out.extend(wrap(
        "  error: (predicted - measured) / measured, as `vramfit check` gives it; good within 5 %. ◆ on the bar: the whole process's measured peak (NVML's, or torch's reserved plus the CUDA context)",
        inner,
        4,
    ));
    out
}

/// Help's memory table: each phase's components (the run's, with one phase), the peak named.
fn memory_lines(app: &App) -> Vec<String> {
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
fn help_area(app: &App, area: Rect) -> (Rect, Vec<String>) {
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
pub fn help_rows(app: &App, w: u16, h: u16) -> usize {
    help_area(app, Rect::new(0, 0, w, h))
        .0
        .height
        .saturating_sub(2) as usize
}

/// How far help scrolls at `w` x `h`.
pub fn help_max_scroll(app: &App, w: u16, h: u16) -> usize {
    let (_, lines) = help_area(app, Rect::new(0, 0, w, h));
    lines.len().saturating_sub(help_rows(app, w, h))
}

fn help(frame: &mut Frame, app: &App, area: Rect, scroll: usize) {
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

/// A picker's frame on `area`.
fn picker_area(mode: &Mode, area: Rect) -> Rect {
    match mode {
        Mode::Presets { choices, .. } => popup(area, 72, choices.len() as u16 + 2),
        _ => popup(area, 64, 20),
    }
}

/// Rows of a picker's list at `w` x `h` (PgUp/PgDn move this many).
pub fn picker_rows(mode: &Mode, w: u16, h: u16) -> usize {
    let r = picker_area(mode, Rect::new(0, 0, w, h));
    let filter = u16::from(matches!(mode, Mode::Models { .. }));
    r.height.saturating_sub(2 + filter) as usize
}

fn framed(frame: &mut Frame, r: Rect, title: String, bottom: &str) -> Rect {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title)
        .title_bottom(bottom.to_string());
    let inner = block.inner(r);
    frame.render_widget(Clear, r);
    frame.render_widget(block, r);
    inner
}

fn models(frame: &mut Frame, app: &App, area: Rect, filter: &str, selected: usize, typing: bool) {
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

fn presets(frame: &mut Frame, app: &App, area: Rect, selected: usize, choices: &[PresetChoice]) {
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
    let items = choices
        .iter()
        .map(|c| {
            let capacity = c.capacity.map_or("-".into(), format_size);
            Line::from(vec![
                Span::raw(format!("{:<name_w$}  {capacity:>10}  ", c.name)),
                Span::styled(c.model.clone(), app.theme.dim()),
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
