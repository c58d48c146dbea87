use ratatui::layout::Rect;
use ratatui::text::Span;

/// Display width of `text` in cells.
pub(super) fn width_of(text: &str) -> usize {
    Span::raw(text).width()
}

/// `text` in at most `width` cells: whole words, then `…` when something was left out. Only a
/// single word longer than the whole width is cut inside.
pub(super) fn ellipsize(text: &str, width: usize) -> String {
    if width_of(text) <= width {
        return text.to_string();
    }
    // the leading spaces are the text's margin: kept
    let body = text.trim_start_matches(' ');
    let lead = &text[..text.len() - body.len()];
    if width <= lead.len() {
        return " ".repeat(width);
    }
    format!("{lead}{}", ellipsize_words(body, width - lead.len()))
}

pub(super) fn ellipsize_words(text: &str, width: usize) -> String {
    let mut out = String::new();
    for word in text.split(' ') {
        let candidate = if out.is_empty() {
            word.to_string()
        } else {
            format!("{out} {word}")
        };
        if width_of(&candidate) + 1 > width {
            break;
        }
        out = candidate;
    }
    let out = out
        .trim_end_matches([' ', ',', ';', ':', '·', '(', '-'])
        .to_string();
    if out.is_empty() {
        // one word wider than the line: its start
        let mut cut = String::new();
        for c in text.chars() {
            if width_of(&cut) + width_of(&c.to_string()) + 1 > width {
                break;
            }
            cut.push(c);
        }
        return format!("{cut}…");
    }
    format!("{out}…")
}

/// `text` broken at spaces into lines of at most `width` cells, the lines after the first
/// indented by `indent` spaces; a word wider than a line is cut.
pub(super) fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(indent + 8);
    let body = text.trim_start_matches(' ');
    let mut lines = Vec::new();
    // the first line keeps the text's leading spaces
    let mut line = text[..text.len() - body.len()].to_string();
    for word in body.split(' ') {
        let candidate = if line.trim().is_empty() {
            format!("{line}{word}")
        } else {
            format!("{line} {word}")
        };
        if width_of(&candidate) <= width || line.trim().is_empty() {
            line = candidate;
        } else {
            lines.push(std::mem::replace(
                &mut line,
                format!("{}{word}", " ".repeat(indent)),
            ));
        }
    }
    lines.push(line);
    lines
        .into_iter()
        .flat_map(|l| {
            // a single overlong word: hard breaks
            let chars: Vec<char> = l.chars().collect();
            if width_of(&l) <= width {
                return vec![l];
            }
            chars.chunks(width).map(|c| c.iter().collect()).collect()
        })
        .collect()
}

pub(super) fn popup(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}
