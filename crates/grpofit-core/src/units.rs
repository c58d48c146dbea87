//! Byte sizes as people write them: `24GiB`, `22.03 GiB`, `24576MiB`, `24GB`, `25769803776B`.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// The largest size accepted anywhere: 64 TiB, far beyond any single GPU.
pub const ABSURD: u64 = 64 << 40;

/// The least memory a GPU can be given: 256 MiB, a third of the CUDA context alone
/// (`estimate::CUDA_CONTEXT`, 0.759 GiB measured on an H200), so no card that trains has less.
/// A smaller capacity is a unit slip (`24MB` for `24GB`, `1B`), refused with the reason.
pub const MIN_GPU_MEMORY: u64 = 256 * MIB;

/// Why a text is not a size (see `parse_size`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("a size cannot be negative")]
    Negative,
    #[error("not a size: write a number and its unit, e.g. 24GiB, 24576MiB, 24GB or 25769803776B")]
    NoNumber,
    #[error("\"{number}\" is not a number")]
    NotANumber { number: String },
    #[error("add a unit, e.g. {number}GiB (or {number}B for bytes)")]
    NoUnit { number: String },
    #[error("unknown unit \"{unit}\" (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")]
    UnknownUnit { unit: String },
    #[error("not a usable size: it must be more than zero")]
    NotPositive,
    #[error("absurdly large: more than 64 TiB, far beyond any GPU")]
    Absurd,
    /// a GPU's memory below `MIN_GPU_MEMORY`: a unit slip
    #[error(
        "{} is below {}, less than the CUDA context alone needs: check the unit (GiB, GB)",
        format_size(*.bytes),
        format_size(MIN_GPU_MEMORY)
    )]
    BelowGpuMinimum { bytes: u64 },
}

/// A GPU's memory: `parse_size`, at least `MIN_GPU_MEMORY`.
pub fn parse_gpu_size(text: &str) -> Result<u64, SizeError> {
    let bytes = parse_size(text)?;
    if bytes < MIN_GPU_MEMORY {
        return Err(SizeError::BelowGpuMinimum { bytes });
    }
    Ok(bytes)
}

/// Reads a size with its unit. A number alone is refused rather than taken as bytes: `24`
/// meant for 24 GiB would otherwise be 24 bytes. The error says what is wrong without repeating
/// the text, so that the caller can name where it came from: `--gpu-mem 24: add a unit, ...`.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(SizeError::Negative);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    if number.is_empty() {
        return Err(SizeError::NoNumber);
    }
    let value: f64 = number.parse().map_err(|_| SizeError::NotANumber {
        number: number.to_string(),
    })?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" => {
            return Err(SizeError::NoUnit {
                number: number.to_string(),
            });
        }
        "b" => 1.0,
        "k" | "kib" => KIB as f64,
        "m" | "mib" => MIB as f64,
        "g" | "gib" => GIB as f64,
        "t" | "tib" => (1u64 << 40) as f64,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(SizeError::UnknownUnit {
                unit: unit.to_string(),
            });
        }
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(SizeError::NotPositive);
    }
    if bytes > ABSURD as f64 {
        return Err(SizeError::Absurd);
    }
    Ok(bytes.round() as u64)
}

/// A size written so that `parse_size` reads back exactly the same bytes: `24GiB`, `22560MiB`,
/// `1000B`, and the short decimal a user wrote where it reads back the same (`--gpu-mem
/// 23.64GiB` is 25383256719 bytes, written `23.64GiB` rather than `25383256719B`).
pub fn exact_size(bytes: u64) -> String {
    if bytes > 0 && bytes.is_multiple_of(GIB) {
        return format!("{}GiB", bytes / GIB);
    }
    if bytes > 0 && bytes.is_multiple_of(MIB) {
        return format!("{}MiB", bytes / MIB);
    }
    for (unit, scale) in [("GiB", GIB), ("MiB", MIB)] {
        for decimals in 1..=3 {
            let text = format!("{:.decimals$}{unit}", bytes as f64 / scale as f64);
            if parse_size(&text) == Ok(bytes) {
                return text;
            }
        }
    }
    format!("{bytes}B")
}

/// `22.03 GiB`, `512.0 MiB`: two significant decimals, binary units.
pub fn format_size(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= GIB {
        format!("{:.2} GiB", b / GIB as f64)
    } else if bytes >= MIB {
        format!("{:.1} MiB", b / MIB as f64)
    } else if bytes >= KIB {
        format!("{:.1} KiB", b / KIB as f64)
    } else {
        format!("{bytes} B")
    }
}

