//! Which program runs an engine on this machine, its version, and the command line that
//! starts it: llama.cpp's `llama-server` from PATH, else the `xllamacpp` Python wheel (through
//! evalgrid's launcher script); vLLM's `vllm serve`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::sandbox::process::{Killer, run_probe, which};
use crate::spec::{Engine, ServeConfig, Weights};

/// evalgrid's launcher for the xllamacpp wheel (it has no command line of its own).
const XLLAMACPP_LAUNCHER: &str = include_str!("xllamacpp.py");

/// How long a version probe may take (vLLM imports torch: seconds).
const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// The program that runs an engine here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// `llama-server` at this path.
    LlamaServer(PathBuf),
    /// `python3` (at this path) with the `xllamacpp` module.
    Xllamacpp(PathBuf),
    /// `vllm` at this path.
    Vllm(PathBuf),
}

/// An engine found on this machine, with the version that goes into keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// How to start it.
    pub launcher: Launcher,
    /// Its build, e.g. `llama-server version: 6789 (abc1234)` or `xllamacpp 2026.10.11549`.
    pub version: String,
}

/// Finds `engine` here; `Err` lists what was tried.
///
/// # Errors
/// No program for the engine (or none that reports a version).
pub fn find(engine: Engine) -> Result<Found, String> {
    let killer = Killer::new(Path::new("kill"), None);
    match engine {
        Engine::LlamaCpp => {
            let mut tried = Vec::new();
            if let Some(exe) = which(Path::new("llama-server"), None) {
                match probe(Command::new(&exe).arg("--version"), &killer) {
                    Some(text) => return Ok(Found { version: llama_version(&text), launcher: Launcher::LlamaServer(exe) }),
                    None => tried.push(format!("`{} --version` failed", exe.display())),
                }
            } else {
                tried.push("`llama-server` is not on PATH".to_owned());
            }
            match which(Path::new("python3"), None) {
                Some(python) => {
                    let mut cmd = Command::new(&python);
                    cmd.args(["-c", "import xllamacpp; print(xllamacpp.__version__)"]);
                    match probe(&mut cmd, &killer) {
                        Some(text) => {
                            let version = text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("unknown");
                            return Ok(Found { version: format!("xllamacpp {version}"), launcher: Launcher::Xllamacpp(python) });
                        }
                        None => tried.push("`python3 -c 'import xllamacpp'` failed (`pip install xllamacpp`)".to_owned()),
                    }
                }
                None => tried.push("`python3` is not on PATH (for the xllamacpp wheel)".to_owned()),
            }
            Err(tried.join("; "))
        }
        Engine::Vllm => {
            let Some(exe) = which(Path::new("vllm"), None) else { return Err("`vllm` is not on PATH (`pip install vllm`)".to_owned()) };
            match probe(Command::new(&exe).arg("--version"), &killer) {
                Some(text) => {
                    let version = text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("unknown");
                    Ok(Found { version: format!("vllm {version}"), launcher: Launcher::Vllm(exe) })
                }
                None => Err(format!("`{} --version` failed", exe.display())),
            }
        }
    }
}

/// The output of a short command that succeeded.
fn probe(cmd: &mut Command, killer: &Killer) -> Option<String> {
    let mut owned = Command::new(cmd.get_program());
    owned.args(cmd.get_args());
    let (status, text, timed_out) = run_probe(owned, PROBE_TIMEOUT, killer).ok()?;
    (status.success() && !timed_out).then_some(text)
}

/// `llama-server --version` prints `version: 6789 (abc1234)` then the compiler line.
fn llama_version(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| l.starts_with("version:")).unwrap_or_else(|| text.lines().next().unwrap_or("unknown"));
    format!("llama-server {}", line.trim())
}

