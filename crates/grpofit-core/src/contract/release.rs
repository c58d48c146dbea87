//! A package's release number, as pinned in the contract and named in a run file.

use serde::Serialize;

/// A release number: `0.15.2`, `2025.5.2`, `4.51.3` (suffixes such as `.post1` or `.dev0` and a
/// leading `v` are dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Release {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Release {
        Release {
            major,
            minor,
            patch,
        }
    }

    /// `"0.15.2"`, `"1.15"`, `"v0.21.0"`, `"0.8.5.post1"`, `"0.15.0.dev0"`, `"2.6.0+cu124"`.
    pub fn parse(text: &str) -> Option<Release> {
        let t = text.trim().trim_start_matches('v');
        let t = t.split(['+', ' ']).next()?;
        let mut parts = t.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        // the third part may carry a suffix (`5rc1`): its leading digits, else 0
        let patch = parts
            .next()
            .map(|p| {
                let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().unwrap_or(0)
            })
            .unwrap_or(0);
        Some(Release::new(major, minor, patch))
    }

    /// The release line: major and minor.
    pub fn line(self) -> (u32, u32) {
        (self.major, self.minor)
    }
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Serialize for Release {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
