//! `agent:` settings of a `harbor` task entry (and a model entry's overrides): which agent
//! the API models play and its limits. Parsed here, with the rest of the pipeline, so a bad
//! setting is an error at its place before anything runs.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The model-driven agents (the built-in `oracle` and `nop` are models, not settings).
pub const AGENT_NAMES: &[&str] = &["terminal"];

/// The settings every agent takes, with their meaning, for error hints.
pub const AGENT_SETTINGS: &str = "name, max_turns, max_output_kb, command_timeout_s, tools, max_tokens_total";

/// The agent an API model plays on a harbor task: limits and how tools are offered. All of
/// it can change a trial, so all of it is keyed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    /// `terminal`.
    pub name: String,
    /// Model calls before the agent phase ends as `max_turns`.
    pub max_turns: u32,
    /// Each command's output (stdout, stderr and exit code) is cut to this many KiB.
    pub max_output_kb: u32,
    /// Each command is killed after this many seconds.
    pub command_timeout_s: f64,
    /// Native tool calls (`true`) or the text fallback of fenced `bash` blocks (`false`).
    pub tools: bool,
    /// Input + output tokens of the trial's calls, past which the agent phase ends as
    /// `token_limit` (`None`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_total: Option<u64>,
}

impl Default for AgentConfig {
    /// `terminal` with 50 turns, 16 KiB of output and 120 s per command, native tools.
    fn default() -> Self {
        Self { name: "terminal".into(), max_turns: 50, max_output_kb: 16, command_timeout_s: 120.0, tools: true, max_tokens_total: None }
    }
}

impl AgentConfig {
    /// The config with `overrides` (checked by [`check_overrides`]) applied.
    ///
    /// # Errors
    /// A setting of the wrong kind.
    pub fn with(&self, overrides: &Map<String, Value>) -> Result<Self, String> {
        let mut out = self.clone();
        for (k, v) in overrides {
            apply(&mut out, k, v)?;
        }
        Ok(out)
    }

    /// As JSON, for keys and records.
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn apply(out: &mut AgentConfig, key: &str, v: &Value) -> Result<(), String> {
    let whole = |min: u64| v.as_u64().filter(|n| *n >= min);
    match key {
        "name" => {
            let name = v.as_str().filter(|n| AGENT_NAMES.contains(n)).ok_or_else(|| {
                format!("`agent.name` must be one of {} (oracle and nop are built-in models: `provider: builtin`), not {v}", AGENT_NAMES.join(", "))
            })?;
            out.name = name.to_owned();
        }
        "max_turns" => {
            out.max_turns = whole(1).and_then(|n| u32::try_from(n).ok()).ok_or_else(|| format!("`agent.max_turns` must be a whole number ≥ 1, not {v}"))?
        }
        "max_output_kb" => {
            out.max_output_kb = whole(1)
                .filter(|n| *n <= 64 * 1024)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("`agent.max_output_kb` must be a whole number from 1 to 65536, not {v}"))?;
        }
        "command_timeout_s" => {
            out.command_timeout_s = v
                .as_f64()
                .filter(|n| n.is_finite() && *n > 0.0 && *n <= 86_400.0)
                .ok_or_else(|| format!("`agent.command_timeout_s` must be a number of seconds in (0, 86400], not {v}"))?;
        }
        "tools" => out.tools = v.as_bool().ok_or_else(|| format!("`agent.tools` must be true (native tool calls) or false (fenced bash blocks), not {v}"))?,
        "max_tokens_total" => {
            out.max_tokens_total =
                if v.is_null() { None } else { Some(whole(1).ok_or_else(|| format!("`agent.max_tokens_total` must be a whole number ≥ 1, not {v}"))?) }
        }
        other => return Err(format!("`agent` has no setting `{other}` (settings: {AGENT_SETTINGS})")),
    }
    Ok(())
}

/// The settings of an `agent:` value: a name (`terminal`) or a mapping of settings.
///
/// # Errors
/// Not a name or a mapping, or a bad setting.
pub fn check_overrides(value: &Value) -> Result<Map<String, Value>, String> {
    let map = match value {
        Value::String(_) => {
            let mut m = Map::new();
            m.insert("name".into(), value.clone());
            m
        }
        Value::Object(m) => m.clone(),
        other => return Err(format!("`agent` must be an agent name or a mapping like {{name: terminal, max_turns: 50}}, not {other}")),
    };
    AgentConfig::default().with(&map)?;
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_apply_and_bad_ones_say_which() {
        let o = check_overrides(&json!({"max_turns": 3, "tools": false, "command_timeout_s": 2.5})).unwrap();
        let c = AgentConfig::default().with(&o).unwrap();
        assert_eq!((c.max_turns, c.tools, c.command_timeout_s, c.max_output_kb), (3, false, 2.5, 16));
        assert_eq!(check_overrides(&json!("terminal")).unwrap()["name"], "terminal");
        assert!(check_overrides(&json!({"max_turns": 0})).unwrap_err().contains("max_turns"));
        assert!(check_overrides(&json!({"name": "oracle"})).unwrap_err().contains("built-in"));
        assert!(check_overrides(&json!({"turns": 3})).unwrap_err().contains("no setting `turns`"));
        assert!(check_overrides(&json!({"command_timeout_s": -1})).is_err());
        assert!(check_overrides(&json!([1])).is_err());
    }
}
