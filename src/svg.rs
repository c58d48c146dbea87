//! The stacked memory bar as an SVG picture (`estimate`, `fit`, `check` and `diagnose --svg`,
//! and the Python package's notebook view): per role, one bar per phase, against the capacity, with
//! the headroom or the shortfall. It uses the interactive screen's colours (`tui::theme`), and
//! every segment is also named with its size in a table below the bars, so it reads without
//! colour too. No terminal code: only strings.

use grpofit_core::memory::estimate::{Component, Estimate, Part, PhaseMemory};
use grpofit_core::memory::roles::Role;
use grpofit_core::units::format_size;
use std::fmt::Write;

/// The RGB colour of a component's segment: its part's hue (`palette`), as the screen shows it.
pub fn colour(part: Part) -> &'static str {
    crate::palette::svg_rgb(part)
}

// the colours the picture uses beside the parts'
const DARK_GRAY: &str = "#7f7f7f"; // Hue::DarkGray
const RED: &str = "#cd0000"; // Hue::Red (the screen's overflow)

/// Whether black text reads on `rgb` (else white): its luma (ITU-R BT.601 weights) above half.
fn dark_text_on(rgb: &str) -> bool {
    let channel =
        |i: usize| u32::from_str_radix(rgb.get(i..i + 2).unwrap_or("00"), 16).unwrap_or(0);
    299 * channel(1) + 587 * channel(3) + 114 * channel(5) > 128 * 1000
}