/// The command line that starts `serve` with `launcher` on 127.0.0.1:`port`, answering to
/// `names` (vLLM's served model names; llama.cpp answers any name with its file's path).
#[must_use]
pub fn command_line(launcher: &Launcher, serve: &ServeConfig, names: &[String], port: u16) -> Vec<String> {
    let weights = match &serve.weights {
        Weights::Local(path) => path.display().to_string(),
        Weights::Hub(id) => id.clone(),
    };
    let context = serve.context.unwrap_or(crate::spec::serve::DEFAULT_LLAMA_CONTEXT);
    let total_context = context.saturating_mul(serve.slots as u64);
    let mut line: Vec<String> = match launcher {
        Launcher::LlamaServer(exe) => [
            exe.display().to_string(),
            "-m".into(),
            weights,
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "-c".into(),
            total_context.to_string(),
            "-np".into(),
            serve.slots.to_string(),
        ]
        .into(),
        Launcher::Xllamacpp(python) => {
            let config = json!({"model": weights, "port": port, "n_ctx": total_context, "slots": serve.slots, "args": serve.engine_args()});
            return vec![python.display().to_string(), "-c".into(), XLLAMACPP_LAUNCHER.into(), config.to_string()];
        }
        Launcher::Vllm(exe) => {
            let mut line = vec![exe.display().to_string(), "serve".into(), weights, "--host".into(), "127.0.0.1".into(), "--port".into(), port.to_string()];
            line.push("--served-model-name".into());
            line.extend(names.iter().cloned());
            line.extend(["--max-num-seqs".into(), serve.slots.to_string()]);
            if let Some(context) = serve.context {
                line.extend(["--max-model-len".into(), context.to_string()]);
            }
            if serve.gpus > 1 {
                line.extend(["--tensor-parallel-size".into(), serve.gpus.to_string()]);
            }
            line
        }
    };
    line.extend(serve.engine_args());
    line
}

/// The path on the server that answers 200 once the model is loaded (both engines).
pub const HEALTH_PATH: &str = "/health";

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(engine: Engine) -> ServeConfig {
        ServeConfig {
            engine,
            weights: Weights::Local("/w/m.gguf".into()),
            written: "m.gguf".into(),
            position: crate::spec::Position::default(),
            slots: 2,
            context: Some(2048),
            gpus: 2,
            args: vec![crate::spec::ServeArg { text: "--temp".into(), file: None }, crate::spec::ServeArg { text: "0.5".into(), file: None }],
            pinned: None,
            start_timeout_s: 10,
            identity: None,
        }
    }

    #[test]
    fn llama_server_gets_the_total_context_split_over_its_slots() {
        let line = command_line(&Launcher::LlamaServer("/bin/llama-server".into()), &serve(Engine::LlamaCpp), &["x".into()], 8080);
        assert_eq!(line.join(" "), "/bin/llama-server -m /w/m.gguf --host 127.0.0.1 --port 8080 -c 4096 -np 2 --temp 0.5");
    }

    #[test]
    fn vllm_follows_its_documented_command_line() {
        let line = command_line(&Launcher::Vllm("/bin/vllm".into()), &serve(Engine::Vllm), &["a".into(), "b".into()], 9000);
        assert_eq!(
            line.join(" "),
            "/bin/vllm serve /w/m.gguf --host 127.0.0.1 --port 9000 --served-model-name a b --max-num-seqs 2 --max-model-len 2048 --tensor-parallel-size 2 --temp 0.5"
        );
    }

    #[test]
    fn xllamacpp_gets_one_json_argument() {
        let line = command_line(&Launcher::Xllamacpp("/bin/python3".into()), &serve(Engine::LlamaCpp), &[], 7000);
        assert_eq!(line[1], "-c");
        let config: serde_json::Value = serde_json::from_str(&line[3]).unwrap();
        assert_eq!(config, json!({"model": "/w/m.gguf", "port": 7000, "n_ctx": 4096, "slots": 2, "args": ["--temp", "0.5"]}));
    }

    #[test]
    fn versions_read_as_the_engine_prints_them() {
        assert_eq!(llama_version("version: 6789 (abc1234)\nbuilt with cc"), "llama-server version: 6789 (abc1234)");
    }
}
