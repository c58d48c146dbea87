use super::bar::*;
use super::text::*;
use crate::tui::app::{App, Mode};
use crate::tui::follow;
use crate::tui::keymap::BINDINGS;
use grpofit_core::text::{count, count_f};
use grpofit_core::units::format_size;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// The followed run's figures show on screens at least this tall and wide.
pub(super) const FOLLOW_ROWS_FROM: (u16, u16) = (100, 40);

/// The followed run (`--follow`): its status (the longest that fits), its notices on one line,
/// and on a large screen the figures `grpofit check` sets side by side.
pub(super) fn follow_lines(app: &App, width: u16, height: u16) -> Vec<Line<'static>> {
    if app.follow.is_none() {
        return Vec::new();
    }
    let w = width as usize;
    let candidates = follow::status_lines(&follow_screen(app));
    let status = candidates
        .iter()
        .find(|l| width_of(l) <= w)
        .or(candidates.last())
        .map_or(String::new(), |l| ellipsize(l, w));
    let mut lines = vec![Line::raw(status)];
    let notices = follow::notices(&follow_screen(app));
    if !notices.is_empty() {
        lines.push(Line::styled(
            ellipsize(&format!(" ! {}", notices.join(" · ")), w),
            app.theme.warn(),
        ));
    }
    let rows = follow::rows(&follow_screen(app));
    if width >= FOLLOW_ROWS_FROM.0 && height >= FOLLOW_ROWS_FROM.1 && !rows.is_empty() {
        lines.push(Line::styled(follow::rows_header(), app.theme.dim()));
        lines.extend(rows.iter().map(|r| Line::raw(follow::row_text(r))));
    }
    lines
}

/// The effective batch and what it is made of, then the prompts, then vLLM's KV room: as many
/// of the three as fit.
pub(super) fn batch_line(app: &App, width: u16) -> String {
    let e = &app.estimate;
    let lock = if app.lock { "locked" } else { "free" };
    let parts = vec![
        format!(
            " batch {} ({}) = {} × {} accum × {}",
            app.run.effective_batch(),
            lock,
            app.run.micro_batch,
            app.run.grad_accum,
            count(app.run.processes(), "GPU", "GPUs"),
        ),
        match crate::report::unsloth_runs(&app.run) {
            // Unsloth raises the micro-batch to num_generations (unsloth#3572)
            Some((batch, prompts)) => format!(
                "Unsloth runs {batch} = {} × {} gens",
                count_f(prompts, 2, "prompt", "prompts"),
                app.run.num_generations
            ),
            None => format!(
                "{} × {} gens",
                count_f(e.batch.prompts_per_step, 2, "prompt", "prompts"),
                app.run.num_generations
            ),
        },
    ];
    let mut line = String::new();
    for p in parts {
        let next = if line.is_empty() {
            p
        } else {
            format!("{line} · {p}")
        };
        if !line.is_empty() && width_of(&next) > width as usize {
            return ellipsize(&line, width as usize);
        }
        line = next;
    }
    if let Some(v) = &e.vllm {
        // whole sequences of the full context: vLLM holds no part of one; the context's length
        // where there is room
        let whole = v.full_length_sequences.max(0.0).floor() as u64;
        let seqs = count(whole, "seq", "seqs");
        for p in [
            format!("KV {seqs} of {} tokens", v.max_model_len),
            format!("KV {seqs}"),
        ] {
            let next = format!("{line} · {p}");
            if width_of(&next) <= width as usize {
                line = next;
                break;
            }
        }
    }
    ellipsize(&line, width as usize)
}

/// A lever's one step down: `(label, from → to, saves or costs)`, the bytes and, where the step
/// is timed, the seconds a step it adds (`seconds`).
pub(super) fn step_parts(
    step: &grpofit_core::fit::StepDown,
    seconds: Option<f64>,
) -> (String, String, String) {
    let c = &step.change;
    let bytes = if c.bytes_saved >= 0 {
        format!("saves {}", format_size(c.bytes_saved as u64))
    } else {
        format!("costs {}", format_size(c.bytes_saved.unsigned_abs()))
    };
    let saved = match seconds {
        Some(s) => format!("{bytes:<15} {:<6}", step_seconds(s)),
        None => bytes,
    };
    (
        c.lever.label().to_string(),
        format!("{} → {}", c.from, c.to),
        saved,
    )
}

/// A step's change in seconds as the levers show it: "+3.0 s", "-0.4 s", "±0 s".
pub(super) fn step_seconds(s: f64) -> String {
    if s.abs() < 0.05 {
        "±0 s".to_string()
    } else if s > 0.0 {
        format!("+{}", grpofit_core::time::seconds(s))
    } else {
        format!("-{}", grpofit_core::time::seconds(-s))
    }
}

