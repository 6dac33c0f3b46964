//! A dataset row as a question: its fields mapped (`input`, `target`, `id`, `choices`,
//! `system`, `metadata`), checked, and hashed by content so an edit to one row changes that
//! row's key and no other.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::dataset::{Place, Row};

/// Which column holds each field (`fields:` in the task's params).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldMap {
    /// The question.
    pub input: String,
    /// The accepted answer(s): a string or a list of strings.
    pub target: String,
    /// The row's id (else its 0-based index).
    pub id: String,
    /// The options of a multiple-choice question (a list).
    pub choices: String,
    /// A per-row system prompt.
    pub system: String,
    /// Anything else to keep with the row (hashed, shown to templates as `metadata`).
    pub metadata: String,
    /// The choices as one column each, in order (an eval.yaml's `choices: [a, b, c]`);
    /// when set, `choices` is not read. Absent from the key when empty, as before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choice_columns: Vec<String>,
    /// An integer target names a choice by its 0-based index (`1` is `B`), as Inspect's Hub
    /// loader reads one on a row with choices.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub index_target: bool,
    /// The column holding the row's image (a path relative to the dataset, a `data:` URL or
    /// Parquet bytes), sent after the question's text. Absent from the key when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_image: Option<String>,
}

impl Default for FieldMap {
    fn default() -> Self {
        Self {
            input: "input".into(),
            target: "target".into(),
            id: "id".into(),
            choices: "choices".into(),
            system: "system".into(),
            metadata: "metadata".into(),
            choice_columns: Vec::new(),
            index_target: false,
            input_image: None,
        }
    }
}

impl FieldMap {
    /// The field names that may be remapped.
    pub const NAMES: [&'static str; 7] = ["input", "target", "id", "choices", "system", "metadata", "input_image"];

    /// Sets field `name` to read column `column`; `false` for an unknown field.
    pub fn set(&mut self, name: &str, column: String) -> bool {
        let slot = match name {
            "input" => &mut self.input,
            "target" => &mut self.target,
            "id" => &mut self.id,
            "choices" => &mut self.choices,
            "system" => &mut self.system,
            "metadata" => &mut self.metadata,
            "input_image" => {
                self.input_image = Some(column);
                return true;
            }
            _ => return false,
        };
        *slot = column;
        true
    }
}

/// One question of a task.
#[derive(Clone, Debug)]
pub struct Item {
    /// 0-based position in the file (before `sample`/`limit`).
    pub index: u64,
    /// Where it is in the file.
    pub place: Place,
    /// The `id` column, if the row has one.
    pub id: Option<String>,
    /// The question.
    pub input: String,
    /// Accepted answers.
    pub targets: Vec<String>,
    /// Options, in file order.
    pub choices: Vec<String>,
    /// Per-row system prompt.
    pub system: Option<String>,
    /// Every column, for templates.
    pub fields: Map<String, Value>,
    /// Hash of every column but the target (what the model is asked).
    pub ask_hash: [u8; 32],
    /// Hash of the target (what the answer is scored against).
    pub target_hash: [u8; 32],
    /// The row's image (`fields.input_image`), loaded and checked; its bytes are in `ask_hash`.
    pub image: Option<super::image::RowImage>,
}

impl Item {
    /// How the item is named in `items.csv` and messages: its id, else its index.
    #[must_use]
    pub fn label(&self) -> String {
        self.id.clone().unwrap_or_else(|| self.index.to_string())
    }

    /// Hex prefix of a hash, for records and explanations.
    #[must_use]
    pub fn short(hash: &[u8; 32]) -> String {
        blake3::Hash::from_bytes(*hash).to_hex()[..16].to_owned()
    }
}

/// A row that cannot be a question.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ItemError {
    /// What is wrong.
    pub message: String,
}

fn err(message: impl Into<String>) -> ItemError {
    ItemError { message: message.into() }
}

/// Text of a scalar cell (numbers and booleans as JSON writes them).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A list cell: a JSON list, or (in CSV, where cells are text) a JSON list written as text.
fn list(v: &Value) -> Option<Vec<String>> {
    let parsed;
    let items = match v {
        Value::Array(a) => a,
        Value::String(s) if s.trim_start().starts_with('[') => {
            parsed = serde_json::from_str::<Value>(s).ok()?;
            parsed.as_array()?
        }
        _ => return None,
    };
    items.iter().map(scalar).collect()
}

