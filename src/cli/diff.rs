//! `evalgrid diff`: what changed since the previous run of a pipeline.

use evalgrid::plan::plan;
use evalgrid::report::diff::{PREVIOUS_DIR, run_diff};
use evalgrid::report::diff_page::{diff_html, diff_text};

use super::args::DiffArgs;
use super::exit::Exit;
use super::{Env, Failure, load_pipeline, output};

pub(crate) fn diff(env: &Env, args: &DiffArgs) -> Result<Exit, Failure> {
    let pipeline = load_pipeline(env, &args.pipeline)?;
    let plan = plan(&pipeline, None);
    let store = env.store()?;
    let against = args.against.clone().unwrap_or_else(|| args.reports_dir.join(&pipeline.name).join(PREVIOUS_DIR));
    // Named as given, but an absolute path only by its last part: the page may be shared.
    let label = match (against.is_absolute(), against.file_name()) {
        (true, Some(name)) => format!("…/{}", name.to_string_lossy()),
        _ => against.display().to_string(),
    };
    let d = run_diff(&pipeline, &plan, &store, &against, &label)?;
    if let Some(path) = &args.html {
        fs_err::write(path, diff_html(&pipeline.report.title, &d))?;
    }
    if args.json {
        output::json(&serde_json::to_value(&d).map_err(anyhow::Error::from)?);
    } else {
        output::line(diff_text(&d).trim_end());
    }
    Ok(Exit::Ok)
}
