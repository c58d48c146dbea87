//! A Hugging Face Hub stand-in on 127.0.0.1, by hand on `std::net`: the model info
//! (`/api/models/{repo}/revision/main`), files (`/{repo}/resolve/{revision}/{file}`) answering
//! `Range: bytes=a-b` with 206 and `Content-Range` as the Hub's CDN does, and the Hub's
//! failures (`X-Error-Code`). A file may be longer than its bytes: the rest reads as zeros, so a
//! multi-gigabyte shard costs only its header. A repository can answer slowly, its bytes
//! trickled (`Repo::trickle`). Every request is recorded.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The commit every repository's `main` points at.
pub(crate) const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// One file: its first bytes, and its whole length (zeros past `bytes`).
#[derive(Clone)]
pub(crate) struct Served {
    pub bytes: Vec<u8>,
    pub len: u64,
}

impl Served {
    pub(crate) fn whole(bytes: Vec<u8>) -> Served {
        let len = bytes.len() as u64;
        Served { bytes, len }
    }
}

/// How a repository answers.
#[derive(Clone, Default)]
pub(crate) struct Repo {
    pub files: BTreeMap<String, Served>,
    /// every request about it answers 401 with `X-Error-Code: GatedRepo`, but the model info
    pub gated: bool,
    /// files answer 200 with the whole file, whatever the `Range` (as a server without range
    /// support does)
    pub ignore_range: bool,
    /// each file's answer is sent a byte at a time, spread over this long (a server that
    /// trickles: no read ever waits long, the whole answer does)
    pub trickle: Option<std::time::Duration>,
}

/// A request as received.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub path: String,
    pub range: Option<(u64, u64)>,
    pub authorization: Option<String>,
}

pub(crate) struct HubServer {
    pub endpoint: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl HubServer {
    /// Serves `repos` (by id) until the test process ends.
    pub(crate) fn start(repos: BTreeMap<String, Repo>) -> HubServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = answer(stream, &repos, &log);
            }
        });
        HubServer { endpoint, requests }
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer(
    mut stream: TcpStream,
    repos: &BTreeMap<String, Repo>,
    log: &Mutex<Vec<Request>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut range, mut authorization) = (None, None);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((&header, ""));
        let value = value.trim().to_string();
        match name.trim().to_ascii_lowercase().as_str() {
            "range" => range = parse_range(&value),
            "authorization" => authorization = Some(value),
            _ => {}
        }
    }
    log.lock().unwrap().push(Request {
        path: path.clone(),
        range,
        authorization,
    });
    let reply = route(&path, range, repos);
    let trickle = split_resolve(&path)
        .and_then(|(repo, _, _)| repos.get(&repo)?.trickle)
        .filter(|_| !reply.is_empty());
    let Some(trickle) = trickle else {
        stream.write_all(&reply)?;
        return stream.flush();
    };
    let pause = trickle / reply.len() as u32;
    for byte in reply {
        stream.write_all(&[byte])?;
        stream.flush()?;
        std::thread::sleep(pause);
    }
    Ok(())
}

fn parse_range(value: &str) -> Option<(u64, u64)> {
    let (a, b) = value.strip_prefix("bytes=")?.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn route(path: &str, range: Option<(u64, u64)>, repos: &BTreeMap<String, Repo>) -> Vec<u8> {
    if let Some(repo) = path
        .strip_prefix("/api/models/")
        .and_then(|p| p.strip_suffix("/revision/main"))
    {
        return match repos.get(repo) {
            Some(_) => reply(
                "200 OK",
                &[],
                format!(r#"{{"id": "{repo}", "sha": "{SHA}", "private": false}}"#).as_bytes(),
            ),
            None => not_found("RepoNotFound"),
        };
    }
    let Some((repo, revision, file)) = split_resolve(path) else {
        return not_found("");
    };
    let Some(r) = repos.get(&repo) else {
        return not_found("RepoNotFound");
    };
    if r.gated {
        return reply(
            "401 Unauthorized",
            &[("X-Error-Code", "GatedRepo".into())],
            b"{\"error\": \"Access to model is restricted\"}",
        );
    }
    if revision != SHA && revision != "main" {
        return not_found("RevisionNotFound");
    }
    match r.files.get(&file) {
        Some(served) => serve(served, range.filter(|_| !r.ignore_range)),
        None => not_found("EntryNotFound"),
    }
}

/// `/{org}/{name}/resolve/{revision}/{file}`
fn split_resolve(path: &str) -> Option<(String, String, String)> {
    let (repo, rest) = path.trim_start_matches('/').split_once("/resolve/")?;
    let (revision, file) = rest.split_once('/')?;
    Some((repo.to_string(), revision.to_string(), file.to_string()))
}

fn serve(f: &Served, range: Option<(u64, u64)>) -> Vec<u8> {
    let commit = ("X-Repo-Commit", SHA.to_string());
    let Some((from, to)) = range else {
        return reply("200 OK", &[commit], &bytes(f, 0, f.len));
    };
    if from >= f.len {
        return reply(
            "416 Range Not Satisfiable",
            &[("Content-Range", format!("bytes */{}", f.len))],
            b"",
        );
    }
    let end = to.saturating_add(1).min(f.len);
    reply(
        "206 Partial Content",
        &[
            commit,
            (
                "Content-Range",
                format!("bytes {from}-{}/{}", end - 1, f.len),
            ),
        ],
        &bytes(f, from, end),
    )
}

/// `[from, end)` of the file, zeros past its bytes.
fn bytes(f: &Served, from: u64, end: u64) -> Vec<u8> {
    (from..end)
        .map(|i| f.bytes.get(i as usize).copied().unwrap_or(0))
        .collect()
}

fn not_found(code: &str) -> Vec<u8> {
    let headers = if code.is_empty() {
        vec![]
    } else {
        vec![("X-Error-Code", code.to_string())]
    };
    reply("404 Not Found", &headers, b"{\"error\": \"not found\"}")
}

fn reply(status: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}
