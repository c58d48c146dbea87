//! Typing an exact value for a knob.

use super::*;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use vramfit_core::run::knobs::Knob;

impl App {
    pub(super) fn entry_key(&mut self, knob: Knob, mut text: String, key: KeyEvent) {
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Enter => match knob.parse(&text) {
                Ok(v) => {
                    self.mode = Mode::Normal;
                    if !self.set_knob(knob, v) {
                        self.mode = Mode::Entry {
                            knob,
                            text,
                            error: self.message.take(),
                        };
                    }
                }
                Err(e) => {
                    self.mode = Mode::Entry {
                        knob,
                        text,
                        error: Some(e),
                    }
                }
            },
            KeyCode::Backspace => {
                text.pop();
                self.mode = Mode::Entry {
                    knob,
                    text,
                    error: None,
                };
            }
            KeyCode::Char(c)
                if text.len() < 12
                    && (c.is_ascii_digit()
                        || c == '.'
                        || (c == '%' && knob == Knob::VllmShare)) =>
            {
                text.push(c);
                self.mode = Mode::Entry {
                    knob,
                    text,
                    error: None,
                };
            }
            _ => {}
        }
    }
}
