//! One scored unit's conversation as the model saw and answered it, so exports to other
//! tools' log formats (Inspect, Every Eval Ever) show the prompt and the answer, not only
//! the score.

use crate::providers::Message;

/// The prompt and answer behind one unit of a cell (matched to its [`super::metric::Unit`]
/// by `item`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exchange {
    /// The unit's item number (what pairs it with its unit; `items.csv` shows `id` where there is one).
    pub item: u64,
    /// The dataset's own id for the item, if it has one.
    pub id: Option<String>,
    /// The system prompt sent, if any.
    pub system: Option<String>,
    /// The turns sent (few-shot turns, then the question), as the model saw them.
    pub prompt: Vec<Message>,
    /// The question as the dataset states it (before templates).
    pub input: String,
    /// Accepted answers.
    pub targets: Vec<String>,
    /// The options of a multiple-choice item, in the order shown.
    pub choices: Vec<String>,
    /// The model's answer.
    pub answer: String,
    /// Why generation stopped, when not a normal stop (`length`, `content_filter`, …).
    pub finish_reason: Option<String>,
    /// Input tokens the provider reported.
    pub input_tokens: u64,
    /// Output tokens the provider reported.
    pub output_tokens: u64,
    /// Each scorer's extracted answer and explanation, where the benchmark keeps them.
    pub details: Vec<ScoreDetail>,
    /// An agent's whole conversation as Inspect `ChatMessage`s (system, user, assistant
    /// with `tool_calls`, `tool`), so exports show the trajectory; empty for one-turn items.
    pub trajectory: Vec<serde_json::Value>,
}

/// What one scorer read from a unit's answer, for exports that show why a score is what it
/// is (Inspect's `Score.answer` and `Score.explanation`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScoreDetail {
    /// The scorer's column name.
    pub scorer: String,
    /// The answer the scorer extracted from the reply (the letters chosen, the value after
    /// `ANSWER:`, the regex's match, else the reply itself).
    pub answer: Option<String>,
    /// Why: the reply the scorer read, or the judge's own words.
    pub explanation: Option<String>,
    /// A judge replied without a grade: the unit has no value for this scorer, and the
    /// export says so rather than leaving the score out.
    pub ungraded: bool,
}
