//! The two custom widgets: a knob's slider and the stacked memory bar. Both clamp everything
//! and draw nothing outside their area, whatever its size.

use super::theme::Theme;
use crate::svg::short_size;
use grpofit_core::memory::estimate::Component;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

/// A horizontal track with a thumb at `position` (0..=1).
pub struct Slider {
    pub position: f64,
    pub style: Style,
}

impl Widget for &Slider {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.width == 0 || area.height == 0 {
            return;
        }
        let w = area.width as usize;
        let p = if self.position.is_finite() {
            self.position.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let thumb = ((w.saturating_sub(1)) as f64 * p).round() as usize;
        for i in 0..w {
            let symbol = if i == thumb {
                "●"
            } else if i < thumb {
                "━"
            } else {
                "─"
            };
            buf[(area.x + i as u16, area.y)]
                .set_symbol(symbol)
                .set_style(self.style);
        }
    }
}

/// The first of `len` rows to show in `rows` so that `selected` is among them: the selection
/// kept near the middle once the list scrolls, the window never past either end.
pub fn window_start(selected: usize, len: usize, rows: usize) -> usize {
    if rows == 0 || len <= rows {
        return 0;
    }
    selected.saturating_sub(rows / 2).min(len - rows)
}

/// A scrolling list with one selected row, marked `▶` and drawn in `highlight`; it scrolls so
/// the selection is always on screen, with `↑`/`↓` at the right edge when rows are hidden.
/// The model and preset pickers both draw one.
pub struct PickList<'a> {
    pub items: Vec<Line<'a>>,
    pub selected: usize,
    pub highlight: Style,
}

impl Widget for &PickList<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.width == 0 || area.height == 0 {
            return;
        }
        let rows = area.height as usize;
        let len = self.items.len();
        let first = window_start(self.selected, len, rows);
        for (row, (i, item)) in self
            .items
            .iter()
            .enumerate()
            .skip(first)
            .take(rows)
            .enumerate()
        {
            let y = area.y + row as u16;
            let chosen = i == self.selected;
            let mark = if chosen { " ▶ " } else { "   " };
            let mut spans = vec![Span::raw(mark)];
            spans.extend(item.spans.iter().cloned());
            buf.set_line(area.x, y, &Line::from(spans), area.width);
            if chosen {
                buf.set_style(Rect::new(area.x, y, area.width, 1), self.highlight);
            }
        }
        let right = area.x + area.width - 1;
        if first > 0 {
            buf[(right, area.y)].set_symbol("↑");
        }
        if first + rows < len {
            buf[(right, area.y + area.height - 1)].set_symbol("↓");
        }
    }
}

/// The stacked bars, one row each (the run's memory, or each phase's), on one scale: one
/// segment per component against the capacity, overflow drawn past the capacity line; below
/// them a scale row with the capacity line, the memory NVML sees in use (▲) and a pinned
/// baseline's total (◇).
pub struct MemoryBar<'a> {
    pub bars: Vec<&'a [Component]>,
    pub capacity: u64,
    pub live_used: Option<u64>,
    /// the pinned run's total, when one is pinned
    pub pinned: Option<u64>,
    /// a followed run's measured peak (◆), on the bar of that index
    pub measured: Option<(usize, u64)>,
    pub theme: Theme,
}

/// Column where `bytes` falls on a bar of `width` cells scaled to `scale` bytes.
fn column(bytes: u64, scale: u64, width: u16) -> u16 {
    if scale == 0 {
        return 0;
    }
    ((bytes as f64 / scale as f64) * width as f64)
        .round()
        .clamp(0.0, width as f64) as u16
}

impl MemoryBar<'_> {
    /// Bytes the whole width stands for: the largest bar, the capacity or the pinned total.
    fn scale(&self) -> u64 {
        self.bars
            .iter()
            .map(|b| b.iter().map(|c| c.bytes).sum::<u64>())
            .chain([
                self.capacity,
                self.pinned.unwrap_or(0),
                self.measured.map_or(0, |(_, m)| m),
            ])
            .max()
            .unwrap_or(0)
            .max(1)
    }

    fn render_bar(
        &self,
        components: &[Component],
        scale: u64,
        x0: u16,
        y: u16,
        width: u16,
        buf: &mut Buffer,
    ) {
        let cap_col = column(self.capacity, scale, width);
        let mut start = 0u64;
        for c in components {
            let from = column(start, scale, width);
            start += c.bytes;
            let to = column(start, scale, width);
            let fill = Theme::fill(c.part).to_string();
            for x in from..to {
                let style = if x >= cap_col {
                    self.theme.overflow()
                } else {
                    self.theme.segment(c.part)
                };
                buf[(x0 + x, y)].set_symbol(&fill).set_style(style);
            }
            // the size inside the segment when it fits with a cell to spare on each side
            let label = short_size(c.bytes);
            let cells = to - from;
            if cells as usize >= label.len() + 2 {
                let at = from + (cells - label.len() as u16) / 2;
                for (i, ch) in label.chars().enumerate() {
                    buf[(x0 + at + i as u16, y)].set_symbol(&ch.to_string());
                }
            }
        }
        let filled = column(start, scale, width);
        for x in filled..width {
            buf[(x0 + x, y)].set_symbol(" ");
        }
    }
}

