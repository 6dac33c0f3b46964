//! `evalgrid eleusis import <results.json>... --out <dir>`: every published
//! metric from result files made elsewhere, plus an engine replay of every
//! round that lists any turn where hand, board or verdict differ.

use super::exit::Exit;
use std::fmt::Write as _;

use evalgrid::envs::eleusis::replay::{import, metrics_csv};

use super::args::EleusisCommand;
use super::{Failure, output};

pub(crate) fn eleusis(command: &EleusisCommand) -> Result<Exit, Failure> {
    let EleusisCommand::Import { files, out } = command;
    let report = import(files).map_err(Failure::invalid)?;
    fs_err::create_dir_all(out)?;
    fs_err::write(out.join("metrics.csv"), metrics_csv(&report))?;
    fs_err::write(out.join("metrics.json"), serde_json::to_string_pretty(&report)? + "\n")?;
    let mut replay = String::new();
    let mut diffs = 0;
    for f in &report.files {
        let _ = writeln!(replay, "{} ({}): {} rounds, {} turns, {} differences", f.path, f.model, f.rounds, f.turns, f.replay_diffs.len());
        for d in &f.replay_diffs {
            diffs += 1;
            let turn = d.turn.map_or_else(|| "round".to_owned(), |t| format!("turn {t}"));
            let _ = writeln!(replay, "  round {} {turn}: {} recorded `{}`, replayed `{}`", d.round, d.field, d.recorded, d.replayed);
        }
    }
    fs_err::write(out.join("replay.txt"), &replay)?;
    output::line(replay.trim_end());
    output::line(&format!("wrote {}/metrics.csv, metrics.json, replay.txt", out.display()));
    Ok(Exit::failed_if(diffs > 0))
}
