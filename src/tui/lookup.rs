//! A model name the catalog lacks, looked up off the UI thread: the Hugging Face cache, then the
//! Hub when allowed (`hub::resolve_with`). The screen polls it each frame; dropping it cancels
//! the lookup (the thread's answer then goes nowhere, and the thread ends by the Hub client's
//! timeouts at the latest).

use crate::hub::{self, Resolved, online::Access};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

/// What a lookup answers: the model, `None` when nothing knows it, or why it failed.
pub type Answer = Result<Option<Resolved>, String>;

pub struct Lookup {
    pub name: String,
    pub started: Instant,
    answer: mpsc::Receiver<Answer>,
}

impl Lookup {
    /// Starts looking `name` up in `cache`, then on the Hub as `access` allows.
    pub fn start(name: String, cache: Option<PathBuf>, access: Access) -> Lookup {
        let (tx, rx) = mpsc::channel();
        let asked = name.clone();
        std::thread::spawn(move || {
            let answer = hub::resolve_with(&asked, None, cache.as_deref(), &access);
            let _ = tx.send(answer);
        });
        Lookup {
            name,
            started: Instant::now(),
            answer: rx,
        }
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
