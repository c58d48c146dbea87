//! What the last frame drew, as the keys and the mouse need it. The view returns it from
//! `view::draw`, and the loop hands it to `App::update` as `Msg::Drawn`: a click is read against
//! the cells the user saw, and the update never asks the view for geometry (bottom's widgets
//! record their corners the same way).

use ratatui::layout::Rect;
use std::rc::Rc;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drawn {
    /// the frame's width and height
    pub size: (u16, u16),
    /// below the smallest screen the view fits in: only quit and help answer
    pub too_small: bool,
    /// each knob row on screen: the knob's index and its cells (label, track, value)
    pub knob_rows: Vec<(usize, Rc<[Rect]>)>,
    /// lines of help on screen, and how far it scrolls (zero unless help is open)
    pub help_rows: usize,
    pub help_max_scroll: usize,
    /// rows of the open picker's list (PgUp/PgDn move this many)
    pub picker_rows: usize,
}
