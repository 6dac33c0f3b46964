//! `evalgrid datasets fetch <name> [--from DIR]`.

use super::exit::Exit;
use evalgrid::envs::bbeh::install::{Source, install, manifest};
use evalgrid::providers::install_crypto_provider;

use super::args::DatasetsCommand;
use super::{Env, Failure, output};

pub(crate) fn datasets(env: &Env, command: &DatasetsCommand) -> Result<Exit, Failure> {
    let DatasetsCommand::Fetch { name, from } = command;
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
            let client = reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(20)).build()?;
            runtime.block_on(install(&manifest, data_dir, Source::Download(&client)))?
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
