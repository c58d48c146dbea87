//! The time bar under the memory bars: one optimizer step's seconds split by phase
//! (`grpofit_core::time::PHASES`), recomputed with the estimate as the knobs move, with the
//! step, the run's length and the card it is timed on; on a tall screen a second line names each
//! phase's seconds; following a run, `check`'s rewards line under it (TRL's timed reward
//! functions against the prediction). Without a card the line says so instead of inventing
//! figures.

use super::text::{ellipsize, width_of};
use crate::tui::app::App;
use grpofit_core::time::{self, StepTime};
use ratatui::text::{Line, Span};

/// From this many rows the time bar takes a second line: each phase and its seconds.
pub(super) const PHASE_LINE_FROM_ROWS: u16 = 36;

/// The narrowest bar worth drawing; narrower, the line keeps its words alone.
const MIN_BAR: usize = 10;

/// The letter a phase's segment is filled with: its label's initial (`weight_sync`: w,
/// `scoring`: l for log-probs).
fn fill(phase: &str) -> char {
    time::phase_label(phase).chars().next().unwrap_or('?')
}

/// The time bar's lines for a `width` x `height` screen: one, two on a tall screen.
pub(super) fn time_lines(app: &App, width: u16, height: u16) -> Vec<Line<'static>> {
    let w = width as usize;
    let t = match &app.step_time {
        Ok(t) => t,
        Err(why) => {
            // the table's list of cards is help's to show: the line keeps the reason and the
            // fix, the shorter wordings on a narrower screen
            let reason = why.split(" (").next().unwrap_or(why);
            // the card is named on the command line (`--gpu`) or in the run file
            let candidates = [
                format!(
                    " step time: not timed: {reason}; start with --gpu CARD, or set [grpofit] gpu (or gpu_tflops and gpu_bandwidth)"
                ),
                " step time: not timed, no figures for this card: start with --gpu CARD, or set [grpofit] gpu".to_string(),
                " step time: no card figures (--gpu or [grpofit] gpu)".to_string(),
            ];
            let text = candidates
                .iter()
                .find(|c| width_of(c) <= w)
                .unwrap_or(&candidates[2]);
            return vec![Line::styled(ellipsize(text, w), app.theme.dim())];
        }
    };
    let mut lines = vec![bar_line(app, t, w)];
    // following a run: `check`'s rewards line under the step, the longest wording that fits
    let rewards = crate::tui::follow::rewards_lines(&super::bar::follow_screen(app), t);
    if let Some(l) = rewards.iter().find(|l| width_of(l) <= w).or(rewards.last()) {
        lines.push(Line::raw(ellipsize(l, w)));
    }
    if height >= PHASE_LINE_FROM_ROWS {
        // the rewards are timed only when the file gives `reward_seconds`: no zero shown
        let parts: Vec<String> = t
            .phases
            .iter()
            .filter(|p| p.phase != "rewards" || p.seconds > 0.0)
            .map(|p| {
                format!(
                    "{} {} {}",
                    fill(p.phase),
                    time::phase_label(p.phase),
                    time::seconds(p.seconds)
                )
            })
            .collect();
        let length = if t.completion_is_mean {
            format!("completions of {:.0} tokens", t.completion_tokens)
        } else {
            format!("completions at the full {:.0} tokens", t.completion_tokens)
        };
        let learned = app
            .learned
            .as_ref()
            .map_or(String::new(), |l| format!(" · {}", l.said()));
        let text = format!("   {} · {length}{learned}", parts.join(" · "));
        lines.push(Line::styled(ellipsize(&text, w), app.theme.dim()));
    }
    lines
}