/// A change in size, signed and short: `+1.2 GiB`, `-300 MiB`, `+4 KiB`, `±0`.
pub fn format_change(delta: i64) -> String {
    let sign = if delta < 0 { '-' } else { '+' };
    let b = delta.unsigned_abs();
    if b == 0 {
        "±0".to_string()
    } else if b >= 100 * GIB {
        format!("{sign}{:.0} GiB", b as f64 / GIB as f64)
    } else if b >= GIB {
        format!("{sign}{:.1} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{sign}{:.0} MiB", b as f64 / MIB as f64)
    } else if b >= KIB {
        format!("{sign}{:.0} KiB", b as f64 / KIB as f64)
    } else {
        format!("{sign}{b} B")
    }
}

/// A parameter count as model cards write it: `0.42B`, `4.30B`.
pub fn format_count(n: u64) -> String {
    format!("{:.2}B", n as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_signed_and_short() {
        assert_eq!(format_change((1.2 * GIB as f64) as i64), "+1.2 GiB");
        assert_eq!(format_change(-300 * MIB as i64), "-300 MiB");
        assert_eq!(
            format_change(-(12 * GIB as i64) - 300 * MIB as i64),
            "-12.3 GiB"
        );
        assert_eq!(format_change(4 * KIB as i64), "+4 KiB");
        assert_eq!(format_change(-5), "-5 B");
        assert_eq!(format_change(0), "±0");
        // no wider than the legend's column for any card's memory
        for d in [
            -(999 * MIB as i64),
            99 * GIB as i64 + 900 * MIB as i64,
            1023 * GIB as i64,
        ] {
            assert!(
                format_change(d).chars().count() <= 9,
                "{}",
                format_change(d)
            );
        }
    }

    #[test]
    fn a_number_without_a_unit_is_refused() {
        assert_eq!(
            parse_size("24").map_err(|e| e.to_string()),
            Err("add a unit, e.g. 24GiB (or 24B for bytes)".to_string())
        );
        assert!(parse_size("25769803776").is_err());
        assert_eq!(parse_size("24B"), Ok(24));
        assert_eq!(parse_size("24 b"), Ok(24));
    }

    #[test]
    fn sizes_in_every_spelling() {
        assert_eq!(parse_size("24GiB"), Ok(24 * GIB));
        assert_eq!(parse_size("24 GiB"), Ok(24 * GIB));
        assert_eq!(parse_size("24576MiB"), Ok(24 * GIB));
        assert_eq!(parse_size("24GB"), Ok(24_000_000_000));
        assert_eq!(parse_size("1024B"), Ok(1024));
        assert_eq!(
            parse_size("22.03GiB"),
            Ok((22.03 * GIB as f64).round() as u64)
        );
    }

    #[test]
    fn exact_sizes_read_back() {
        for b in [
            24 * GIB,
            22_560 * MIB,
            1000,
            150_754_820_096,
            25_377_898_496,
            1,
        ] {
            assert_eq!(parse_size(&exact_size(b)), Ok(b));
        }
    }

    /// A size a user gave as a short decimal is written back in those words, not in bytes.
    #[test]
    fn a_decimal_size_is_written_as_given() {
        for text in ["23.64GiB", "22.03GiB", "79.19GiB", "7.78GiB", "1.5MiB"] {
            assert_eq!(exact_size(parse_size(text).unwrap()), text);
        }
        assert_eq!(exact_size(24 * GIB), "24GiB");
        assert_eq!(exact_size(1000), "1000B");
    }

    #[test]
    fn nonsense_is_rejected() {
        for bad in [
            "",
            "GiB",
            "-4GiB",
            "0",
            "0GiB",
            "NaN",
            "inf",
            "1e3",
            "24 parsecs",
            "100000TiB",
            "1.2.3G",
            "65TiB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn a_refused_size_carries_what_was_wrong() {
        assert_eq!(
            parse_size("24"),
            Err(SizeError::NoUnit {
                number: "24".into()
            })
        );
        assert_eq!(
            parse_size("24 parsecs"),
            Err(SizeError::UnknownUnit {
                unit: "parsecs".into()
            })
        );
        let slip = parse_gpu_size("24MB").unwrap_err();
        assert_eq!(slip, SizeError::BelowGpuMinimum { bytes: 24_000_000 });
        assert_eq!(
            slip.to_string(),
            "22.9 MiB is below 256.0 MiB, less than the CUDA context alone needs: check the unit (GiB, GB)"
        );
    }
}