/// Maps a row into an item.
pub fn item(row: Row, index: u64, map: &FieldMap) -> Result<Item, ItemError> {
    let fields = row.fields;
    let input = match fields.get(&map.input) {
        None | Some(Value::Null) => return Err(err(format!("no `{}` (the question)", map.input))),
        Some(v) => scalar(v).ok_or_else(|| err(format!("`{}` must be text", map.input)))?,
    };
    let choices = if map.choice_columns.is_empty() {
        match fields.get(&map.choices) {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => list(v).ok_or_else(|| err(format!("`{}` must be a list of texts", map.choices)))?,
        }
    } else {
        let cell = |c: &String| match fields.get(c) {
            None | Some(Value::Null) => Err(err(format!("no `{c}` (a choice)"))),
            Some(v) => scalar(v).ok_or_else(|| err(format!("choice `{c}` must be text"))),
        };
        map.choice_columns.iter().map(cell).collect::<Result<Vec<_>, _>>()?
    };
    let literal = map.target.strip_prefix("literal:");
    let targets = match fields.get(&map.target) {
        _ if literal.is_some() => vec![literal.unwrap_or_default().to_owned()],
        Some(Value::Number(n)) if map.index_target && !choices.is_empty() => {
            let letter = n.as_u64().and_then(|i| usize::try_from(i).ok()).filter(|i| *i < choices.len()).map(super::inspect::letter);
            vec![letter.ok_or_else(|| err(format!("`{}` is {n}, not the 0-based index of one of the row's {} choices", map.target, choices.len())))?]
        }
        None | Some(Value::Null) => return Err(err(format!("no `{}` (the answer)", map.target))),
        Some(Value::Array(_)) => list(&fields[&map.target]).ok_or_else(|| err(format!("`{}` must be text or a list of texts", map.target)))?,
        Some(v) => vec![scalar(v).ok_or_else(|| err(format!("`{}` must be text or a list of texts", map.target)))?],
    };
    if targets.is_empty() {
        return Err(err(format!("`{}` is an empty list", map.target)));
    }
    let id = match fields.get(&map.id) {
        None | Some(Value::Null) => None,
        Some(v) => Some(scalar(v).ok_or_else(|| err(format!("`{}` must be text or a number", map.id)))?),
    };
    let system = match fields.get(&map.system) {
        None | Some(Value::Null) => None,
        Some(v) => Some(scalar(v).ok_or_else(|| err(format!("`{}` must be text", map.system)))?),
    };
    let mut ask = blake3::Hasher::new_derive_key("evalgrid qa item-ask v1");
    for (k, v) in &fields {
        if *k != map.target {
            hash_field(&mut ask, k, v);
        }
    }
    let mut target = blake3::Hasher::new_derive_key("evalgrid qa item-target v1");
    for t in &targets {
        target.update(&(t.len() as u64).to_le_bytes());
        target.update(t.as_bytes());
    }
    Ok(Item {
        index,
        place: row.place,
        id,
        input,
        targets,
        choices,
        system,
        fields,
        ask_hash: *ask.finalize().as_bytes(),
        target_hash: *target.finalize().as_bytes(),
        image: None,
    })
}

impl Item {
    /// Loads the row's image (read from `dataset`'s folder) and adds its bytes to the
    /// question's hash, so replacing the image file re-asks the row.
    pub fn load_image(&mut self, dataset: &std::path::Path, map: &FieldMap) -> Result<(), ItemError> {
        let Some(column) = &map.input_image else { return Ok(()) };
        let Some(image) = super::image::load(dataset, self.fields.get(column)).map_err(err)? else { return Ok(()) };
        let mut ask = blake3::Hasher::new_derive_key("evalgrid qa item-image v1");
        ask.update(&self.ask_hash);
        ask.update(image.blake3.as_bytes());
        self.ask_hash = *ask.finalize().as_bytes();
        self.image = Some(image);
        Ok(())
    }
}

/// Feeds one column to a hasher: length-prefixed name and canonical JSON value (serde_json
/// maps are sorted, so equal rows hash equal whatever their key order in the file).
fn hash_field(h: &mut blake3::Hasher, name: &str, value: &Value) {
    let text = value.to_string();
    h.update(&(name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update(&(text.len() as u64).to_le_bytes());
    h.update(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(v: Value) -> Row {
        Row { place: Place::Line(1), fields: v.as_object().unwrap().clone() }
    }

    #[test]
    fn fields_map_and_hash_by_content() {
        let map = FieldMap::default();
        let a = item(row(json!({"input": "2+2?", "target": "4", "id": 7})), 0, &map).unwrap();
        assert_eq!((a.label(), a.targets.clone()), ("7".to_owned(), vec!["4".to_owned()]));
        let b = item(row(json!({"id": 7, "target": "5", "input": "2+2?"})), 3, &map).unwrap();
        assert_eq!(a.ask_hash, b.ask_hash, "the question is the same");
        assert_ne!(a.target_hash, b.target_hash);
        let c = item(row(json!({"input": "2+3?", "target": "4", "id": 7})), 0, &map).unwrap();
        assert_ne!(a.ask_hash, c.ask_hash);
        let l = item(row(json!({"input": "q", "target": ["a", "b"], "choices": "[\"x\", \"y\"]"})), 0, &map).unwrap();
        assert_eq!((l.targets.len(), l.choices.len(), l.label()), (2, 2, "0".to_owned()));
    }

    #[test]
    fn missing_or_malformed_fields_are_refused() {
        let map = FieldMap::default();
        assert_eq!(item(row(json!({"input": "q"})), 0, &map).unwrap_err().message, "no `target` (the answer)");
        assert!(item(row(json!({"target": "q"})), 0, &map).is_err());
        assert!(item(row(json!({"input": "q", "target": []})), 0, &map).is_err());
        assert!(item(row(json!({"input": "q", "target": "a", "choices": "x"})), 0, &map).is_err());
        let mut renamed = FieldMap::default();
        assert!(renamed.set("input", "question".into()));
        assert!(!renamed.set("nope", "x".into()));
        assert!(item(row(json!({"question": "q", "target": "a"})), 0, &renamed).is_ok());
    }
}
