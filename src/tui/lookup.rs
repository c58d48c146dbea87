//! A model name the catalog lacks, looked up off the UI thread: the Hugging Face cache, then the
//! Hub when allowed (`hub::resolve_with`). The screen polls it each frame; dropping it cancels
//! the lookup (the thread's answer then goes nowhere, and the thread ends by the Hub client's
//! timeouts at the latest). What the Hub client says while fetching (its `say`, standard error on
//! the command line) comes back here instead: nothing writes under the screen.

use crate::hub::{self, Resolved, online::Access};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

/// What a lookup answers: the model, `None` when nothing knows it, or why it failed.
pub type Answer = Result<Option<Resolved>, String>;

pub struct Lookup {
    pub name: String,
    pub started: Instant,
    answer: mpsc::Receiver<Answer>,
    notices: mpsc::Receiver<String>,
}

impl Lookup {
    /// Starts looking `name` up in `cache`, then on the Hub as `access` allows.
    pub fn start(name: String, cache: Option<PathBuf>, access: Access) -> Lookup {
        let (tx, rx) = mpsc::channel();
        let (said, notices) = mpsc::channel();
        let said = Mutex::new(said);
        let access = match access {
            Access::Online(mut hub) => {
                hub.say = Arc::new(move |line: &str| {
                    if let Ok(said) = said.lock() {
                        _ = said.send(line.to_string());
                    }
                });
                Access::Online(hub)
            }
            offline => offline,
        };
        let asked = name.clone();
        std::thread::spawn(move || {
            let answer = hub::resolve_with(&asked, None, cache.as_deref(), &access)
                .map_err(|e| e.to_string());
            let _ = tx.send(answer);
        });
        Lookup {
            name,
            started: Instant::now(),
            answer: rx,
            notices,
        }
    }

    /// What the Hub client said since the last call (`grpofit: fetching config.json of …`).
    pub fn notices(&self) -> Vec<String> {
        self.notices.try_iter().collect()
    }

    /// The answer, once there is one.
    pub fn poll(&self) -> Option<Answer> {
        match self.answer.try_recv() {
            Ok(answer) => Some(answer),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => {
                Some(Err(format!("the lookup of {} stopped", self.name)))
            }
        }
    }
}
