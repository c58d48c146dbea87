//! Whether grpofit may look a model up on the Hugging Face Hub, and with what: the endpoint,
//! the token, and where to say that it is fetching. The command line decides (`from_env`, from
//! its `--offline` flag) and hands the answer to whatever resolves models: no global holds it,
//! so a library user or a test that builds no `Access` never reaches the Hub.
//!
//! The variables are huggingface_hub's (`constants.py`): `HF_HUB_OFFLINE` (true for 1, ON, YES,
//! TRUE), `HF_ENDPOINT` (default https://huggingface.co), `HF_TOKEN`, else the file
//! `HF_TOKEN_PATH`, else `$HF_HOME/token` (`~/.cache/huggingface/token`).

use super::remote::{Remote, Token};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

/// The Hub's address when `HF_ENDPOINT` is unset.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Says what is being fetched (standard error on the command line; the screen shows it its own
/// way).
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// The Hub, and where to say what is fetched from it.
#[derive(Clone)]
pub struct Hub {
    pub remote: Arc<Remote>,
    pub say: Say,
}

/// Whether the Hub may be asked.
#[derive(Clone)]
pub enum Access {
    Online(Hub),
    /// why not, in words (`HF_HUB_OFFLINE=1`, `--offline`)
    Offline(String),
}

/// The access the environment and `--offline` give, saying what is fetched with `say`.
pub fn from_env(offline_flag: bool, say: Say) -> Access {
    from_vars(offline_flag, say, |k| {
        std::env::var_os(k).filter(|v| !v.is_empty())
    })
}

fn from_vars(offline_flag: bool, say: Say, var: impl Fn(&str) -> Option<OsString>) -> Access {
    if offline_flag {
        return Access::Offline("--offline".into());
    }
    if let Some(v) = var("HF_HUB_OFFLINE")
        && is_true(&v)
    {
        return Access::Offline(format!("HF_HUB_OFFLINE={}", v.to_string_lossy()));
    }
    let endpoint = var("HF_ENDPOINT")
        .map(|e| e.to_string_lossy().trim_end_matches('/').to_string())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
    Access::Online(Hub {
        remote: Arc::new(Remote::new(endpoint, token(&var))),
        say,
    })
}

/// huggingface_hub's `_is_true`: 1, ON, YES, TRUE, in any case.
fn is_true(v: &OsString) -> bool {
    let v = v.to_string_lossy().trim().to_ascii_uppercase();
    matches!(v.as_str(), "1" | "ON" | "YES" | "TRUE")
}

/// The most bytes read from the token file: a Hugging Face token is 37 characters (`hf_` and
/// 34 more); 4 KiB refuses a file that never ends (`/dev/zero` linked in).
const MAX_TOKEN_BYTES: u64 = 4096;

/// `HF_TOKEN`, else the token file `huggingface-cli login` wrote: a regular file only
/// (`bounded`: a FIFO there is passed over, not waited on).
fn token(var: &impl Fn(&str) -> Option<OsString>) -> Option<Token> {
    if let Some(t) = var("HF_TOKEN") {
        let value = t.to_string_lossy().trim().to_string();
        return (!value.is_empty()).then(|| Token::new(value, "HF_TOKEN".into()));
    }
    let path = var("HF_TOKEN_PATH").map(PathBuf::from).or_else(|| {
        let home = var("HF_HOME").map(PathBuf::from).or_else(|| {
            var("HOME")
                .or_else(|| var("USERPROFILE"))
                .map(|h| PathBuf::from(h).join(".cache/huggingface"))
        })?;
        Some(home.join("token"))
    })?;
    let bytes = grpofit_core::bounded::read_capped(&path, MAX_TOKEN_BYTES).ok()?;
    let value = String::from_utf8_lossy(&bytes).trim().to_string();
    (!value.is_empty()).then(|| Token::new(value, path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<OsString> {
        move |k| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn quiet() -> Say {
        Arc::new(|_| {})
    }

    #[test]
    fn offline_by_flag_or_variable() {
        let offline = |flag, pairs| match from_vars(flag, quiet(), vars(pairs)) {
            Access::Offline(why) => Some(why),
            Access::Online(_) => None,
        };
        assert_eq!(offline(true, vec![]), Some("--offline".into()));
        assert_eq!(
            offline(false, vec![("HF_HUB_OFFLINE", "yes".into())]),
            Some("HF_HUB_OFFLINE=yes".into())
        );
        assert_eq!(offline(false, vec![("HF_HUB_OFFLINE", "0".into())]), None);
        assert_eq!(offline(false, vec![]), None);
    }

    #[test]
    fn the_endpoint_and_the_token_follow_huggingface_hub() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_file\n").unwrap();
        let home = dir.path().display().to_string();
        let online = |pairs| match from_vars(false, quiet(), vars(pairs)) {
            Access::Online(hub) => hub.remote,
            Access::Offline(why) => panic!("{why}"),
        };
        let r = online(vec![("HF_HOME", home.clone())]);
        assert_eq!(r.endpoint(), DEFAULT_ENDPOINT);
        assert_eq!(
            r.token_source(),
            Some(dir.path().join("token").display().to_string().as_str())
        );
        let r = online(vec![
            ("HF_HOME", home),
            ("HF_TOKEN", "hf_env".into()),
            ("HF_ENDPOINT", "http://127.0.0.1:9/".into()),
        ]);
        assert_eq!(r.endpoint(), "http://127.0.0.1:9");
        assert_eq!(r.token_source(), Some("HF_TOKEN"));
        let r = online(vec![("HOME", "/nonexistent".into())]);
        assert_eq!(r.token_source(), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_dev_zero_as_the_token_file_is_passed_over_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("token");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) reads a NUL-terminated path that lives across the call
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        for path in [fifo, zero] {
            let at = path.display().to_string();
            let Access::Online(hub) = from_vars(false, quiet(), vars(vec![("HF_TOKEN_PATH", at)]))
            else {
                panic!("offline")
            };
            assert_eq!(hub.remote.token_source(), None);
        }
    }
}
