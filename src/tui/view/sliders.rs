use crate::tui::app::App;
use crate::tui::widgets::{Slider, window_start};
use grpofit_core::memory::vllm::{colocated_context, context_is_prompt_and_completion};
use grpofit_core::run::Generation;
use grpofit_core::run::knobs::Knob;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::widgets::Paragraph;

/// The trainer keys column shows from this width on; narrower, the slider takes its room.
pub(super) const KEYS_FROM_WIDTH: u16 = 70;

/// The index of the first knob on screen when `rows` of them fit: the focused one is always
/// among them.
pub(super) fn first_knob(app: &App, rows: usize) -> usize {
    window_start(app.focus, app.knobs().len(), rows)
}

/// The context the colocated vLLM really gets, for the sequence knob where the pinned TRL
/// passes it prompt + completion rather than the run's context (trl 0.18 to 0.25,
/// `StackVersions::trl_context_is_prompt_and_completion`): the estimate's own figure
/// (`memory::vllm::colocated_context`), so the screen never shows a context vLLM does not get.
fn vllm_context_is_the_sum(app: &App, knob: Knob) -> Option<u64> {
    let run = &app.run;
    let sum = knob == Knob::SequenceLength
        && matches!(run.generation, Generation::ColocatedVllm { .. })
        && context_is_prompt_and_completion(run);
    sum.then(|| colocated_context(run))
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

pub(super) fn sliders(frame: &mut Frame, app: &App, area: Rect) {
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
        let vllm_sum = vllm_context_is_the_sum(app, knob);
        let value = match vllm_sum {
            Some(context) => Some(context),
            None => knob.get(&app.run),
        };
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
        if cells[3].width > 0 {
            frame.render_widget(
                Paragraph::new(match vllm_sum {
                    Some(_) => " prompt + completion".to_string(),
                    None => format!(" {}", knob.key_for(&app.run).1),
                })
                .style(app.theme.dim()),
                cells[3],
            );
        }
    }
}
