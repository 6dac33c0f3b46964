//! The servers of one run: entries with the same `serve:` share one; each is started only
//! when a cell of one of its entries must run, its URL given to those entries, and all are
//! stopped when the pool is dropped (at the end, on an error, after Ctrl-C).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ServeError;
use super::engine::{Found, command_line};
use super::server::{Server, Start};
use crate::spec::{Engine, HeaderSource, Pipeline};

/// The running servers; dropping the pool stops them.
#[derive(Debug, Default)]
pub struct Servers {
    running: Vec<Server>,
    /// Slots per server URL: each server's lane concurrency.
    pub lanes: BTreeMap<String, usize>,
}

impl Servers {
    /// The process groups of the running servers (for tests and messages).
    #[must_use]
    pub fn groups(&self) -> Vec<u32> {
        self.running.iter().map(Server::group).collect()
    }

    /// How many servers run.
    #[must_use]
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Whether none runs.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Stops every server now.
    pub fn stop(&mut self) {
        for server in &mut self.running {
            server.stop();
        }
    }
}

/// What a starting server is reported as, before it answers.
#[derive(Debug, Clone)]
pub struct Starting {
    /// Entry ids it serves.
    pub models: Vec<String>,
    /// Engine and version.
    pub engine: String,
    /// Its log file.
    pub log: PathBuf,
}

/// Starts one server for each distinct `serve:` among the entries in `needed` (model
/// indices) and points every entry that uses it at its URL; `log_dir` receives one log per
/// server; `on_start` hears of each before it starts.
///
/// # Errors
/// The first server that fails to start (the ones already started are stopped).
pub fn start(
    pipeline: &mut Pipeline,
    needed: &BTreeSet<usize>,
    engines: &BTreeMap<Engine, Found>,
    log_dir: &Path,
    on_start: &mut dyn FnMut(&Starting),
) -> Result<Servers, ServeError> {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, model) in pipeline.models.iter().enumerate() {
        if let Some(serve) = &model.serve {
            groups.entry(serve.server_key()).or_default().push(i);
        }
    }
    let secrets: Vec<String> = pipeline
        .models
        .iter()
        .flat_map(|m| m.api_key_env.iter().cloned().chain(m.headers.values().filter_map(|h| if let HeaderSource::Env(v) = h { Some(v.clone()) } else { None })))
        .collect();
    let mut gpus = Gpus::from_env();
    let mut servers = Servers::default();
    // In file order of their first entry, so logs and messages read as the pipeline does.
    let mut ordered: Vec<Vec<usize>> = groups.into_values().filter(|members| members.iter().any(|i| needed.contains(i))).collect();
    ordered.sort();
    for members in ordered {
        let first = &pipeline.models[members[0]];
        let Some(serve) = first.serve.clone() else { continue };
        let found = engines.get(&serve.engine).ok_or_else(|| ServeError::EngineMissing {
            model: first.id.clone(),
            engine: serve.engine,
            tried: "it was not looked for".to_owned(),
        })?;
        let names: Vec<String> = members.iter().map(|&i| pipeline.models[i].model.clone()).collect::<BTreeSet<_>>().into_iter().collect();
        let log = log_dir.join(format!("{}.log", first.id));
        let ids: Vec<String> = members.iter().map(|&i| pipeline.models[i].id.clone()).collect();
        let engine = format!("{} ({})", serve.engine, found.version);
        on_start(&Starting { models: ids, engine: engine.clone(), log: log.clone() });
        let launcher = found.launcher.clone();
        let serve_for_line = serve.clone();
        let command = move |port: u16| command_line(&launcher, &serve_for_line, &names, port);
        let env_set = gpus.take(serve.gpus).map(|list| vec![("CUDA_VISIBLE_DEVICES".to_owned(), list)]).unwrap_or_default();
        let server = Server::start(&Start {
            model: &first.id,
            engine,
            command: &command,
            log,
            env_remove: secrets.clone(),
            env_set,
            timeout: Duration::from_secs(serve.start_timeout_s),
        })?;
        for &i in &members {
            pipeline.models[i].base_url = Some(server.url.clone());
        }
        servers.lanes.insert(server.url.clone(), serve.slots);
        servers.running.push(server);
    }
    Ok(servers)
}

/// The GPUs this process may use (inherited `CUDA_VISIBLE_DEVICES`, as Slurm and Kubernetes
/// set it, else 0, 1, …), handed out in turn so two servers never share one.
struct Gpus {
    visible: Option<Vec<String>>,
    next: usize,
}

impl Gpus {
    fn from_env() -> Self {
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok().map(|v| v.split(',').map(|d| d.trim().to_owned()).filter(|d| !d.is_empty()).collect());
        Self { visible, next: 0 }
    }

    /// The next `n` devices as a `CUDA_VISIBLE_DEVICES` value; `None` for none asked.
    fn take(&mut self, n: u32) -> Option<String> {
        if n == 0 {
            return None;
        }
        let n = n as usize;
        let list: Vec<String> = match &self.visible {
            Some(visible) => visible.iter().skip(self.next).take(n).cloned().collect(),
            None => (self.next..self.next + n).map(|i| i.to_string()).collect(),
        };
        self.next += n;
        Some(list.join(","))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn servers_get_disjoint_gpus() {
        let mut gpus = super::Gpus { visible: Some(vec!["3".into(), "5".into(), "6".into()]), next: 0 };
        assert_eq!(gpus.take(0), None);
        assert_eq!(gpus.take(2).as_deref(), Some("3,5"));
        assert_eq!(gpus.take(1).as_deref(), Some("6"));
        let mut all = super::Gpus { visible: None, next: 0 };
        assert_eq!(all.take(2).as_deref(), Some("0,1"));
        assert_eq!(all.take(2).as_deref(), Some("2,3"));
    }
}
