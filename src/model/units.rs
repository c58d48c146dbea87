//! Byte sizes as people write them: `24GiB`, `22.03 GiB`, `24576MiB`, `24GB`, `25769803776`.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// The largest size accepted anywhere: 64 TiB, far beyond any single GPU.
pub const ABSURD: u64 = 64 << 40;

pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    if number.is_empty() {
        return Err(format!(
            "\"{text}\" is not a size: write e.g. 24GiB, 24576MiB, 24GB or a byte count"
        ));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("\"{text}\" is not a size: \"{number}\" is not a number"))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => KIB as f64,
        "m" | "mib" => MIB as f64,
        "g" | "gib" => GIB as f64,
        "t" | "tib" => (1u64 << 40) as f64,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "\"{text}\": unknown unit \"{unit}\" (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ));
        }
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(format!(
            "\"{text}\" is not a usable size: it must be more than zero"
        ));
    }
    if bytes > ABSURD as f64 {
        return Err(format!("\"{text}\" is absurdly large (more than 64 TiB)"));
    }
    Ok(bytes.round() as u64)
}

/// A size written so that `parse_size` reads back exactly the same bytes: `24GiB`, `22560MiB`, `1000B`.
pub fn exact_size(bytes: u64) -> String {
    if bytes > 0 && bytes % GIB == 0 {
        format!("{}GiB", bytes / GIB)
    } else if bytes > 0 && bytes % MIB == 0 {
        format!("{}MiB", bytes / MIB)
    } else {
        format!("{bytes}B")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_every_spelling() {
        assert_eq!(parse_size("24GiB"), Ok(24 * GIB));
        assert_eq!(parse_size("24 GiB"), Ok(24 * GIB));
        assert_eq!(parse_size("24576MiB"), Ok(24 * GIB));
        assert_eq!(parse_size("24GB"), Ok(24_000_000_000));
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(
            parse_size("22.03GiB"),
            Ok((22.03 * GIB as f64).round() as u64)
        );
    }

    #[test]
    fn exact_sizes_read_back() {
        for b in [24 * GIB, 22_560 * MIB, 1000, 150_754_820_096] {
            assert_eq!(parse_size(&exact_size(b)), Ok(b));
        }
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
        ] {
            assert!(parse_size(bad).is_err(), "{bad} was accepted");
        }
    }
}
