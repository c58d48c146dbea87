//! Colours, and the fill patterns that tell segments apart without colour (`NO_COLOR`).

use crate::palette::Hue;
use grpofit_core::memory::estimate::Part;
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub colour: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to anything non-empty (no-color.org).
    pub fn from_env() -> Theme {
        let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Theme { colour: !no_colour }
    }

    pub fn mono() -> Theme {
        Theme { colour: false }
    }

    /// The pattern a component's segment is filled with, in both themes (`palette::look`).
    pub fn fill(part: Part) -> char {
        crate::palette::look(part).fill
    }

    pub fn segment(&self, part: Part) -> Style {
        if !self.colour {
            return Style::default();
        }
        let c = match crate::palette::hue(part) {
            Hue::DarkGray => Color::DarkGray,
            Hue::Red => Color::Red,
            Hue::Green => Color::Green,
            Hue::Yellow => Color::Yellow,
            Hue::Blue => Color::Blue,
            Hue::Magenta => Color::Magenta,
            Hue::Cyan => Color::Cyan,
            Hue::Gray => Color::Gray,
            Hue::LightRed => Color::LightRed,
            Hue::LightGreen => Color::LightGreen,
            Hue::LightYellow => Color::LightYellow,
            Hue::LightBlue => Color::LightBlue,
            Hue::LightMagenta => Color::LightMagenta,
            Hue::LightCyan => Color::LightCyan,
        };
        Style::default().fg(c)
    }

    /// A step phase's segment in the time bar (`time::PHASES`' order): its colour, or
    /// without colour none (the fill letter tells them apart, `view::timebar`).
    pub fn phase(&self, index: usize) -> Style {
        const HUES: [Color; 5] = [
            Color::Cyan,
            Color::Magenta,
            Color::Yellow,
            Color::Blue,
            Color::Green,
        ];
        if !self.colour {
            return Style::default();
        }
        Style::default().fg(HUES[index % HUES.len()])
    }

    pub fn overflow(&self) -> Style {
        if self.colour {
            Style::default().fg(Color::White).bg(Color::Red)
        } else {
            Style::default().add_modifier(Modifier::REVERSED)
        }
    }

    pub fn focus(&self) -> Style {
        let s = Style::default().add_modifier(Modifier::BOLD);
        if self.colour {
            s.fg(Color::Yellow)
        } else {
            s.add_modifier(Modifier::REVERSED)
        }
    }

    pub fn good(&self) -> Style {
        if self.colour {
            Style::default().fg(Color::Green)
        } else {
            Style::default()
        }
    }

    pub fn bad(&self) -> Style {
        let s = Style::default().add_modifier(Modifier::BOLD);
        if self.colour { s.fg(Color::Red) } else { s }
    }

    pub fn warn(&self) -> Style {
        if self.colour {
            Style::default().fg(Color::Yellow)
        } else {
            Style::default()
        }
    }

    /// A followed run's measured peak (◆) on its bar: it stands out on any segment.
    pub fn measured(&self) -> Style {
        let s = Style::default().add_modifier(Modifier::BOLD);
        if self.colour {
            s.fg(Color::White).bg(Color::Black)
        } else {
            s
        }
    }

    pub fn dim(&self) -> Style {
        if self.colour {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }
}
