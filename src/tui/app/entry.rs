//! Typing an exact value for a knob.

use super::*;
use grpofit_core::run::knobs::Knob;
use ratatui::crossterm::event::{KeyCode, KeyEvent};

impl App {
    /// A key while a value is typed. The pre-filled value starts selected, as in a text field:
    /// the first character typed replaces it, Backspace clears it, an arrow key or End keeps it
    /// for editing.
    pub(super) fn entry_key(
        &mut self,
        knob: Knob,
        mut text: String,
        selected: bool,
        key: KeyEvent,
    ) {
        let editing = |text: String, error: Option<String>| Mode::Entry {
            knob,
            text,
            error,
            selected: false,
        };
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Enter => match knob.parse(&text) {
                Ok(v) => {
                    self.mode = Mode::Normal;
                    if !self.set_knob(knob, v) {
                        self.mode = editing(text, self.message.take());
                    }
                }
                Err(e) => self.mode = editing(text, Some(e.to_string())),
            },
            KeyCode::Backspace => {
                if selected {
                    text.clear();
                } else {
                    text.pop();
                }
                self.mode = editing(text, None);
            }
            KeyCode::Left | KeyCode::Right | KeyCode::End | KeyCode::Home => {
                self.mode = editing(text, None);
            }
            KeyCode::Char(c)
                if c.is_ascii_digit() || c == '.' || (c == '%' && knob == Knob::VllmShare) =>
            {
                if selected {
                    text.clear();
                }
                if text.len() < 12 {
                    text.push(c);
                }
                self.mode = editing(text, None);
            }
            _ => {}
        }
    }
}
