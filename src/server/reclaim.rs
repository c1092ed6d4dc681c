//! Freeing on a thread of its own what a lint leaves behind: the previous tree and the text
//! copy. After an edit that makes tree-sitter re-parse a large block, freeing the old tree's
//! nodes takes a millisecond or two, which would otherwise come between the edit and its
//! diagnostics. (rust-analyzer drops large structures off its main loop for the same reason.)

use std::thread;

use crossbeam_channel::{Sender, unbounded};

/// Something to free; trees share nodes through atomic reference counts, so the old tree can
/// be freed while the new one is in use.
type Garbage = Box<dyn Send>;

pub struct Reclaimer {
    sender: Option<Sender<Garbage>>,
}

impl Reclaimer {
    pub fn start() -> Self {
        let (sender, receiver) = unbounded::<Garbage>();
        let spawned = thread::Builder::new()
            .name("torchlint-reclaim".to_owned())
            .spawn(move || receiver.into_iter().for_each(drop));
        Reclaimer {
            // Without the thread, things are freed where they are, as before.
            sender: spawned.ok().map(|_| sender),
        }
    }

    /// Frees `garbage` on the reclaiming thread (or here, if there is none).
    pub fn free(&self, garbage: impl Send + 'static) {
        if let Some(sender) = &self.sender {
            // A send fails only when the thread is gone; the value then drops here.
            let _ = sender.send(Box::new(garbage));
        }
    }
}
