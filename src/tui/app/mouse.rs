//! Clicks, drags and the wheel, read against the cells the last frame drew.

use super::*;
use crate::tui::keymap::Action;
use grpofit_core::run::adjust::{exact_values, nearest_allowed};
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

impl App {
    /// The mouse: a click on a knob focuses it, a click or a drag on its track sets it there,
    /// the wheel steps the knob under it (or the focused one); in help and the pickers the
    /// wheel scrolls.
    pub(super) fn mouse(&mut self, m: MouseEvent) {
        let wheel = match m.kind {
            MouseEventKind::ScrollUp => Some(true),
            MouseEventKind::ScrollDown => Some(false),
            _ => None,
        };
        if !matches!(self.mode, Mode::Normal) {
            // the wheel moves what is open as ↑/↓ would; clicks are for the main view
            if let Some(up) = wheel
                && matches!(
                    self.mode,
                    Mode::Help { .. } | Mode::Models { .. } | Mode::Presets { .. }
                )
            {
                let code = if up { KeyCode::Up } else { KeyCode::Down };
                self.key(KeyEvent::new(code, KeyModifiers::NONE));
            }
            return;
        }
        let Some(drawn) = &self.drawn else {
            return;
        };
        let at = ratatui::layout::Position::new(m.column, m.row);
        let hit = drawn
            .knob_rows
            .iter()
            .find(|(_, cells)| cells.iter().any(|c| c.contains(at)))
            .cloned();
        let focused_track = drawn
            .knob_rows
            .iter()
            .find(|(i, _)| *i == self.focus)
            .map(|(_, cells)| cells[1]);
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                self.end_gesture();
                if let Some((i, cells)) = hit {
                    self.focus = i;
                    self.message = None;
                    if cells[1].contains(at) {
                        self.gesture = Some(self.snapshot());
                        self.set_from_track(cells[1], m.column);
                    }
                }
            }
            MouseEventKind::Drag(MouseButton::Left) if self.gesture.is_some() => {
                // the drag follows the knob it started on, wherever the pointer goes
                if let Some(track) = focused_track {
                    self.set_from_track(track, m.column);
                }
            }
            MouseEventKind::Up(_) => self.end_gesture(),
            _ if wheel.is_some() => {
                self.end_gesture();
                if let Some((i, _)) = hit {
                    self.focus = i;
                }
                self.message = None;
                self.act(if wheel == Some(true) {
                    Action::Up
                } else {
                    Action::Down
                });
            }
            _ => {}
        }
    }

    /// Sets the focused knob to the rung of its ladder at `column` on its `track`, or to the
    /// allowed value nearest it: one that keeps the locked batch when the lock binds the knob,
    /// the rules and whole groups (`adjust::allowed`).
    pub(super) fn set_from_track(&mut self, track: ratatui::layout::Rect, column: u16) {
        let knob = self.focused();
        let Some(current) = knob.get(&self.run) else {
            self.message = Some("no vLLM on this GPU: turn use_vllm on in the run file".into());
            return;
        };
        let ladder = knob.ladder();
        let x = column.clamp(track.x, track.right().saturating_sub(1)) - track.x;
        let span = track.width.saturating_sub(1).max(1) as f64;
        let rung = ((x as f64 / span) * (ladder.len() - 1) as f64).round() as usize;
        let at = ladder[rung.min(ladder.len() - 1)];
        let keep = self.lock.then_some(self.target_batch);
        // the rung nearest the click that keeps the locked batch, the rules and whole groups
        let exact = keep.and_then(|t| exact_values(knob, t, &self.run));
        let candidates = exact.as_deref().unwrap_or(ladder);
        let value = nearest_allowed(&self.run, knob, at, candidates, keep).unwrap_or(current);
        if value != current {
            self.set_knob(knob, value);
        }
    }
}
