//! The three-way setting of a model entry's transport switches (`stream:`, `background:`):
//! `auto` lets evalgrid decide per call, `true` and `false` force it. One type, so both
//! settings parse and dump alike.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// `auto`, `true` or `false`, as written in a pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Switch {
    /// evalgrid decides per call (see the setting's own rule).
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

impl Switch {
    /// Parses the pipeline's spelling: `auto`, `true` or `false` (a YAML boolean or a string).
    #[must_use]
    pub fn parse(value: &Value) -> Option<Self> {
        match value {
            Value::Bool(true) => Some(Self::On),
            Value::Bool(false) => Some(Self::Off),
            Value::String(text) => match text.as_str() {
                "auto" => Some(Self::Auto),
                "true" => Some(Self::On),
                "false" => Some(Self::Off),
                _ => None,
            },
            _ => None,
        }
    }

    /// True for the default, which model dumps leave out.
    #[must_use]
    pub fn is_auto(&self) -> bool {
        *self == Self::Auto
    }
}

impl fmt::Display for Switch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::On => "true",
            Self::Off => "false",
        })
    }
}

impl Serialize for Switch {
    /// As written in a pipeline, so a dump parses back: `auto`, `true` or `false`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Auto => serializer.serialize_str("auto"),
            Self::On => serializer.serialize_bool(true),
            Self::Off => serializer.serialize_bool(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_dump_parses_back_to_the_same_switch() {
        for switch in [Switch::Auto, Switch::On, Switch::Off] {
            assert_eq!(Switch::parse(&serde_json::to_value(switch).unwrap()), Some(switch));
            assert_eq!(Switch::parse(&json!(switch.to_string())), Some(switch));
        }
        assert_eq!(Switch::parse(&json!("sometimes")), None);
        assert_eq!(Switch::parse(&json!(1)), None);
    }
}
