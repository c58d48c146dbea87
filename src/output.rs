//! Standard output and error, and the exit codes: every write checked, a closed pipe ended
//! quietly with the command's answer.

use std::io::{self, Write};

/// The exit codes, as docs/json.md documents them: 0 fits, 3 does not fit, 2 bad input, 1 no GPU.
pub(crate) const FITS: u8 = 0;
pub(crate) const BAD_INPUT: u8 = 2;
pub(crate) const DOES_NOT_FIT: u8 = 3;
pub(crate) const NO_GPU: u8 = 1;
/// Standard output could not be written: the code of bad input, the one that says the command
/// did not do its job (1 and 3 are answers: no GPU, does not fit).
pub(crate) const FAILED: u8 = 2;

/// Why a command stopped before its answer.
pub(crate) enum Failure {
    /// bad input, or a file that cannot be read or written: the message
    Input(String),
    /// writing standard output failed; `answer` is the exit code the command had reached
    Output { error: io::Error, answer: u8 },
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Input(message)
    }
}

/// The core's typed errors reach the user as their message: bad input, or a file that cannot
/// be read or written.
impl From<grpofit_core::files::FileError> for Failure {
    fn from(e: grpofit_core::files::FileError) -> Failure {
        Failure::Input(e.to_string())
    }
}

impl From<grpofit_core::config::write_back::WriteBackError> for Failure {
    fn from(e: grpofit_core::config::write_back::WriteBackError) -> Failure {
        Failure::Input(e.to_string())
    }
}

impl From<grpofit_core::config::export_set::ExportSetError> for Failure {
    fn from(e: grpofit_core::config::export_set::ExportSetError) -> Failure {
        Failure::Input(e.to_string())
    }
}

impl From<grpofit_core::files_set::SetError> for Failure {
    fn from(e: grpofit_core::files_set::SetError) -> Failure {
        Failure::Input(e.to_string())
    }
}

impl From<grpofit_core::config::launch_set::LaunchSetError> for Failure {
    fn from(e: grpofit_core::config::launch_set::LaunchSetError) -> Failure {
        Failure::Input(e.to_string())
    }
}

impl From<grpofit_core::measure::measured::LogError> for Failure {
    fn from(e: grpofit_core::measure::measured::LogError) -> Failure {
        Failure::Input(e.to_string())
    }
}

/// Turns an error writing standard output into a `Failure` that keeps the command's answer.
pub(crate) fn unwritten(answer: u8) -> impl FnOnce(io::Error) -> Failure {
    move |error| Failure::Output { error, answer }
}

/// Writes to standard output what `f` writes, its control characters escaped
/// (`grpofit::untrusted`), and flushes: every write error comes back as an `io::Error` instead
/// of the panic of `print!`.
pub(crate) fn emit(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> io::Result<()> {
    let mut text = Vec::new();
    f(&mut text)?;
    let text = String::from_utf8_lossy(&text);
    let mut out = io::stdout().lock();
    out.write_all(grpofit::untrusted::escape_controls(&text).as_bytes())?;
    out.flush()
}

/// A line for the user on standard error, its control characters escaped and an overlong line
/// cut (`grpofit::untrusted`). If even that cannot be written there is nobody left to tell, so
/// its error is dropped rather than turned into a panic.
pub(crate) fn say(line: &str) {
    let line = grpofit::untrusted::for_terminal(line);
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// `value` as pretty JSON and a newline, for standard output.
pub(crate) fn json_text(value: &impl serde::Serialize) -> Result<String, String> {
    serde_json::to_string_pretty(value)
        .map(|text| text + "\n")
        .map_err(|e| e.to_string())
}
