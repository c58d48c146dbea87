use super::text::*;
use crate::tui::app::App;
use grpofit_core::run::{Generation, Stack};
use grpofit_core::text::count;
use grpofit_core::units::format_size;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Every setting a key toggles, where it applies to the run: what the header shows.
pub(super) fn settings(app: &App) -> Vec<String> {
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
    // an attention other than transformers' default, which the step's memory follows
    if let Some(a) = r.modelled_attention().filter(|a| !a.is_default()) {
        s.push(format!("{a} attention"));
    }
    // the trainer versions, when the run is pinned to others than grpofit's targets
    if r.versions != grpofit_core::run::versions::StackVersions::default() {
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
pub(super) fn header_lines(app: &App, width: u16) -> Vec<Line<'static>> {
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
    for warning in &app.version_warnings {
        let text = ellipsize(&format!(" warning: {warning}"), w);
        lines.push(Line::styled(text, app.theme.warn()));
    }
    lines.push(Line::raw(ellipsize(&gpu_text(app), w)));
    lines
}

pub(super) fn gpu_text(app: &App) -> String {
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

pub(super) fn header(frame: &mut Frame, app: &App, area: Rect) {
    frame.render_widget(Paragraph::new(header_lines(app, area.width)), area);
}

/// ` · pid 4242 1.00 GiB, pid 17 …`: who holds the GPU, biggest first.
pub(super) fn processes(gpu: &crate::gpu::GpuInfo) -> String {
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