/// What a picture shows besides the estimate: a heading, and a measured peak on the training
/// role's bars (`check`).
#[derive(Debug, Clone, Default)]
pub struct Picture<'a> {
    /// the first line: the model and the stack
    pub title: &'a str,
    /// the second: the GPU, as the report's `GPU:` line names it
    pub gpu: &'a str,
    /// a measured peak, in bytes, and what it is (`measured: device in use`)
    pub measured: Option<(u64, &'a str)>,
    /// the step's time, as `estimate` prints it, and its seconds
    pub step: Option<(&'a str, f64)>,
}

const WIDTH: u32 = 760;
const MARGIN: u32 = 12;
const LABEL: u32 = 150;
const BAR_X: u32 = MARGIN + LABEL;
const BAR_W: u32 = WIDTH - BAR_X - MARGIN;
const BAR_H: u32 = 26;
const LINE: u32 = 17;

/// The SVG document of `est`.
pub fn render(est: &Estimate, picture: &Picture) -> String {
    let mut body = String::new();
    let bold = r#" font-weight="bold""#;
    let mut y = text_lines(&mut body, picture.title, bold, MARGIN - 3);
    y = text_lines(&mut body, &format!("GPU: {}", picture.gpu), "", y);
    y = text_lines(
        &mut body,
        &run_verdict(est),
        if est.fits { "" } else { bold },
        y,
    );
    if let Some((line, seconds)) = picture.step {
        y = text_lines(
            &mut body,
            line,
            &format!(r#" data-seconds="{seconds:.3}""#),
            y,
        );
    }
    y += 10;
    for (i, role) in est.roles.iter().enumerate() {
        let measured = picture.measured.filter(|_| i == 0);
        y = role_section(&mut body, role, est.roles.len() > 1, measured, y + 8);
    }
    let height = y + MARGIN;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12" role="img">"#
    );
    let _ = writeln!(
        svg,
        r#"<title>{}</title>"#,
        escape(&format!(
            "{} on {}: {}",
            picture.title,
            picture.gpu,
            run_verdict(est)
        ))
    );
    let _ = writeln!(
        svg,
        r#"<defs><pattern id="over" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="{RED}"/><line x1="0" y1="0" x2="0" y2="6" stroke="white" stroke-width="2"/></pattern></defs>"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{WIDTH}" height="{height}" fill="white"/>"#
    );
    svg.push_str(&body);
    svg.push_str("</svg>\n");
    svg
}

/// Characters a line of text holds across the picture (12-pixel sans-serif, bold: at most
/// about 7 pixels a character).
const LINE_CHARS: usize = ((WIDTH - 2 * MARGIN) / 7) as usize;

/// `text` at the left margin below `y`, broken between words into lines that fit the width;
/// returns the y of its last line.
fn text_lines(out: &mut String, text: &str, attributes: &str, mut y: u32) -> u32 {
    let mut line = String::new();
    let mut flush = |line: &str, y: &mut u32| {
        *y += LINE;
        let _ = writeln!(
            out,
            r#"<text x="{MARGIN}" y="{y}"{attributes}>{}</text>"#,
            escape(line)
        );
    };
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > LINE_CHARS {
            flush(&line, &mut y);
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    flush(&line, &mut y);
    y
}

/// `fits: 21.30 GiB of 24.00 GiB, headroom 2.70 GiB (11.3%)`, `DOES NOT FIT: ... short by`,
/// or, when vLLM cannot start on the role's GPUs, why (as the report's table says it).
fn verdict(role: &Role) -> String {
    let margin = role.headroom_bytes.unsigned_abs();
    let pct = 100.0 * margin as f64 / role.capacity_bytes.max(1) as f64;
    let of = format!(
        "{} of {}",
        format_size(role.total_bytes),
        format_size(role.capacity_bytes)
    );
    let refusal = role.vllm.as_ref().and_then(|v| v.refusal.as_ref());
    match (role.fits, refusal) {
        (true, _) => format!("fits: {of}, headroom {} ({pct:.1}%)", format_size(margin)),
        (false, Some(reason)) => format!("DOES NOT FIT ({of}): {reason}"),
        (false, None) => format!(
            "DOES NOT FIT: {of}, short by {} ({pct:.1}%)",
            format_size(margin)
        ),
    }
}

/// The whole run's verdict: its only role's, or, with several, whether every one fits.
fn run_verdict(est: &Estimate) -> String {
    match est.roles.as_slice() {
        [role] => verdict(role),
        roles if est.fits => format!("fits: every role ({} of them)", roles.len()),
        roles => {
            let short: Vec<&str> = roles
                .iter()
                .filter(|r| !r.fits)
                .map(|r| r.role.label())
                .collect();
            format!("DOES NOT FIT: {}", short.join(", "))
        }
    }
}

/// The bars a role draws: each phase's, else its peak's.
fn bars(role: &Role) -> Vec<(String, &[Component], u64)> {
    if role.phases.is_empty() {
        return vec![("peak".to_string(), &role.components[..], role.total_bytes)];
    }
    role.phases
        .iter()
        .map(|p: &PhaseMemory| {
            (
                p.phase.label().to_string(),
                &p.components[..],
                p.total_bytes,
            )
        })
        .collect()
}

/// One role: its heading (when there are several), its bars on one scale, the capacity line,
/// the headroom, then the table of its components. Returns the y below it.
fn role_section(
    out: &mut String,
    role: &Role,
    heading: bool,
    measured: Option<(u64, &str)>,
    mut y: u32,
) -> u32 {
    if heading {
        let text = format!(
            "{} ({} GPU{}), each GPU: {}",
            role.role.label(),
            role.gpus,
            if role.gpus == 1 { "" } else { "s" },
            verdict(role)
        );
        y = text_lines(out, &text, r#" font-weight="bold""#, y) + 6;
    }
    let rows = bars(role);
    let scale = rows
        .iter()
        .map(|(_, _, total)| *total)
        .chain([role.capacity_bytes, measured.map_or(0, |m| m.0)])
        .max()
        .unwrap_or(1)
        .max(1);
    let x_of = |bytes: u64| BAR_X as f64 + BAR_W as f64 * bytes as f64 / scale as f64;
    let cap_x = x_of(role.capacity_bytes);
    let top = y + 6;
    for (label, components, total) in &rows {
        y += 6;
        bar_row(
            out,
            (label, components, *total),
            y,
            (role.capacity_bytes, cap_x),
            &x_of,
        );
        y += BAR_H;
    }
    // the capacity line across the bars, and what it stands for
    let _ = writeln!(
        out,
        r#"<line x1="{cap_x:.1}" y1="{}" x2="{cap_x:.1}" y2="{}" stroke="black" stroke-width="2"/>"#,
        top - 4,
        y + 4
    );
    y += LINE;
    let anchor = if cap_x > (WIDTH - 150) as f64 {
        "end"
    } else {
        "middle"
    };
    let _ = writeln!(
        out,
        r#"<text x="{cap_x:.1}" y="{y}" text-anchor="{anchor}" data-bytes="{}">capacity {}</text>"#,
        role.capacity_bytes,
        format_size(role.capacity_bytes)
    );
    if let Some((bytes, what)) = measured {
        let x = x_of(bytes);
        let _ = writeln!(
            out,
            r#"<path d="M {x:.1} {} l 6 8 l -6 8 l -6 -8 z" fill="black" stroke="white"/>"#,
            top - 2
        );
        y += LINE;
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="{anchor}" data-bytes="{bytes}">◆ {}: {}</text>"#,
            escape(what),
            format_size(bytes)
        );
    }
    components_table(out, &rows, y + 8)
}

/// One bar: its label and total on the left, a segment per component, the part past the
/// capacity hatched, the headroom outlined.
fn bar_row(
    out: &mut String,
    (label, components, total): (&str, &[Component], u64),
    y: u32,
    (capacity, cap_x): (u64, f64),
    x_of: &dyn Fn(u64) -> f64,
) {
    let mid = y + BAR_H / 2 + 4;
    let _ = writeln!(
        out,
        r#"<text x="{MARGIN}" y="{mid}">{}</text><text x="{}" y="{mid}" text-anchor="end" data-bytes="{total}">{}</text>"#,
        escape(label),
        BAR_X - 6,
        format_size(total)
    );
    let mut start = 0u64;
    for c in components {
        let (x0, x1) = (x_of(start), x_of(start + c.bytes));
        start += c.bytes;
        let fill = colour(c.part);
        let _ = writeln!(
            out,
            r#"<rect x="{x0:.1}" y="{y}" width="{:.1}" height="{BAR_H}" fill="{fill}" stroke="white" stroke-width="0.5" data-part="{}" data-bytes="{}"><title>{}</title></rect>"#,
            x1 - x0,
            part_name(c.part),
            c.bytes,
            escape(&format!(
                "{}: {} ({})",
                c.name,
                format_size(c.bytes),
                c.explanation
            ))
        );
        let text = short_size(c.bytes);
        if x1 - x0 >= 7.0 * text.len() as f64 + 6.0 {
            let ink = if dark_text_on(fill) { "black" } else { "white" };
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{mid}" text-anchor="middle" fill="{ink}" font-size="11">{text}</text>"#,
                (x0 + x1) / 2.0
            );
        }
    }
    let end = x_of(total);
    if end > cap_x + 0.5 {
        let _ = writeln!(
            out,
            r#"<rect x="{cap_x:.1}" y="{y}" width="{:.1}" height="{BAR_H}" fill="url(#over)" fill-opacity="0.8"><title>past the capacity</title></rect>"#,
            end - cap_x
        );
    } else if cap_x > end + 0.5 {
        let _ = writeln!(
            out,
            r#"<rect x="{end:.1}" y="{}" width="{:.1}" height="{}" fill="none" stroke="{DARK_GRAY}" stroke-dasharray="3 3"><title>headroom</title></rect>"#,
            y + 1,
            cap_x - end,
            BAR_H - 2
        );
        let text = format!("{} free", format_size(capacity.saturating_sub(total)));
        if cap_x - end >= 7.0 * text.len() as f64 {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{mid}" text-anchor="middle" fill="{DARK_GRAY}" data-bytes="{}">{text}</text>"#,
                (end + cap_x) / 2.0,
                capacity.saturating_sub(total)
            );
        }
    }
}