/// "step ≈ 11 s [gggggggwsstttt] on H100 SXM · 640 steps ≈ 2.0 h": the bar takes what the
/// words leave; the run's length, then the card, give way first on a narrow screen.
fn bar_line(app: &App, t: &StepTime, w: usize) -> Line<'static> {
    let head = format!(" step ≈ {} ", time::seconds(t.seconds));
    let run = match (t.steps, t.run_hours) {
        (Some(s), Some(h)) if h >= 1.0 => format!(" · {s} steps ≈ {h:.1} h"),
        (Some(s), Some(h)) => format!(" · {s} steps ≈ {:.0} min", h * 60.0),
        _ => String::new(),
    };
    let calibrated = if app.learned.is_some() {
        " (calibrated)"
    } else {
        ""
    };
    let card = format!(" on {}{calibrated}", t.gpu.name);
    let tails = [format!("{card}{run}"), card, String::new()];
    // the longest tail that leaves the bar its least, and the bar up to half the line
    let tail = tails
        .iter()
        .find(|tail| width_of(&head) + 2 + MIN_BAR + width_of(tail) <= w)
        .cloned()
        .unwrap_or_default();
    let room = w.saturating_sub(width_of(&head) + 2 + width_of(&tail));
    let bar_w = room.min(w / 2);
    let mut spans = vec![Span::raw(head)];
    if bar_w >= MIN_BAR {
        spans.push(Span::raw("["));
        for (i, (phase, cells)) in segments(t, bar_w).into_iter().enumerate() {
            let c = if app.theme.colour { '█' } else { fill(phase) };
            spans.push(Span::styled(
                c.to_string().repeat(cells),
                app.theme.phase(i),
            ));
        }
        spans.push(Span::raw("]"));
    }
    spans.push(Span::raw(tail));
    Line::from(spans)
}

/// Each phase's cells in a bar `width` wide, in proportion to its seconds (largest
/// remainders get the cells rounding leaves), every phase of a tenth of a second or more at
/// least one cell so that it is seen.
fn segments(t: &StepTime, width: usize) -> Vec<(&'static str, usize)> {
    let total: f64 = t.phases.iter().map(|p| p.seconds.max(0.0)).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let exact: Vec<f64> = t
        .phases
        .iter()
        .map(|p| p.seconds.max(0.0) / total * width as f64)
        .collect();
    let mut cells: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    for (c, p) in cells.iter_mut().zip(&t.phases) {
        if *c == 0 && p.seconds >= 0.1 {
            *c = 1;
        }
    }
    let mut order: Vec<usize> = (0..exact.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let mut used: usize = cells.iter().sum();
    for &i in order.iter().cycle().take(4 * order.len()) {
        if used >= width {
            break;
        }
        if exact[i] > 0.0 {
            cells[i] += 1;
            used += 1;
        }
    }
    // a floor of one cell may overfill a narrow bar: the largest phase gives way
    while used > width {
        let Some(big) = (0..cells.len()).max_by_key(|&i| cells[i]) else {
            break;
        };
        cells[big] -= 1;
        used -= 1;
    }
    t.phases.iter().map(|p| p.phase).zip(cells).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpofit_core::time::{GpuFigures, PhaseTime};

    fn step(seconds: [f64; 5]) -> StepTime {
        StepTime {
            seconds: seconds.iter().sum(),
            phases: time::PHASES
                .iter()
                .zip(seconds)
                .map(|(phase, seconds)| PhaseTime { phase, seconds })
                .collect(),
            gpu: GpuFigures {
                name: "H100 SXM".into(),
                bf16_tflops: 989.0,
                memory_gb_s: 3350.0,
                source: String::new(),
            },
            tokens_per_second: 0.0,
            completion_tokens: 1024.0,
            completion_is_mean: false,
            mean_capped_from: None,
            steps: None,
            run_hours: None,
            reward_functions_timed: false,
        }
    }

    #[test]
    fn segments_fill_the_bar_in_proportion() {
        let s = segments(&step([6.0, 0.0, 1.0, 0.0, 3.0]), 20);
        assert_eq!(s.iter().map(|(_, c)| c).sum::<usize>(), 20);
        assert_eq!(s[0], ("generation", 12));
        assert_eq!(s[1], ("weight_sync", 0));
        assert_eq!(s[2], ("scoring", 2));
        assert_eq!(s[3], ("rewards", 0));
        assert_eq!(s[4], ("training", 6));
    }

    #[test]
    fn a_short_phase_keeps_a_cell() {
        let s = segments(&step([30.0, 0.2, 0.0, 0.0, 10.0]), 10);
        assert_eq!(s.iter().map(|(_, c)| c).sum::<usize>(), 10);
        assert_eq!(s[1].1, 1, "{s:?}");
    }
}
