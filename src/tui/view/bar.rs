use crate::tui::app::App;
use crate::tui::follow;
use crate::tui::widgets::MemoryBar;
use grpofit_core::memory::estimate::{Component, Phase, PhaseMemory};
use grpofit_core::memory::roles::{Role, RoleKind};
use grpofit_core::units::{format_change, format_size};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// The phases the bars show, in their order (generation, then training): both when the
/// estimate has two, else none (one bar for the run).
pub(super) fn phases(app: &App) -> Vec<&PhaseMemory> {
    let mut phases: Vec<&PhaseMemory> = app.estimate.phases.iter().collect();
    if phases.len() < 2 {
        return Vec::new();
    }
    phases.sort_by_key(|p| match p.phase {
        Phase::Generation => 0,
        Phase::Scoring => 1,
        Phase::Training => 2,
    });
    phases
}

/// One bar on the memory scale: its label (empty for a lone bar), the components it stacks,
/// and the label's style.
pub(super) struct BarRow<'a> {
    pub label: String,
    pub components: &'a [Component],
    pub style: Style,
}

/// The bars, top to bottom: the training GPUs' phases (generation, then training, the peak
/// bold) when vLLM shares them, else one bar for them; then one bar per other role (the vLLM
/// server's GPUs). With more than one role or training process, the bars say the role and its
/// GPUs (`training ×7`, `vLLM server ×1`); a role that does not fit has its label in red.
pub(super) fn bar_list(app: &App) -> Vec<BarRow<'_>> {
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
pub(super) fn role_label(role: &Role) -> String {
    format!(
        "{:<15}{:>10}",
        format!("{} ×{}", role.role.label(), role.gpus),
        format_size(role.total_bytes)
    )
}

pub(super) fn role_style(app: &App, role: Option<&Role>) -> Style {
    match role {
        Some(r) if !r.fits => app.theme.bad(),
        _ => Style::default(),
    }
}

/// A role's verdict: its headroom, what it is short by, or that vLLM would not start there;
/// and whether that is good news.
pub(super) fn role_verdict(role: &Role) -> (String, bool) {
    if let Some(v) = role.vllm.as_ref().filter(|v| !v.starts) {
        // the start-up check that fails, as the single-role title names it
        let said = v.refusal.as_ref().map_or_else(
            || "vLLM cannot start".to_string(),
            |r| format!("vLLM cannot start: {}", r.reason.name()),
        );
        (said, false)
    } else if grpofit_core::fit::under_headroom(role) {
        (
            format!(
                "headroom {}, under {}",
                format_size(role.headroom_bytes.unsigned_abs()),
                grpofit_core::fit::headroom_percent()
            ),
            false,
        )
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
pub(super) fn bar_height(app: &App) -> u16 {
    2 + bar_list(app).len() as u16
}

/// The bar's title: the total against the capacity, the headroom or the shortfall, and with a
/// pin the change since; narrower, the pin's own total, then the percentage, then the word
/// "memory" give way, so that the change since the pin stays.
pub(super) fn bar_title(app: &App, width: usize) -> Line<'static> {
    let e = &app.estimate;
    if e.roles.len() > 1 {
        return roles_title(app, width);
    }
    let margin = e.headroom_bytes.unsigned_abs();
    let refusal = vllm_refusal(app);
    let (verdict, style) = match refusal {
        // the memory would fit, but vLLM's start-up check fails: say so, not a shortfall
        Some(reason) => (format!("vLLM cannot start: {reason}"), app.theme.bad()),
        // fit keeps DEFAULT_HEADROOM free and would change this run
        None if grpofit_core::fit::estimate_under_headroom(e) => (
            format!(
                "headroom {}, under the {} fit keeps",
                format_size(margin),
                grpofit_core::fit::headroom_percent()
            ),
            app.theme.warn(),
        ),
        None if e.fits => (
            format!("headroom {}", format_size(margin)),
            app.theme.good(),
        ),
        None => (format!("SHORT BY {}", format_size(margin)), app.theme.bad()),
    };
    let percent = if refusal.is_some() {
        String::new()
    } else {
        format!(
            " ({:.1}%)",
            100.0 * margin as f64 / e.capacity_bytes.max(1) as f64
        )
    };
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
            Span::styled(format!("{verdict}{percent}"), style),
            Span::raw(pin.to_string()),
        ])
    };
    let Some((long, short)) = pin else {
        // narrower, the percentage then the word "memory" give way, so the verdict stays whole
        let candidates = [
            title(true, &percent, ""),
            title(true, "", ""),
            title(false, "", ""),
        ];
        let fallback = title(false, "", "");
        return candidates
            .into_iter()
            .find(|l| l.width() <= width)
            .unwrap_or(fallback);
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

/// Why vLLM cannot start on the training GPUs, when the memory itself fits there: the verdict
/// then names the start-up check rather than a shortfall (the headroom is positive).
fn vllm_refusal(app: &App) -> Option<&'static str> {
    let e = &app.estimate;
    let refusal = e.vllm.as_ref()?.refusal.as_ref()?;
    (e.headroom_bytes >= 0).then_some(refusal.reason.name())
}

/// The title when the run has several roles: the run fits only when every role fits, then
/// each role's verdict; narrower, the capacity, then the GPU counts, then the pin give way.
pub(super) fn roles_title(app: &App, width: usize) -> Line<'static> {
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
pub(super) fn compact_verdict(role: &Role) -> (String, bool) {
    let bytes = format_size(role.headroom_bytes.unsigned_abs());
    if role.vllm.as_ref().is_some_and(|v| !v.starts) {
        ("won't start".into(), false)
    } else if role.fits {
        (format!("{bytes} free"), true)
    } else {
        (format!("short {bytes}"), false)
    }
}

pub(super) fn bar(frame: &mut Frame, app: &App, area: Rect) {
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
        measured: follow::measured_peak(&follow_screen(app)).map(|m| (training_bar(app), m)),
        theme: app.theme,
    };
    frame.render_widget(&widget, bar_area.intersection(area));
}

/// The bar of the training GPUs at their peak, where the followed run's measured peak is
/// marked: the peak phase's when the bars are phases, else the first (the training role's).
/// What the follow text reads of the screen's state.
pub(super) fn follow_screen(app: &App) -> follow::Screen<'_> {
    follow::Screen {
        follow: app.follow.as_ref(),
        run: &app.run,
        estimate: &app.estimate,
        checked: app.checked.as_ref(),
        gpu_name: app.gpu.live.as_ref().map(|g| g.name.as_str()),
        capacity: app.gpu.capacity,
    }
}

pub(super) fn training_bar(app: &App) -> usize {
    phases(app)
        .iter()
        .position(|p| p.phase == app.estimate.peak_phase)
        .unwrap_or(0)
}