/// The components by name with each bar's size: the picture's numbers without colour.
fn components_table(out: &mut String, rows: &[(String, &[Component], u64)], mut y: u32) -> u32 {
    let mut parts: Vec<(Part, &str)> = Vec::new();
    for (_, components, _) in rows {
        for c in components.iter() {
            if !parts.iter().any(|(p, _)| *p == c.part) {
                parts.push((c.part, c.name));
            }
        }
    }
    let column = |i: usize| BAR_X + 110 * (i as u32 + 1);
    y += LINE;
    for (i, (label, _, _)) in rows.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{y}" text-anchor="end" font-weight="bold">{}</text>"#,
            column(i),
            escape(label)
        );
    }
    for (part, name) in &parts {
        y += LINE;
        let _ = writeln!(
            out,
            r#"<rect x="{MARGIN}" y="{}" width="12" height="12" fill="{}" stroke="black" stroke-width="0.5"/><text x="{}" y="{y}">{}</text>"#,
            y - 10,
            colour(*part),
            MARGIN + 18,
            escape(name)
        );
        for (i, (_, components, _)) in rows.iter().enumerate() {
            let Some(c) = components.iter().find(|c| c.part == *part) else {
                continue;
            };
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{y}" text-anchor="end" data-bytes="{}">{}</text>"#,
                column(i),
                c.bytes,
                format_size(c.bytes)
            );
        }
    }
    y += LINE;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{y}" font-weight="bold">total</text>"#,
        MARGIN + 18
    );
    for (i, (_, _, total)) in rows.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{y}" text-anchor="end" font-weight="bold" data-bytes="{total}">{}</text>"#,
            column(i),
            format_size(*total)
        );
    }
    y
}

/// The part's name as `--json` writes it (`lora_adapters`).
fn part_name(part: Part) -> String {
    serde_json::to_value(part)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `5.9G`, `412M`: a size short enough to sit inside a segment, on the screen's bar and here.
pub fn short_size(bytes: u64) -> String {
    let g = bytes as f64 / (1u64 << 30) as f64;
    if g >= 10.0 {
        format!("{g:.0}G")
    } else if g >= 1.0 {
        format!("{g:.1}G")
    } else {
        format!("{:.0}M", bytes as f64 / (1u64 << 20) as f64)
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::palette::Hue;

    #[test]
    fn text_is_escaped_and_ink_follows_the_fill() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
        assert!(dark_text_on(Hue::LightYellow.rgb()));
        assert!(!dark_text_on(Hue::Blue.rgb()));
        assert_eq!((DARK_GRAY, RED), (Hue::DarkGray.rgb(), Hue::Red.rgb()));
    }
}
