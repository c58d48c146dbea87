//! The Hugging Face Hub over HTTP, as huggingface_hub asks it: the model info
//! (`GET {endpoint}/api/models/{repo}/revision/{revision}`, whose `sha` is the commit), a file
//! (`GET {endpoint}/{repo}/resolve/{revision}/{file}`), and the first bytes of a safetensors
//! file by HTTP range requests (`Range: bytes=0-7`, then the header's bytes), never the weights.
//!
//! Failures are told apart as huggingface_hub's `hf_raise_for_status` does (`utils/_http.py`):
//! the `X-Error-Code` header (`RepoNotFound`, `GatedRepo`, `EntryNotFound`,
//! `RevisionNotFound`), else the status. Connect and read timeouts are a few seconds, so a
//! command never hangs on a dead network.

use grpofit_core::resolve::safetensors::{self, MAX_HEADER_BYTES, Problem};
use std::io::Read;
use std::time::{Duration, Instant};

/// Time to open a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for each read, and for the answer's headers.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time for one request whole, however slowly its bytes trickle in.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest model info, config.json or index read.
pub const MAX_JSON_BYTES: u64 = 16 << 20;

/// A token and where it came from (`HF_TOKEN`, or the token file's path), never printed.
#[derive(Clone)]
pub struct Token {
    value: String,
    from: String,
}

impl Token {
    pub fn new(value: String, from: String) -> Token {
        Token { value, from }
    }
}

/// The Hub at one endpoint, with the user's token if any.
pub struct Remote {
    endpoint: String,
    token: Option<Token>,
    agent: ureq::Agent,
    /// when every request is cut, however far it got ([`Remote::until`])
    deadline: Option<Instant>,
}

/// A request that did not give what was asked, naming the model, the file and the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubError {
    pub repo: String,
    /// `config.json`, `model-00001-of-00002.safetensors`, `model info`
    pub file: String,
    pub url: String,
    pub failure: Failure,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// the repository does not exist (or is private and the token does not reach it)
    NoSuchModel { status: u16 },
    /// the repository has no such file
    NoSuchFile { status: u16 },
    /// gated or private: `token` is where the rejected token came from, `None` when there was none
    Refused {
        status: u16,
        token: Option<String>,
        license: String,
    },
    /// any other status
    Status(u16),
    /// no answer: the connection, a timeout, TLS
    Network { endpoint: String, error: String },
    /// an answer that is not what the Hub sends
    BadBody(String),
    /// a safetensors header that cannot be read
    Header(Problem),
}

impl std::fmt::Display for HubError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let HubError {
            repo, file, url, ..
        } = self;
        match &self.failure {
            Failure::NoSuchModel { status } => write!(
                f,
                "no such model on the Hub: {url} answered {status} for {repo}'s {file}{}",
                if *status == 401 {
                    " (a private model needs HF_TOKEN)"
                } else {
                    ""
                }
            ),
            Failure::NoSuchFile { status } => {
                write!(
                    f,
                    "{repo} on the Hub has no {file}: {url} answered {status}"
                )
            }
            Failure::Refused {
                status,
                token,
                license,
            } => {
                let token = match token {
                    None => "HF_TOKEN is unset (nor is there a token file)".to_string(),
                    Some(from) => format!("the token from {from} was rejected"),
                };
                write!(
                    f,
                    "{repo} is gated or private: {url} answered {status} for {file}, and {token}; accept the license at {license} and set HF_TOKEN to a token of that account"
                )
            }
            Failure::Status(status) => write!(f, "{url} answered {status} for {repo}'s {file}"),
            Failure::Network { endpoint, error } => write!(
                f,
                "cannot reach the Hub at {endpoint} for {repo}'s {file} ({error}); HF_HUB_OFFLINE=1 or --offline stays offline, HF_ENDPOINT picks a mirror"
            ),
            Failure::BadBody(what) => write!(f, "{repo}'s {file} from the Hub ({url}): {what}"),
            Failure::Header(problem) => {
                write!(f, "{repo}'s {file} from the Hub ({url}): {problem}")
            }
        }
    }
}

impl std::error::Error for HubError {}

/// What one request is about, for its errors.
struct Ask<'a> {
    repo: &'a str,
    file: &'a str,
    url: String,
}

impl Ask<'_> {
    fn fail(&self, failure: Failure) -> Box<HubError> {
        Box::new(HubError {
            repo: self.repo.to_string(),
            file: self.file.to_string(),
            url: self.url.clone(),
            failure,
        })
    }
}

type Response = ureq::http::Response<ureq::Body>;