/// Warnings, then each lever's one step down with its trade-off, shortened at a word to one
/// line each (help shows them whole).
pub(super) fn advice_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let w = width as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    for warning in &app.estimate.warnings {
        lines.push(Line::styled(
            ellipsize(&format!(" ! {warning}"), w),
            app.theme.warn(),
        ));
    }
    lines.push(Line::raw(" levers, one step down (? shows all of it):"));
    for (i, step) in app.step_downs.iter().enumerate() {
        let c = &step.change;
        let (label, _, saved) = step_parts(step, app.step_seconds.get(i).copied().flatten());
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
pub(super) fn fetching_line(app: &App, name: &str) -> String {
    const SPINNER: [char; 4] = ['|', '/', '-', '\\'];
    let ticks = app
        .lookup_started
        .map_or(0, |started| started.elapsed().as_millis() / 250);
    let spinner = SPINNER[(ticks % 4) as usize];
    let hub = match &app.hub {
        crate::hub::online::Access::Online(hub) => format!("then {}", hub.remote.endpoint()),
        crate::hub::online::Access::Offline(why) => format!("not the Hub: {why}"),
    };
    match &app.lookup_notice {
        Some(said) => format!(" {spinner} {said} · Esc cancels"),
        None => format!(" {spinner} fetching… {name}: the Hugging Face cache, {hub} · Esc cancels"),
    }
}

/// The message line (two when it needs them): the entry, a question, or the last message.
pub(super) fn message_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let (text, style) = match &app.mode {
        // the error, once there is one, takes the hint's place
        Mode::Entry {
            knob,
            text,
            error,
            selected,
        } => (
            // a selected value shows in brackets: typing replaces it
            match error {
                None if *selected => format!(
                    " {} = [{text}] {} · typing replaces, Enter sets, Esc cancels",
                    knob.label(),
                    knob.entry_hint()
                ),
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
        Mode::SourceChanged {
            read, what, now, ..
        } => (
            format!(
                " {} changed on disk since it was read ({what}): {}",
                read.display(),
                if now.is_some() {
                    "m writes the tuned keys into its new text, r reloads it, any other key cancels"
                } else {
                    "nothing written; r reloads it, any other key goes back"
                }
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
    let lines = keep_the_end(wrap(&text, w, 1), w, MESSAGE_LINES);
    lines.into_iter().map(|l| Line::styled(l, style)).collect()
}

/// The message's lines at most: a refusal wraps onto them whole at 80 columns.
const MESSAGE_LINES: usize = 3;

/// At most `most` of the wrapped `lines`: when there are more, the middle gives way (`…`) and
/// the end stays, since a refusal ends with its fix (`b unlocks`, `Esc cancels`).
fn keep_the_end(mut lines: Vec<String>, width: usize, most: usize) -> Vec<String> {
    if lines.len() <= most {
        return lines;
    }
    let rest: Vec<&str> = lines[most - 1..]
        .iter()
        .flat_map(|l| l.split_whitespace())
        .collect();
    // the longest run of the last words that fits after " … "
    let mut tail: Vec<&str> = Vec::new();
    for word in rest.iter().rev() {
        let mut candidate = vec![*word];
        candidate.extend(tail.iter());
        if width_of(&format!(" … {}", candidate.join(" "))) > width {
            break;
        }
        tail = candidate;
    }
    let last = ellipsize(&format!(" … {}", tail.join(" ")), width);
    lines.truncate(most - 1);
    lines.push(last);
    lines
}

/// The footer's keys (the engine and ZeRO keys once the spread is shown); when they do not
/// all fit, the pickers give way first, then the spread keys, then undo, fit and
/// export (help and quit always stay: help lists every key).
pub(super) fn footer(frame: &mut Frame, app: &App, area: Rect) {
    use crate::tui::keymap::Action;
    let spread_key = |a: Action| matches!(a, Action::CycleEngine | Action::CycleZeroStage);
    let mut shown: Vec<(Action, (&str, &str))> = BINDINGS
        .iter()
        .filter(|b| app.spread_shown() || !spread_key(b.action))
        .filter_map(|b| b.footer.map(|f| (b.action, f)))
        .collect();
    let width = |s: &[(Action, (&str, &str))]| {
        s.iter()
            .map(|(_, (k, w))| width_of(k) + 1 + width_of(w) + 2 - usize::from(w.is_empty()))
            .sum::<usize>()
            + 1
    };
    // narrower, the less used keys first lose their word (the key stays: help says it), then
    // keys give way whole
    let terse = [
        Action::Fastest,
        Action::CycleZeroStage,
        Action::CycleEngine,
        Action::Undo,
        Action::PickPreset,
        Action::PickModel,
        Action::Export,
        Action::Fit,
    ];
    for action in terse {
        if width(&shown) <= area.width as usize {
            break;
        }
        for (a, (_, word)) in shown.iter_mut() {
            if *a == action {
                *word = "";
            }
        }
    }
    let give_way = [
        Action::Fastest,
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
        spans.push(Span::raw(if word.is_empty() {
            "  ".to_string()
        } else {
            format!(" {word}  ")
        }));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