impl Widget for &MemoryBar<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.width == 0 || area.height == 0 {
            return;
        }
        let scale = self.scale();
        let rows = (self.bars.len() as u16).min(area.height);
        for (i, bar) in self.bars.iter().take(rows as usize).enumerate() {
            self.render_bar(bar, scale, area.x, area.y + i as u16, area.width, buf);
        }
        if let Some((bar, bytes)) = self.measured.filter(|(bar, _)| *bar < rows as usize) {
            let x = area.x + column(bytes, scale, area.width).min(area.width - 1);
            buf[(x, area.y + bar as u16)]
                .set_symbol("◆")
                .set_style(self.theme.measured());
        }
        if area.height <= rows {
            return;
        }
        let y = area.y + rows;
        for x in 0..area.width {
            buf[(area.x + x, y)]
                .set_symbol("─")
                .set_style(self.theme.dim());
        }
        let at = |bytes: u64| area.x + column(bytes, scale, area.width).min(area.width - 1);
        if let Some(pinned) = self.pinned {
            buf[(at(pinned), y)]
                .set_symbol("◇")
                .set_style(Style::default());
        }
        buf[(at(self.capacity), y)]
            .set_symbol("┃")
            .set_style(Style::default());
        if let Some(used) = self.live_used {
            buf[(at(used), y)]
                .set_symbol("▲")
                .set_style(self.theme.warn());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpofit_core::memory::estimate::Part;

    fn parts() -> Vec<Component> {
        [
            (Part::CudaContext, 2),
            (Part::BaseWeights, 10),
            (Part::Activations, 20),
        ]
        .into_iter()
        .map(|(part, gib)| Component {
            part,
            name: part.label(),
            bytes: gib << 30,
            explanation: "",
        })
        .collect()
    }

    #[test]
    fn tiny_and_empty_areas_do_not_panic() {
        let components = parts();
        let bar = MemoryBar {
            bars: vec![&components, &components[1..]],
            capacity: 24 << 30,
            live_used: Some(30 << 30),
            pinned: Some(40 << 30),
            measured: Some((1, 50 << 30)),
            theme: Theme::mono(),
        };
        for (w, h) in [(0, 0), (1, 1), (1, 0), (0, 1), (2, 2), (300, 3)] {
            let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
            (&bar).render(Rect::new(0, 0, w, h), &mut buf);
            // an area larger than the buffer is clipped, not indexed out of bounds
            (&bar).render(Rect::new(0, 0, w + 5, h + 5), &mut buf);
            let slider = Slider {
                position: f64::NAN,
                style: Style::default(),
            };
            (&slider).render(Rect::new(0, 0, w, h), &mut buf);
        }
    }

    #[test]
    fn overflow_is_drawn_past_the_capacity_line() {
        let components = parts();
        let bar = MemoryBar {
            bars: vec![&components],
            capacity: 24 << 30,
            live_used: None,
            pinned: None,
            measured: None,
            theme: Theme::mono(),
        };
        let mut buf = Buffer::empty(Rect::new(0, 0, 32, 2));
        (&bar).render(buf.area, &mut buf);
        // 32 GiB over 32 cells: the capacity line sits at cell 24
        assert_eq!(buf[(24, 1)].symbol(), "┃");
        assert!(
            buf[(25, 0)]
                .modifier
                .contains(ratatui::style::Modifier::REVERSED)
        );
        assert!(
            !buf[(20, 0)]
                .modifier
                .contains(ratatui::style::Modifier::REVERSED)
        );
        assert_eq!(buf[(0, 0)].symbol(), "▒");
        assert_eq!(buf[(3, 0)].symbol(), "▓");
        // the 10 GiB segment (cells 2..12) carries its size
        assert_eq!(buf[(5, 0)].symbol(), "1");
        assert_eq!(buf[(7, 0)].symbol(), "G");
    }

    #[test]
    fn stacked_bars_share_one_scale_and_the_pin_is_on_it() {
        let components = parts();
        let bar = MemoryBar {
            // 32 GiB and 30 GiB against 24 GiB, a pin at 16 GiB: 32 GiB over 32 cells
            bars: vec![&components, &components[1..]],
            capacity: 24 << 30,
            live_used: None,
            pinned: Some(16 << 30),
            measured: None,
            theme: Theme::mono(),
        };
        let mut buf = Buffer::empty(Rect::new(0, 0, 32, 3));
        (&bar).render(buf.area, &mut buf);
        assert_eq!(buf[(0, 0)].symbol(), "▒");
        assert_eq!(buf[(0, 1)].symbol(), "▓");
        // the second bar ends 2 cells short of the first
        assert_eq!(buf[(31, 0)].symbol(), "▄");
        assert_eq!(buf[(30, 1)].symbol(), " ");
        assert_eq!(buf[(29, 1)].symbol(), "▄");
        assert_eq!(buf[(24, 2)].symbol(), "┃");
        assert_eq!(buf[(16, 2)].symbol(), "◇");
        // a pin past everything widens the scale so the marker stays on the bar
        let bar = MemoryBar {
            pinned: Some(64 << 30),
            ..bar
        };
        let mut buf = Buffer::empty(Rect::new(0, 0, 32, 3));
        (&bar).render(buf.area, &mut buf);
        assert_eq!(buf[(31, 2)].symbol(), "◇");
        assert_eq!(buf[(12, 2)].symbol(), "┃");
    }
}
