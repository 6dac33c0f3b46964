//! `evalgrid` binary: a thin shell around the library; see `cli`.

mod cli;

// A busy run allocates and frees request bodies, answers and cache entries from many threads;
// glibc's allocator took about a third of such a run's CPU (`malloc_consolidate`, arena
// locks), so the binary uses mimalloc. The library (and its unit tests) keep the system one.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // `evalgrid __serve-guard …`: the small process that keeps a started server from
    // outliving evalgrid (see `evalgrid::serve::guard`).
    if let Some(code) = evalgrid::serve::guard::run_if_guard() {
        return code.into();
    }
    // Non-dumpable on Linux: other processes of our uid (model code run unsandboxed, or
    // anything else) cannot read /proc/<pid>/environ (the API keys) nor ptrace us.
    evalgrid::platform::protect_secrets();
    let code = cli::main();
    if std::env::var_os("EVALGRID_REPORT_RSS").is_some() {
        cli::report_peak_rss();
    }
    code
}
