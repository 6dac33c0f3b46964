//! A batch lane's bookkeeping, no I/O: the calls waiting for a batch to be submitted, who
//! waits for which key, the answers fetched before anyone asked, the keys a live batch
//! covers, and the keys that already went back to the queue once.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use tokio::sync::oneshot;

/// What a batch gives one call: the HTTP status and body of its response line, or why it
/// got none (never an answer, never cached).
pub(crate) type LineAnswer = Result<(u16, Vec<u8>), String>;

/// The lane's state, behind its mutex.
#[derive(Default)]
pub(super) struct LaneState {
    /// Calls to submit with the next batch: key (hex) and exact body.
    pub queue: Vec<(String, Value)>,
    /// Who waits for which key, and the body it asked with (to send it again once).
    pub waiters: HashMap<String, (Vec<oneshot::Sender<LineAnswer>>, Value)>,
    /// Answers read from an output file that no call of this run asked for yet.
    pub stash: HashMap<String, LineAnswer>,
    /// Keys a batch in flight (or being submitted) covers: never submitted again.
    pub covered: HashSet<String>,
    /// Keys an ended batch did not answer: their next batch is their one retry.
    pub struck: HashSet<String>,
    /// Bumped by each queued call, so the idle-window flush knows nothing new came.
    pub generation: u64,
    /// Per batch tag, its keys whose answers are not yet settled in the cache.
    pub unsettled: HashMap<String, HashSet<String>>,
    /// Why no new batch may be submitted for this lane (a damaged ledger record may hold its
    /// calls): a call no batch covers fails with it instead of queueing.
    pub blocked: Option<String>,
}

/// What a new call must do.
pub(super) enum Joined {
    /// Its answer was fetched already.
    Ready(LineAnswer),
    /// It waits: for a batch that covers it, or (queued) for one to be submitted.
    Wait { receiver: oneshot::Receiver<LineAnswer>, queued: bool },
}

impl LaneState {
    /// A call for `key` with `body` joins the lane.
    pub(super) fn join(&mut self, key: &str, body: &Value) -> Joined {
        if let Some(answer) = self.stash.remove(key) {
            return Joined::Ready(answer);
        }
        if let Some(message) = &self.blocked
            && !self.covered.contains(key)
        {
            return Joined::Ready(Err(message.clone()));
        }
        let (sender, receiver) = oneshot::channel();
        self.waiters.entry(key.to_owned()).or_insert_with(|| (Vec::new(), body.clone())).0.push(sender);
        let queued = self.covered.insert(key.to_owned());
        if queued {
            self.queue.push((key.to_owned(), body.clone()));
            self.generation += 1;
        }
        Joined::Wait { receiver, queued }
    }

    /// Takes up to `max` queued calls for a batch.
    pub(super) fn take(&mut self, max: usize) -> Vec<(String, Value)> {
        let n = self.queue.len().min(max);
        self.queue.drain(..n).collect()
    }

    /// Hands `answer` to the calls waiting for `key`, or keeps it for one that asks later;
    /// the key is no longer covered.
    pub(super) fn deliver(&mut self, key: &str, answer: LineAnswer) {
        self.covered.remove(key);
        match self.waiters.remove(key) {
            Some((senders, _)) => {
                for sender in senders {
                    // A waiter that went away (its run stopped) needs nothing.
                    let _gone = sender.send(answer.clone());
                }
            }
            None => {
                self.stash.insert(key.to_owned(), answer);
            }
        }
    }

    /// `key`'s answer is stored (or was never to be): returns the tags whose every key is
    /// settled now.
    pub(super) fn settle(&mut self, key: &str) -> Vec<String> {
        let mut done = Vec::new();
        for (tag, keys) in &mut self.unsettled {
            if keys.remove(key) && keys.is_empty() {
                done.push(tag.clone());
            }
        }
        for tag in &done {
            self.unsettled.remove(tag);
        }
        done
    }

    /// A key no batch covers after all (an interrupted intent that was never created) is
    /// queued like a new call: `true` when a waiter's call went into the queue.
    pub(super) fn release(&mut self, key: &str) -> bool {
        self.covered.remove(key);
        let Some((_, body)) = self.waiters.get(key) else { return false };
        self.queue.push((key.to_owned(), body.clone()));
        self.covered.insert(key.to_owned());
        self.generation += 1;
        true
    }

    /// An unanswered key goes back to the queue once: `true` when it did (a waiter with its
    /// body is here) or will (struck for a later call); `false` when it had its retry.
    pub(super) fn requeue(&mut self, key: &str, had_retry: bool) -> bool {
        if had_retry {
            return false;
        }
        self.covered.remove(key);
        self.struck.insert(key.to_owned());
        if let Some((_, body)) = self.waiters.get(key) {
            self.queue.push((key.to_owned(), body.clone()));
            self.covered.insert(key.to_owned());
            self.generation += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_is_queued_once_answered_from_the_stash_and_requeued_only_once() {
        let mut state = LaneState::default();
        let Joined::Wait { mut receiver, queued: true } = state.join("k1", &json!(1)) else { panic!("first call queues") };
        let Joined::Wait { queued: false, .. } = state.join("k1", &json!(1)) else { panic!("the same key waits without queueing") };
        assert_eq!(state.take(10), vec![("k1".to_owned(), json!(1))]);
        assert!(state.requeue("k1", false), "first end without an answer: back to the queue");
        assert_eq!(state.take(10).len(), 1);
        assert!(!state.requeue("k1", true), "the second: no more retries");
        state.deliver("k1", Ok((200, b"{}".to_vec())));
        assert_eq!(receiver.try_recv().unwrap(), Ok((200, b"{}".to_vec())));
        state.deliver("k2", Err("expired".into()));
        let Joined::Ready(Err(message)) = state.join("k2", &json!(2)) else { panic!("a stashed answer is served") };
        assert_eq!(message, "expired");
        state.unsettled.insert("t".into(), ["k1".to_owned(), "k2".to_owned()].into());
        assert!(state.settle("k1").is_empty());
        assert_eq!(state.settle("k2"), vec!["t".to_owned()]);
        state.covered.insert("k3".into());
        state.blocked = Some("damaged".into());
        let Joined::Ready(Err(message)) = state.join("k4", &json!(4)) else { panic!("a blocked lane queues nothing") };
        assert_eq!((message.as_str(), state.queue.len()), ("damaged", 0));
        let Joined::Wait { queued: false, .. } = state.join("k3", &json!(3)) else { panic!("a covered call still waits for its batch") };
    }
}
