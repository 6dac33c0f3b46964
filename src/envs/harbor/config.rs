//! `task.toml` of a Harbor task folder, read the way Harbor reads it (field names and
//! defaults from Harbor's `models/task/config.py` and its docs): timeouts, resources, the
//! network policy, a prebuilt image. Errors point at `task.toml:LINE:COL`; fields evalgrid
//! does not know are kept and reported as notes, never a failure, because the format keeps
//! growing and a newer task must still run.

use std::fmt;

use serde_json::{Map, Value, json};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Harbor's default limit on the agent phase and the one `harbor init` writes (current
/// Harbor has none; an unbounded trial would hold a container for ever).
pub const DEFAULT_AGENT_TIMEOUT_SEC: f64 = 600.0;
/// Harbor's default limit on `test.sh`.
pub const DEFAULT_VERIFIER_TIMEOUT_SEC: f64 = 600.0;
/// Harbor's default limit on building or starting the environment.
pub const DEFAULT_BUILD_TIMEOUT_SEC: f64 = 600.0;
/// Harbor's documented default resources.
pub const DEFAULT_CPUS: f64 = 1.0;
/// Harbor's documented default memory (MB).
pub const DEFAULT_MEMORY_MB: u64 = 2048;
/// Harbor's documented default storage (MB).
pub const DEFAULT_STORAGE_MB: u64 = 10240;

/// What the task lets its container reach.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// The task asked for the internet (`allow_internet = true` or `network_mode = "public"`).
    Public,
    /// No network at all (`allow_internet = false`, `network_mode = "no-network"`, or unsaid).
    NoNetwork,
    /// Only some hosts (`network_mode = "allowlist"`); evalgrid cannot filter hosts, so the
    /// container gets no network and a note says so.
    Allowlist,
}

/// A `task.toml`, defaults applied.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskToml {
    /// `schema_version` (or the older `version`), as written.
    pub schema_version: String,
    /// `[agent].timeout_sec`.
    pub agent_timeout_sec: f64,
    /// `[verifier].timeout_sec`.
    pub verifier_timeout_sec: f64,
    /// `[environment].build_timeout_sec`.
    pub build_timeout_sec: f64,
    /// `[environment].docker_image`: a prebuilt image used instead of building.
    pub docker_image: Option<String>,
    /// `[environment].cpus`.
    pub cpus: f64,
    /// `[environment].memory_mb` (or the older `memory = "2G"`).
    pub memory_mb: u64,
    /// `[environment].storage_mb` (or the older `storage = "10G"`); recorded, not enforced.
    pub storage_mb: u64,
    /// Network of the agent phase: `[agent].network_mode`, else `[environment]`'s
    /// `network_mode` / `allow_internet`, else none (Harbor's default is public; here the
    /// agent phase is offline unless the task asks).
    pub network: NetworkMode,
    /// Network of the verifier phase: `[verifier].network_mode`, else `[environment]`'s, else
    /// public as in Harbor (Terminal-Bench 2.0's `test.sh` fetches its test tools).
    #[serde(default = "public")]
    pub verifier_network: NetworkMode,
    /// `[environment].workdir`: overrides the image's WORKDIR for every command.
    pub workdir: Option<String>,
    /// `[verifier].env`, passed to `test.sh`.
    pub verifier_env: Vec<(String, String)>,
    /// `[solution].env`, passed to `solve.sh`.
    pub solution_env: Vec<(String, String)>,
    /// `[metadata]`, free-form.
    pub metadata: Value,
    /// Fields evalgrid does not use, kept as written (`section.key` → value).
    pub unknown: Map<String, Value>,
    /// What the user should know: unknown fields, deprecated forms, features not applied.
    pub notes: Vec<String>,
}

fn public() -> NetworkMode {
    NetworkMode::Public
}

/// A problem in `task.toml`, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TomlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task.toml:{}:{}: {}", self.line, self.col, self.message)
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

struct Reader<'t> {
    text: &'t str,
    notes: Vec<String>,
    unknown: Map<String, Value>,
}