impl Remote {
    pub fn new(endpoint: String, token: Option<Token>) -> Remote {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_recv_response(Some(READ_TIMEOUT))
            .timeout_per_read(Some(READ_TIMEOUT))
            .timeout_per_call(Some(CALL_TIMEOUT))
            // a renamed repository redirects on the Hub itself; a file redirects to its CDN,
            // whose signed URL needs no token (and must not get it)
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost)
            .user_agent(format!("grpofit/{}", env!("CARGO_PKG_VERSION")))
            .build();
        Remote {
            endpoint,
            token,
            agent: ureq::Agent::new_with_config(config),
            deadline: None,
        }
    }

    /// The same Hub, each request of which is cut at `deadline` (a timeout) however slowly
    /// its bytes come: one model's fetch is bounded whole, not only request by request.
    pub fn until(&self, deadline: Instant) -> Remote {
        Remote {
            endpoint: self.endpoint.clone(),
            token: self.token.clone(),
            agent: self.agent.clone(),
            deadline: Some(deadline),
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Where the token came from, if there is one.
    pub fn token_source(&self) -> Option<&str> {
        self.token.as_ref().map(|t| t.from.as_str())
    }

    /// The repository's id as the Hub spells it and the commit `main` points at.
    pub fn model_info(&self, repo: &str) -> Result<(String, String), Box<HubError>> {
        let ask = Ask {
            repo,
            file: "model info",
            url: format!("{}/api/models/{repo}/revision/main", self.endpoint),
        };
        let body = self.json(&ask, true)?;
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| ask.fail(Failure::BadBody(format!("not JSON: {e}"))))?;
        let sha = value.get("sha").and_then(|s| s.as_str()).unwrap_or("");
        if !is_commit(sha) {
            return Err(ask.fail(Failure::BadBody(format!(
                "its sha {sha:?} is not a commit id"
            ))));
        }
        let id = value
            .get("id")
            .and_then(|s| s.as_str())
            .filter(|id| id.eq_ignore_ascii_case(repo))
            .unwrap_or(repo);
        Ok((id.to_string(), sha.to_string()))
    }

    /// A small file of the repository at `revision`; `None` when the repository has no such
    /// file.
    pub fn file(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
    ) -> Result<Option<Vec<u8>>, Box<HubError>> {
        let ask = self.resolve(repo, revision, file);
        match self.json(&ask, false) {
            Ok(body) => Ok(Some(body)),
            Err(e) if matches!(e.failure, Failure::NoSuchFile { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The first bytes of a safetensors file: its 8-byte length and its JSON header, checked
    /// as `safetensors::read_header` checks a local file, and against the file's length when
    /// the answer gives it. `None` when the repository has no such file.
    pub fn safetensors_header(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
    ) -> Result<Option<Vec<u8>>, Box<HubError>> {
        let ask = self.resolve(repo, revision, file);
        let first = match self.get(&ask, Some((0, 7)), false) {
            Ok(r) => r,
            Err(e) if matches!(e.failure, Failure::NoSuchFile { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        // a server that ignores ranges answers 200 with the whole file: its first bytes are
        // read from that one answer, and the rest is never read
        let whole = first.status() == 200;
        let total = total_length(&first);
        let mut body = first.into_body().into_reader();
        let mut bytes = self.read_at_most(&mut body, 8, &ask)?;
        let Ok(prefix) = <[u8; 8]>::try_from(bytes.as_slice()) else {
            return Err(ask.fail(Failure::Header(Problem::NoLength {
                got: bytes.len() as u64,
            })));
        };
        let len = header_length(u64::from_le_bytes(prefix), total)
            .map_err(|p| ask.fail(Failure::Header(p)))?;
        if len > 0 && whole {
            bytes.extend(self.read_at_most(&mut body, len, &ask)?);
        } else if len > 0 {
            drop(body);
            let rest = self.get(&ask, Some((8, 8 + len - 1)), false)?;
            let skip = if rest.status() == 200 { 8 } else { 0 };
            let mut body = rest.into_body().into_reader();
            self.read_at_most(&mut body, skip, &ask)?;
            bytes.extend(self.read_at_most(&mut body, len, &ask)?);
        }
        super::bounds::check_tensors(bytes.get(8..).unwrap_or_default())
            .map_err(|what| ask.fail(Failure::BadBody(what)))?;
        let header = safetensors::read_header(bytes.as_slice())
            .map_err(|e| ask.fail(Failure::Header(e.problem)))?;
        if let Some(total) = total {
            header
                .check_file_len(total)
                .map_err(|e| ask.fail(Failure::Header(e.problem)))?;
        }
        Ok(Some(bytes))
    }

    /// Reads up to `n` bytes, fewer when the answer ends first.
    fn read_at_most(
        &self,
        body: &mut impl Read,
        n: u64,
        ask: &Ask,
    ) -> Result<Vec<u8>, Box<HubError>> {
        let mut out = Vec::new();
        body.take(n).read_to_end(&mut out).map_err(|e| {
            ask.fail(Failure::Network {
                endpoint: self.endpoint.clone(),
                error: e.to_string(),
            })
        })?;
        Ok(out)
    }

    /// The request for `file` of `repo` at `revision` (huggingface_hub's `resolve` URL).
    fn resolve<'a>(&self, repo: &'a str, revision: &str, file: &'a str) -> Ask<'a> {
        Ask {
            repo,
            file,
            url: format!(
                "{}/{repo}/resolve/{}/{}",
                self.endpoint,
                super::url_path::quote(revision, false),
                super::url_path::quote(file, true)
            ),
        }
    }

    /// A JSON answer's bytes, at most `MAX_JSON_BYTES`.
    fn json(&self, ask: &Ask, info: bool) -> Result<Vec<u8>, Box<HubError>> {
        let response = self.get(ask, None, info)?;
        let mut body = response.into_body().into_reader();
        let bytes = self.read_at_most(&mut body, MAX_JSON_BYTES + 1, ask)?;
        if bytes.len() as u64 > MAX_JSON_BYTES {
            return Err(ask.fail(Failure::BadBody(format!(
                "over the {} MiB grpofit reads",
                MAX_JSON_BYTES >> 20
            ))));
        }
        Ok(bytes)
    }

    /// Sends a GET (a range of bytes, inclusive, when given); an answer other than 200 or 206
    /// is an error. `info`: the request is the model info, whose 404 means no such model.
    fn get(
        &self,
        ask: &Ask,
        range: Option<(u64, u64)>,
        info: bool,
    ) -> Result<Response, Box<HubError>> {
        let mut request = self.agent.get(&ask.url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {}", token.value));
        }
        if let Some((from, to)) = range {
            request = request.header("Range", format!("bytes={from}-{to}"));
        }
        if let Some(deadline) = self.deadline {
            // the body's reading included; a zero timeout would be none
            let left = deadline.saturating_duration_since(Instant::now());
            request = request
                .config()
                .timeout_global(Some(left.max(Duration::from_millis(1))))
                .build();
        }
        let response = request.call().map_err(|e| {
            ask.fail(Failure::Network {
                endpoint: self.endpoint.clone(),
                error: e.to_string(),
            })
        })?;
        let status = response.status().as_u16();
        if status == 200 || status == 206 {
            return Ok(response);
        }
        let code = response
            .headers()
            .get("x-error-code")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let refused = || Failure::Refused {
            status,
            token: self.token_source().map(str::to_string),
            license: format!("{}/{}", self.endpoint, ask.repo),
        };
        Err(ask.fail(match (code, status) {
            ("RepoNotFound", _) => Failure::NoSuchModel { status },
            ("GatedRepo", _) | (_, 401 | 403) => refused(),
            ("EntryNotFound" | "RevisionNotFound", _) => Failure::NoSuchFile { status },
            (_, 404) if info => Failure::NoSuchModel { status },
            (_, 404) => Failure::NoSuchFile { status },
            _ => Failure::Status(status),
        }))
    }
}

/// The header length a file's first 8 bytes give, checked as `safetensors::read_header` does
/// before it reads on.
fn header_length(len: u64, total: Option<u64>) -> Result<u64, Problem> {
    if len >= 1 << 63 {
        return Err(Problem::LengthTooLarge { len });
    }
    if let Some(file_len) = total
        && len > file_len.saturating_sub(8)
    {
        return Err(Problem::HeaderPastFile { len, file_len });
    }
    if len > MAX_HEADER_BYTES {
        return Err(Problem::HeaderTooLarge { len });
    }
    Ok(len)
}

/// The whole file's length: `Content-Range: bytes 0-7/<total>` of a 206, the
/// `Content-Length` of a 200.
fn total_length(r: &Response) -> Option<u64> {
    let header = |name: &str| r.headers().get(name).and_then(|v| v.to_str().ok());
    if r.status() == 206 {
        header("content-range")?
            .rsplit('/')
            .next()?
            .trim()
            .parse()
            .ok()
    } else {
        header("content-length")?.trim().parse().ok()
    }
}

/// A commit id as the Hub gives it (40 hex digits), kept to what is safe as a folder name.
fn is_commit(sha: &str) -> bool {
    (1..=64).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lengths_are_checked_before_anything_is_read() {
        assert_eq!(
            header_length(1 << 63, None),
            Err(Problem::LengthTooLarge { len: 1 << 63 })
        );
        assert_eq!(
            header_length(100, Some(50)),
            Err(Problem::HeaderPastFile {
                len: 100,
                file_len: 50
            })
        );
        assert_eq!(
            header_length(MAX_HEADER_BYTES + 1, None),
            Err(Problem::HeaderTooLarge {
                len: MAX_HEADER_BYTES + 1
            })
        );
        assert_eq!(header_length(42, Some(50)), Ok(42));
    }

    #[test]
    fn commit_ids_are_safe_folder_names() {
        assert!(is_commit("cdbee75f17c01a7cc42f958dc650907174af0554"));
        for bad in ["", "..", "a/b", "main\n", &"a".repeat(65)] {
            assert!(!is_commit(bad), "{bad:?}");
        }
    }
}
