//! What evalgrid reads of a batch, whatever its protocol: its id, state, counts, tag, time
//! and where its answers are; and what a look-up of an interrupted intent found.

use super::lines::OutputLine;

/// Where an ended batch's answers are read.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Results {
    /// Nothing to read (yet).
    #[default]
    None,
    /// OpenAI: the output and error files.
    Files(Option<String>, Option<String>),
    /// Anthropic: the `results_url` JSONL.
    Url(String),
    /// Gemini: the inline responses, already in the batch object.
    Inline(Vec<OutputLine>),
}

/// What a poll says of a batch, whatever the protocol.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchObject {
    /// The provider's batch id (`batch_…`, `msgbatch_…`, `batches/…`).
    pub id: String,
    /// The provider's own state word (`in_progress`, `ended`, `BATCH_STATE_RUNNING`…).
    pub status: String,
    /// Requests: total, answered, failed.
    pub counts: (u64, u64, u64),
    /// The tag evalgrid gave it (`metadata.evalgrid`, Gemini's display name); Anthropic
    /// batches carry none.
    pub tag: Option<String>,
    /// When the provider created it (Unix seconds), where it says.
    pub created_at: Option<u64>,
    /// Where its answers are read once it ended.
    pub results: Results,
}

impl BatchObject {
    /// Whether the batch ended: nothing more will be answered.
    #[must_use]
    pub fn ended(&self) -> bool {
        state_ended(&self.status)
    }
}

/// Whether a recorded state word is one of an ended batch, for any protocol.
#[must_use]
pub fn state_ended(state: &str) -> bool {
    matches!(
        state,
        "completed"
            | "failed"
            | "expired"
            | "cancelled"
            | "ended"
            | "BATCH_STATE_SUCCEEDED"
            | "BATCH_STATE_FAILED"
            | "BATCH_STATE_CANCELLED"
            | "BATCH_STATE_EXPIRED"
    )
}

/// What a look-up of an interrupted intent found.
#[derive(Debug)]
pub enum Found {
    /// Nothing: the batch was never created.
    None,
    /// The batch.
    One(BatchObject),
    /// Several batches could be it (Anthropic's marker is not unique): which one holds the
    /// intent's keys shows once their results can be read.
    Many(Vec<BatchObject>),
}

/// The intent a look-up searches for: its tag, when it was recorded, how many requests.
#[derive(Clone, Copy, Debug)]
pub struct Intent<'a> {
    /// evalgrid's tag.
    pub tag: &'a str,
    /// When the intent was recorded (Unix seconds, this machine's clock).
    pub recorded_at: u64,
    /// Requests in the batch.
    pub requests: usize,
    /// Batch ids other ledger records claim: never this intent's.
    pub claimed: &'a [String],
}
