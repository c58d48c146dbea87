//! One table of key bindings: it dispatches keys, and it renders the footer and the help screen.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key asks for in the main screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    NextKnob,
    PrevKnob,
    Up,
    Down,
    UpCoarse,
    DownCoarse,
    TypeValue,
    Undo,
    ToggleLock,
    ToggleStack,
    CycleCheckpointing,
    ToggleFourBit,
    ToggleBeta,
    CycleOptimizer,
    CycleEngine,
    CycleZeroStage,
    PickModel,
    PickPreset,
    Export,
    Fit,
    Fastest,
    TogglePin,
    Help,
    Quit,
}

pub struct Binding {
    /// the keys as the footer and help show them
    pub keys: &'static str,
    pub matches: fn(&KeyEvent) -> bool,
    pub action: Action,
    pub help: &'static str,
    /// (keys, word) the one-line footer shows, for the bindings it lists
    pub footer: Option<(&'static str, &'static str)>,
}

fn plain(k: &KeyEvent, codes: &[KeyCode]) -> bool {
    !k.modifiers
        .intersects(KeyModifiers::SHIFT | KeyModifiers::CONTROL | KeyModifiers::ALT)
        && codes.contains(&k.code)
}

fn shifted(k: &KeyEvent, code: KeyCode) -> bool {
    k.modifiers.contains(KeyModifiers::SHIFT) && k.code == code
}

pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: "Tab/↓/j",
        matches: |k| plain(k, &[KeyCode::Tab, KeyCode::Down, KeyCode::Char('j')]),
        action: Action::NextKnob,
        help: "next knob",
        footer: Some(("Tab", "knob")),
    },
    Binding {
        keys: "S-Tab/↑/k",
        matches: |k| k.code == KeyCode::BackTab || plain(k, &[KeyCode::Up, KeyCode::Char('k')]),
        action: Action::PrevKnob,
        help: "previous knob",
        footer: None,
    },
    Binding {
        keys: "→/l",
        matches: |k| plain(k, &[KeyCode::Right, KeyCode::Char('l')]),
        action: Action::Up,
        help: "one step up",
        footer: Some(("←→", "step")),
    },
    Binding {
        keys: "←/h",
        matches: |k| plain(k, &[KeyCode::Left, KeyCode::Char('h')]),
        action: Action::Down,
        help: "one step down",
        footer: None,
    },
    Binding {
        keys: "S-→/L",
        matches: |k| shifted(k, KeyCode::Right) || k.code == KeyCode::Char('L'),
        action: Action::UpCoarse,
        help: "three steps up",
        footer: None,
    },
    Binding {
        keys: "S-←/H",
        matches: |k| shifted(k, KeyCode::Left) || k.code == KeyCode::Char('H'),
        action: Action::DownCoarse,
        help: "three steps down",
        footer: None,
    },
    Binding {
        keys: "Enter",
        matches: |k| plain(k, &[KeyCode::Enter, KeyCode::Char('e')]),
        action: Action::TypeValue,
        help: "type an exact value",
        footer: None,
    },
    Binding {
        keys: "u",
        matches: |k| plain(k, &[KeyCode::Char('u')]),
        action: Action::Undo,
        help: "undo",
        footer: Some(("u", "undo")),
    },
    Binding {
        keys: "b",
        matches: |k| plain(k, &[KeyCode::Char('b')]),
        action: Action::ToggleLock,
        help: "lock / unlock the effective batch",
        footer: None,
    },
    Binding {
        keys: "t",
        matches: |k| plain(k, &[KeyCode::Char('t')]),
        action: Action::ToggleStack,
        help: "stack: unsloth / trl",
        footer: None,
    },
    Binding {
        keys: "c",
        matches: |k| plain(k, &[KeyCode::Char('c')]),
        action: Action::CycleCheckpointing,
        help: "gradient checkpointing: off / on / unsloth",
        footer: None,
    },
    Binding {
        keys: "4",
        matches: |k| plain(k, &[KeyCode::Char('4')]),
        action: Action::ToggleFourBit,
        help: "4-bit base weights on / off",
        footer: None,
    },
    Binding {
        keys: "r",
        matches: |k| plain(k, &[KeyCode::Char('r')]),
        action: Action::ToggleBeta,
        help: "reference model (beta 0 / 0.04)",
        footer: None,
    },
    Binding {
        keys: "o",
        matches: |k| plain(k, &[KeyCode::Char('o')]),
        action: Action::CycleOptimizer,
        help: "optimizer",
        footer: None,
    },
    Binding {
        keys: "d",
        matches: |k| plain(k, &[KeyCode::Char('d')]),
        action: Action::CycleEngine,
        help: "distributed engine: ddp / deepspeed / fsdp (shows the GPUs knob)",
        footer: Some(("d", "engine")),
    },
    Binding {
        keys: "z",
        matches: |k| plain(k, &[KeyCode::Char('z')]),
        action: Action::CycleZeroStage,
        help: "ZeRO stage: deepspeed 0 / 1 / 2 / 3, fsdp no shard / shard grad+optim / full shard",
        footer: Some(("z", "ZeRO")),
    },
    Binding {
        keys: "m",
        matches: |k| plain(k, &[KeyCode::Char('m')]),
        action: Action::PickModel,
        help: "pick a model",
        footer: Some(("m", "model")),
    },
    Binding {
        keys: "p",
        matches: |k| plain(k, &[KeyCode::Char('p')]),
        action: Action::PickPreset,
        help: "load a preset",
        footer: Some(("p", "preset")),
    },
    Binding {
        keys: "s",
        matches: |k| plain(k, &[KeyCode::Char('s')]),
        action: Action::Export,
        help: "export the trainer's TOML",
        footer: Some(("s", "export")),
    },
    Binding {
        keys: "f",
        matches: |k| plain(k, &[KeyCode::Char('f')]),
        action: Action::Fit,
        help: "fit: the nearest configuration that fits (5% headroom) on the GPUs shown",
        footer: Some(("f", "fit")),
    },
    Binding {
        keys: "F",
        matches: |k| k.code == KeyCode::Char('F'),
        action: Action::Fastest,
        help: "fastest: of the runs that fit (5% headroom) on the GPUs shown, the one with the least seconds a step, moving only throughput knobs (as `fit --fastest`)",
        footer: Some(("F", "fastest")),
    },
    Binding {
        keys: "x",
        matches: |k| plain(k, &[KeyCode::Char('x')]),
        action: Action::TogglePin,
        help: "pin this run as a baseline: the bar marks its total ◇, the legend each component's change since; x again unpins (undo keeps the pin)",
        footer: None,
    },
    Binding {
        keys: "?",
        matches: |k| k.code == KeyCode::Char('?'),
        action: Action::Help,
        help: "help",
        footer: Some(("?", "help")),
    },
    Binding {
        keys: "q",
        matches: |k| plain(k, &[KeyCode::Char('q')]),
        action: Action::Quit,
        help: "quit (asks to export changes first)",
        footer: Some(("q", "quit")),
    },
];

pub fn action_for(key: &KeyEvent) -> Option<Action> {
    BINDINGS.iter().find(|b| (b.matches)(key)).map(|b| b.action)
}

pub fn is_interrupt(key: &KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c')
}
