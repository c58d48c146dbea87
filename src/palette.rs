//! Each part's colour and glyph, named once: the screen draws the colour as the ANSI colour of
//! that name and fills the segment with the glyph (`tui::theme`), the SVG picture draws the colour
//! as the RGB xterm's default palette gives it (`svg`), so the picture matches the screen in a
//! default terminal.

use grpofit_core::memory::estimate::Part;

/// One of the terminal's sixteen colours (those the screen uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hue {
    DarkGray,
    Red,
    Green,
    Yellow,
    Blue,
    Magenta,
    Cyan,
    Gray,
    LightRed,
    LightGreen,
    LightYellow,
    LightBlue,
    LightMagenta,
    LightCyan,
}

impl Hue {
    /// The colour as xterm's default palette draws it (`XTerm-col.ad`: color1-14).
    pub(crate) fn rgb(self) -> &'static str {
        match self {
            Hue::Red => "#cd0000",
            Hue::Green => "#00cd00",
            Hue::Yellow => "#cdcd00",
            Hue::Blue => "#0000ee",
            Hue::Magenta => "#cd00cd",
            Hue::Cyan => "#00cdcd",
            Hue::Gray => "#e5e5e5",
            Hue::DarkGray => "#7f7f7f",
            Hue::LightRed => "#ff0000",
            Hue::LightGreen => "#00ff00",
            Hue::LightYellow => "#ffff00",
            Hue::LightBlue => "#5c5cff",
            Hue::LightMagenta => "#ff00ff",
            Hue::LightCyan => "#00ffff",
        }
    }
}

/// How a part's segment looks on the bar: its colour, and the glyph that fills it on the screen
/// (which tells the parts apart without colour, `NO_COLOR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Look {
    pub(crate) hue: Hue,
    pub(crate) fill: char,
}

/// Each part's look, declared once: the screen draws its colour and its glyph (`tui::theme`),
/// the SVG picture its colour (`svg`).
pub(crate) fn look(part: Part) -> Look {
    let (hue, fill) = match part {
        Part::CudaContext => (Hue::DarkGray, '▒'),
        Part::OtherMemory => (Hue::DarkGray, '▩'),
        Part::SharedWeights => (Hue::Blue, '█'),
        Part::VllmWeights => (Hue::Blue, '▇'),
        Part::VllmCudaGraphs => (Hue::LightBlue, '▚'),
        Part::VllmActivations => (Hue::Cyan, '▞'),
        Part::VllmKvCache => (Hue::LightCyan, '░'),
        Part::GenerationKvCache => (Hue::LightYellow, '▒'),
        Part::BaseWeights | Part::Weights | Part::ExpertWeights => (Hue::Magenta, '▓'),
        Part::LoraAdapters | Part::ExpertLora | Part::SavedModules => (Hue::LightMagenta, '#'),
        Part::GatheredWeights => (Hue::LightMagenta, '▦'),
        Part::LoraGradients => (Hue::LightRed, '+'),
        // every weight's gradients: a glyph of their own, so they never read as the adapters'
        Part::Gradients => (Hue::LightRed, '*'),
        Part::OptimizerStates => (Hue::Yellow, '='),
        Part::Activations | Part::RewardForward => (Hue::Green, '▄'),
        Part::Logits
        | Part::MicroBatchLogits
        | Part::SequenceLogitsFp32
        | Part::MicroBatchLogitsFp32 => (Hue::LightGreen, '▀'),
        Part::AllocatorSlack => (Hue::Gray, '·'),
        Part::ReferenceModel => (Hue::Red, '▤'),
        Part::RewardModel => (Hue::Red, '▥'),
    };
    Look { hue, fill }
}

/// The colour of a part in the SVG picture: its hue's, except where two parts of one run share
/// a hue and the picture has no glyph to tell them apart: vLLM's weights (Unsloth's LoRA
/// buffers, TRL's copy) beside the model's weights are a darker blue (navy) there.
pub(crate) fn svg_rgb(part: Part) -> &'static str {
    match part {
        Part::VllmWeights => "#000080",
        other => hue(other).rgb(),
    }
}

/// The colour of a part's segment on the bar.
pub(crate) fn hue(part: Part) -> Hue {
    look(part).hue
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The screen tells gradients from the adapters' by glyph, and the picture the model's
    /// weights from vLLM's by colour.
    #[test]
    fn parts_of_one_run_look_apart() {
        assert_ne!(look(Part::Gradients).fill, look(Part::LoraGradients).fill);
        assert_ne!(svg_rgb(Part::SharedWeights), svg_rgb(Part::VllmWeights));
        assert_ne!(svg_rgb(Part::VllmWeights), svg_rgb(Part::VllmCudaGraphs));
    }
}
