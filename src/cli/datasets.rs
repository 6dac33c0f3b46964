//! `evalgrid datasets fetch <name> [--from DIR]`, and `evalgrid datasets fetch URL --sha256 HEX`
//! for one file of a user's own (a `qa` dataset), refused unless its content matches the pin.
//! Downloads are bounded in size and time (`--max-bytes`, `--read-timeout-s`, `--timeout-s`).

use std::time::Duration;

use super::exit::Exit;
use evalgrid::envs::bbeh::install::{Source, install, manifest};
use evalgrid::envs::fetch::{Limits, download, redact};
use evalgrid::providers::install_crypto_provider;

use super::args::DatasetsCommand;
use super::{Env, Failure, output};

pub(crate) fn datasets(env: &Env, command: &DatasetsCommand) -> Result<Exit, Failure> {
    let DatasetsCommand::Fetch { name, from, sha256, into, max_bytes, read_timeout_s, timeout_s } = command;
    if *read_timeout_s == 0 || *timeout_s == 0 {
        return Err(Failure::invalid(anyhow::anyhow!("`--read-timeout-s` and `--timeout-s` must be at least 1")));
    }
    let limits = Limits { max_bytes: *max_bytes, idle: Duration::from_secs(*read_timeout_s), total: Duration::from_secs(*timeout_s) };
    if name.starts_with("http://") || name.starts_with("https://") {
        return fetch_url(name, sha256.as_deref(), into, limits);
    }
    if name != "bbeh" {
        return Err(Failure::invalid(anyhow::anyhow!("unknown dataset `{name}` (known: bbeh)")));
    }
    let manifest = manifest()?;
    let data_dir = env.registry.data_dir();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (files, bytes) = match from {
        Some(dir) => runtime.block_on(install(&manifest, data_dir, Source::Local(dir)))?,
        None => {
            install_crypto_provider();
            let client = reqwest::Client::builder().connect_timeout(Duration::from_secs(20)).build()?;
            runtime.block_on(install(&manifest, data_dir, Source::Download(&client, limits)))?
        }
    };
    output::line(&format!(
        "installed {name}: {files} files, {bytes} bytes, every SHA-256 pin verified ({}@{}) → {}",
        manifest.upstream.repo,
        &manifest.upstream.commit[..7.min(manifest.upstream.commit.len())],
        data_dir.join(name).display()
    ));
    Ok(Exit::Ok)
}

/// Downloads `url` into `into/<file name>`, streaming it through SHA-256: a file whose hash is
/// not `sha256` is removed and nothing is installed (exit 1); no pin is a usage error (exit 2).
/// The file is written to a locked `.evalgrid-*.partial` file in `into` and renamed into
/// place; one that a killed fetch left (no live fetch holds its lock) is removed first.
fn fetch_url(url: &str, sha256: Option<&str>, into: &std::path::Path, limits: Limits) -> Result<Exit, Failure> {
    use sha2::{Digest, Sha256};
    use std::io::Write as _;
    let Some(pin) = sha256.map(str::to_ascii_lowercase) else {
        return Err(Failure::invalid(anyhow::anyhow!(
            "a URL needs `--sha256 HEX`: a dataset is pinned by its content, so a changed file is never used silently"
        )));
    };
    if pin.len() != 64 || !pin.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Failure::invalid(anyhow::anyhow!("`--sha256` must be 64 hex digits, got `{pin}`")));
    }
    let shown = redact(url);
    let name = url.split(['?', '#']).next().unwrap_or(url).rsplit('/').next().filter(|n| !n.is_empty() && *n != "." && *n != ".." && !n.contains('@'));
    let Some(name) = name else {
        return Err(Failure::invalid(anyhow::anyhow!("`{shown}` names no file")));
    };
    fs_err::create_dir_all(into)?;
    let swept = evalgrid::report::partial::sweep(into, []);
    if swept > 0 {
        tracing::info!("removed {swept} partial download(s) an interrupted fetch left in {}", into.display());
    }
    let mut temp = evalgrid::report::partial::locked_partial(into)?;
    install_crypto_provider();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let client = reqwest::Client::builder().connect_timeout(Duration::from_secs(20)).build()?;
    let mut hasher = Sha256::new();
    runtime.block_on(download(&client, url, limits, |chunk| {
        hasher.update(chunk);
        temp.write_all(chunk)
    }))?;
    let got: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if got != pin {
        return Err(anyhow::anyhow!("`{shown}` has SHA-256 {got}, not the pinned {pin}: nothing installed").into());
    }
    temp.as_file().sync_all()?;
    let target = into.join(name);
    temp.persist(&target).map_err(|e| anyhow::Error::from(e.error))?;
    output::line(&format!("installed {} ({} verified by SHA-256)", target.display(), &pin[..12]));
    Ok(Exit::Ok)
}