impl Reader<'_> {
    fn error(&self, span: std::ops::Range<usize>, message: impl Into<String>) -> TomlError {
        let (line, col) = position(self.text, span.start);
        TomlError { line, col, message: message.into() }
    }

    fn number(&self, key: &str, v: &Spanned<DeValue<'_>>) -> Result<f64, TomlError> {
        let n = match v.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok().map(|n| n as f64),
            DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
            _ => None,
        };
        n.filter(|n| n.is_finite() && *n >= 0.0).ok_or_else(|| self.error(v.span(), format!("`{key}` must be a non-negative number, not {}", shown(v))))
    }

    fn positive(&self, key: &str, v: &Spanned<DeValue<'_>>) -> Result<f64, TomlError> {
        let n = self.number(key, v)?;
        if n <= 0.0 {
            return Err(self.error(v.span(), format!("`{key}` must be greater than 0")));
        }
        Ok(n)
    }

    fn string(&self, key: &str, v: &Spanned<DeValue<'_>>) -> Result<String, TomlError> {
        v.get_ref().as_str().map(str::to_owned).ok_or_else(|| self.error(v.span(), format!("`{key}` must be a string, not {}", v.get_ref().type_str())))
    }

    fn boolean(&self, key: &str, v: &Spanned<DeValue<'_>>) -> Result<bool, TomlError> {
        v.get_ref().as_bool().ok_or_else(|| self.error(v.span(), format!("`{key}` must be true or false, not {}", v.get_ref().type_str())))
    }

    fn table<'a, 'i>(&self, key: &str, v: &'a Spanned<DeValue<'i>>) -> Result<&'a DeTable<'i>, TomlError> {
        v.get_ref().as_table().ok_or_else(|| self.error(v.span(), format!("`{key}` must be a table, not {}", v.get_ref().type_str())))
    }

    fn env(&self, key: &str, v: &Spanned<DeValue<'_>>) -> Result<Vec<(String, String)>, TomlError> {
        let t = self.table(key, v)?;
        t.iter().map(|(k, val)| Ok((k.get_ref().to_string(), self.string(&format!("{key}.{}", k.get_ref()), val)?))).collect()
    }

    /// Harbor's deprecated size strings: `"2G"`, `"512M"`, `"1024K"` (case-insensitive).
    fn size_mb(&self, key: &str, v: &Spanned<DeValue<'_>>) -> Result<u64, TomlError> {
        let s = self.string(key, v)?;
        let s = s.trim().to_ascii_uppercase();
        let parsed = s
            .strip_suffix('G')
            .map(|n| (n, 1024.0))
            .or_else(|| s.strip_suffix('M').map(|n| (n, 1.0)))
            .or_else(|| s.strip_suffix('K').map(|n| (n, 1.0 / 1024.0)));
        parsed
            .and_then(|(n, mul)| n.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0).map(|x| (x * mul) as u64))
            .ok_or_else(|| self.error(v.span(), format!("`{key}` must be a size like \"2G\", \"512M\" or \"1024K\", not {s:?}")))
    }

    fn keep_unknown(&mut self, section: &str, key: &str, v: &Spanned<DeValue<'_>>) {
        let name = if section.is_empty() { key.to_owned() } else { format!("{section}.{key}") };
        let (line, _) = position(self.text, v.span().start);
        self.notes.push(format!("task.toml:{line}: `{name}` is not used by evalgrid (kept in the record)"));
        self.unknown.insert(name, to_json(v.get_ref()));
    }
}

/// A value as the user wrote it, for messages.
fn shown(v: &Spanned<DeValue<'_>>) -> String {
    match v.get_ref() {
        DeValue::String(s) => format!("{s:?}"),
        other => other.type_str().to_owned(),
    }
}

/// A TOML value as JSON (datetimes as their text).
#[must_use]
pub fn to_json(v: &DeValue<'_>) -> Value {
    match v {
        DeValue::String(s) => json!(s),
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).map_or_else(|_| json!(i.as_str()), |n| json!(n)),
        DeValue::Float(f) => {
            f.as_str().replace('_', "").parse::<f64>().ok().and_then(|x| serde_json::Number::from_f64(x).map(Value::Number)).unwrap_or(json!(f.as_str()))
        }
        DeValue::Boolean(b) => json!(b),
        DeValue::Datetime(d) => json!(d.to_string()),
        DeValue::Array(a) => Value::Array(a.iter().map(|x| to_json(x.get_ref())).collect()),
        DeValue::Table(t) => Value::Object(t.iter().map(|(k, x)| (k.get_ref().to_string(), to_json(x.get_ref()))).collect()),
    }
}

/// Keys of each section that evalgrid reads; others are kept and noted.
const KNOWN_AGENT: &[&str] = &["timeout_sec", "network_mode", "allowed_hosts"];
const KNOWN_VERIFIER: &[&str] = &["timeout_sec", "env", "network_mode", "allowed_hosts"];
const KNOWN_SOLUTION: &[&str] = &["env"];
const KNOWN_ENVIRONMENT: &[&str] = &[
    "build_timeout_sec",
    "docker_image",
    "cpus",
    "memory_mb",
    "storage_mb",
    "memory",
    "storage",
    "allow_internet",
    "network_mode",
    "allowed_hosts",
    "workdir",
];

