//! `evalgrid` binary: a thin shell around the library; see `cli`.

mod cli;

fn main() -> std::process::ExitCode {
    let code = cli::main();
    if std::env::var_os("EVALGRID_REPORT_RSS").is_some() {
        cli::report_peak_rss();
    }
    code
}
