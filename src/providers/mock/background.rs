//! Background mode of the mock's Responses API: a POST with `background: true` stores the
//! scripted answer and answers `queued`; `GET /responses/{id}` answers `in_progress` until
//! the configured number of polls, then the stored answer; `POST /responses/{id}/cancel`
//! cancels a response that is not done. Shapes as in OpenAI's background-mode guide.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};

struct Stored {
    answer: Value,
    polls: u32,
    cancelled: bool,
}

/// Background responses by id.
#[derive(Default)]
pub(super) struct Jobs(Mutex<BTreeMap<String, Stored>>);

/// The response object while the run is not done, with `status`.
fn pending(id: &str, answer: &Value, status: &str) -> Value {
    json!({"id": id, "object": "response", "created_at": 0, "status": status, "background": true, "error": null,
        "incomplete_details": null, "model": answer.get("model").cloned().unwrap_or(Value::Null), "output": [], "usage": null})
}

impl Jobs {
    /// Stores `answer` as the outcome of the call with global index `index`; returns the
    /// `queued` response object the POST answers with.
    pub(super) fn queue(&self, index: u64, mut answer: Value) -> Value {
        let id = format!("resp_bg_{index}");
        if let Value::Object(map) = &mut answer {
            map.insert("id".into(), json!(id));
            map.insert("background".into(), json!(true));
        }
        let queued = pending(&id, &answer, "queued");
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(id, Stored { answer, polls: 0, cancelled: false });
        queued
    }

    /// What a poll sees: `in_progress` before the `polls_to_finish`-th poll, then the
    /// answer (or `cancelled`); `None` for an unknown id.
    pub(super) fn poll(&self, id: &str, polls_to_finish: u32) -> Option<Value> {
        let mut jobs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let job = jobs.get_mut(id)?;
        job.polls += 1;
        Some(if job.cancelled {
            pending(id, &job.answer, "cancelled")
        } else if job.polls < polls_to_finish {
            pending(id, &job.answer, "in_progress")
        } else {
            job.answer.clone()
        })
    }

    /// Cancels a response; `None` for an unknown id.
    pub(super) fn cancel(&self, id: &str) -> Option<Value> {
        let mut jobs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let job = jobs.get_mut(id)?;
        job.cancelled = true;
        Some(pending(id, &job.answer, "cancelled"))
    }
}

/// `(id, cancel)` for `{prefix}/responses/{id}` and `{prefix}/responses/{id}/cancel`.
pub(super) fn stored_route(path: &str, prefix: &str) -> Option<(String, bool)> {
    let rest = path.strip_prefix(prefix.trim_end_matches('/'))?.strip_prefix("/responses/")?;
    let (id, cancel) = match rest.strip_suffix("/cancel") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    (!id.is_empty() && !id.contains('/')).then(|| (id.to_owned(), cancel))
}