/// Parses the text of a `task.toml`.
///
/// # Errors
/// Text that is not TOML, or a known field of the wrong type or out of range, located.
pub fn parse(text: &str) -> Result<TaskToml, TomlError> {
    let doc = DeTable::parse(text).map_err(|e| {
        let (line, col) = e.span().map_or((1, 1), |s| position(text, s.start));
        TomlError { line, col, message: e.message().trim().to_owned() }
    })?;
    let mut r = Reader { text, notes: Vec::new(), unknown: Map::new() };
    let mut out = TaskToml {
        schema_version: "1.0".into(),
        agent_timeout_sec: DEFAULT_AGENT_TIMEOUT_SEC,
        verifier_timeout_sec: DEFAULT_VERIFIER_TIMEOUT_SEC,
        build_timeout_sec: DEFAULT_BUILD_TIMEOUT_SEC,
        docker_image: None,
        cpus: DEFAULT_CPUS,
        memory_mb: DEFAULT_MEMORY_MB,
        storage_mb: DEFAULT_STORAGE_MB,
        network: NetworkMode::NoNetwork,
        verifier_network: NetworkMode::Public,
        workdir: None,
        verifier_env: Vec::new(),
        solution_env: Vec::new(),
        metadata: json!({}),
        unknown: Map::new(),
        notes: Vec::new(),
    };
    let (mut allow_internet, mut network_mode) = (None, None);
    let (mut agent_mode, mut verifier_mode) = (None, None);
    let mut agent_timeout_said = false;
    for (key, v) in doc.get_ref() {
        let key = key.get_ref().as_ref();
        match key {
            "version" | "schema_version" => out.schema_version = r.string(key, v)?,
            "metadata" => out.metadata = to_json(r.table(key, v).map(|_| v.get_ref())?),
            "agent" | "verifier" | "solution" | "environment" => {
                let known = match key {
                    "agent" => KNOWN_AGENT,
                    "verifier" => KNOWN_VERIFIER,
                    "solution" => KNOWN_SOLUTION,
                    _ => KNOWN_ENVIRONMENT,
                };
                for (k, val) in r.table(key, v)? {
                    let k = k.get_ref().as_ref();
                    if !known.contains(&k) {
                        r.keep_unknown(key, k, val);
                        continue;
                    }
                    let name = format!("[{key}].{k}");
                    match (key, k) {
                        ("agent", "timeout_sec") => {
                            out.agent_timeout_sec = r.positive(&name, val)?;
                            agent_timeout_said = true;
                        }
                        ("verifier", "timeout_sec") => out.verifier_timeout_sec = r.positive(&name, val)?,
                        ("verifier", "env") => out.verifier_env = r.env(&name, val)?,
                        ("solution", "env") => out.solution_env = r.env(&name, val)?,
                        (_, "build_timeout_sec") => out.build_timeout_sec = r.positive(&name, val)?,
                        (_, "docker_image") => out.docker_image = Some(r.string(&name, val)?).filter(|s| !s.trim().is_empty()),
                        (_, "cpus") => out.cpus = r.positive(&name, val)?,
                        (_, "memory_mb") => out.memory_mb = r.positive(&name, val)? as u64,
                        (_, "storage_mb") => out.storage_mb = r.positive(&name, val)? as u64,
                        (_, "memory") => out.memory_mb = r.size_mb(&name, val)?,
                        (_, "storage") => out.storage_mb = r.size_mb(&name, val)?,
                        (_, "allow_internet") => allow_internet = Some(r.boolean(&name, val)?),
                        (section, "network_mode") => {
                            let s = r.string(&name, val)?;
                            let slot = match section {
                                "agent" => &mut agent_mode,
                                "verifier" => &mut verifier_mode,
                                _ => &mut network_mode,
                            };
                            *slot = Some(match s.as_str() {
                                "public" => NetworkMode::Public,
                                "no-network" => NetworkMode::NoNetwork,
                                "allowlist" => NetworkMode::Allowlist,
                                _ => return Err(r.error(val.span(), format!("`{name}` must be \"public\", \"no-network\" or \"allowlist\", not {s:?}"))),
                            });
                        }
                        (section, "allowed_hosts") => {
                            if !val.get_ref().is_array() {
                                return Err(r.error(val.span(), format!("`{name}` must be a list of host names")));
                            }
                            let slot = match section {
                                "agent" => &mut agent_mode,
                                "verifier" => &mut verifier_mode,
                                _ => &mut network_mode,
                            };
                            slot.get_or_insert(NetworkMode::Allowlist);
                        }
                        (_, "workdir") => out.workdir = Some(r.string(&name, val)?).filter(|s| !s.trim().is_empty()),
                        _ => unreachable!("known keys are matched above"),
                    }
                }
            }
            // Registry identity, provenance: kept, nothing to apply.
            "task" | "source" => {
                out.unknown.insert(key.to_owned(), to_json(v.get_ref()));
            }
            _ => r.keep_unknown("", key, v),
        }
    }
    // What `[environment]` said, if anything.
    let said = match (network_mode, allow_internet) {
        (Some(mode), _) => Some(mode),
        (None, Some(true)) => Some(NetworkMode::Public),
        (None, Some(false)) => Some(NetworkMode::NoNetwork),
        (None, None) => None,
    };
    out.network = agent_mode.or_else(|| said.clone()).unwrap_or(NetworkMode::NoNetwork);
    out.verifier_network = verifier_mode.or(said).unwrap_or(NetworkMode::Public);
    if out.network == NetworkMode::Allowlist || out.verifier_network == NetworkMode::Allowlist {
        r.notes.push("task.toml: `network_mode = \"allowlist\"` cannot be enforced per host here; that phase gets no network".into());
    }
    if !agent_timeout_said {
        r.notes.push(format!("task.toml: no `[agent].timeout_sec`; the agent phase is limited to {DEFAULT_AGENT_TIMEOUT_SEC} s"));
    }
    out.unknown.extend(r.unknown);
    out.notes = r.notes;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TB2: &str = r#"version = "1.0"

[metadata]
author_name = "A"
difficulty = "medium"
tags = ["file-operations"]

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
docker_image = "alexgshaw/x:20251031"
cpus = 1
memory = "2G"
storage = "10G"
"#;

    #[test]
    fn terminal_bench_2_fields_and_old_size_strings() {
        let t = parse(TB2).unwrap();
        assert_eq!(t.schema_version, "1.0");
        assert_eq!(t.agent_timeout_sec, 900.0);
        assert_eq!(t.verifier_timeout_sec, 900.0);
        assert_eq!(t.memory_mb, 2048);
        assert_eq!(t.storage_mb, 10240);
        assert_eq!(t.docker_image.as_deref(), Some("alexgshaw/x:20251031"));
        assert_eq!(t.network, NetworkMode::NoNetwork);
        assert_eq!(t.metadata["difficulty"], "medium");
        assert!(t.notes.is_empty(), "{:?}", t.notes);
    }

    #[test]
    fn defaults_network_and_unknown_fields() {
        let t = parse("schema_version = \"1.3\"\nfancy = 1\n[environment]\nallow_internet = true\ngpus = 0\nmemory_mb = 512\n").unwrap();
        assert_eq!(t.schema_version, "1.3");
        assert_eq!((t.agent_timeout_sec, t.verifier_timeout_sec, t.cpus, t.memory_mb), (600.0, 600.0, 1.0, 512));
        assert_eq!(t.network, NetworkMode::Public);
        assert_eq!(t.unknown["fancy"], 1);
        assert_eq!(t.unknown["environment.gpus"], 0);
        assert!(t.notes.iter().any(|n| n.contains("task.toml:5: `environment.gpus`")), "{:?}", t.notes);
        let t = parse("[environment]\nallow_internet = true\nnetwork_mode = \"no-network\"\n").unwrap();
        assert_eq!((t.network, t.verifier_network), (NetworkMode::NoNetwork, NetworkMode::NoNetwork));
        // Unsaid: the agent offline, the verifier public as in Harbor; each phase can say.
        let t = parse("").unwrap();
        assert_eq!((t.network, t.verifier_network), (NetworkMode::NoNetwork, NetworkMode::Public));
        let t = parse("[agent]\nnetwork_mode = \"public\"\n[verifier]\nnetwork_mode = \"no-network\"\n").unwrap();
        assert_eq!((t.network, t.verifier_network), (NetworkMode::Public, NetworkMode::NoNetwork));
    }

    #[test]
    fn errors_are_located() {
        let e = parse("[agent]\ntimeout_sec = \"soon\"\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 15), "{e}");
        assert!(e.to_string().starts_with("task.toml:2:15: `[agent].timeout_sec` must be"), "{e}");
        let e = parse("[environment]\ncpus = 1\nmemory = \"lots\"\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = parse("[verifier\ntimeout_sec = 1\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        let e = parse("[agent]\ntimeout_sec = -5\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = parse("[environment]\nnetwork_mode = \"sometimes\"\n").unwrap_err();
        assert!(e.message.contains("no-network"), "{e}");
    }
}
