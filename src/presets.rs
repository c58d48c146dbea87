//! The presets shipped inside the binary (one per VRAM tier), so `--preset 24gb` works anywhere.

pub const BUILT_IN: &[(&str, &str)] = &[
    ("16gb", include_str!("../presets/16gb.toml")),
    ("24gb", include_str!("../presets/24gb.toml")),
];

pub fn built_in(name: &str) -> Option<&'static str> {
    let wanted = name.to_ascii_lowercase();
    BUILT_IN
        .iter()
        .find(|(n, _)| *n == wanted)
        .map(|(_, text)| *text)
}

pub fn names() -> Vec<&'static str> {
    BUILT_IN.iter().map(|(n, _)| *n).collect()
}
