//! The guard between evalgrid and a server it starts: `evalgrid __serve-guard PARENT --
//! COMMAND…`. evalgrid starts it as the leader of a new process group; the guard asks the
//! kernel for SIGTERM when evalgrid's main thread ends (`PR_SET_PDEATHSIG`, so even after
//! `kill -9`), starts the server in its group and waits. On SIGTERM, or when its parent id
//! changes (the portable fallback, polled), it stops the whole group: SIGTERM, a grace
//! period, then SIGKILL, itself included. No server outlives evalgrid, and the group holds
//! everything the server started (vLLM's worker processes too).

use std::process::Command;
use std::time::{Duration, Instant};

/// The first argument that makes the evalgrid binary act as a guard.
pub const GUARD_ARG: &str = "__serve-guard";

/// How long the server gets to exit after SIGTERM before the group is killed.
const GRACE: Duration = Duration::from_secs(5);

/// How often the guard looks at its server and its parent.
const POLL: Duration = Duration::from_millis(100);

/// Runs the guard when the process was started as one (`argv[1]` is [`GUARD_ARG`]) and
/// returns its exit code; `None` for a normal evalgrid command line.
#[must_use]
pub fn run_if_guard() -> Option<u8> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_none_or(|a| a != GUARD_ARG) {
        return None;
    }
    Some(guard(&args[2..]))
}

fn guard(args: &[std::ffi::OsString]) -> u8 {
    crate::platform::terminate_with_parent();
    let parent: Option<u32> = args.first().and_then(|p| p.to_str()?.parse().ok());
    let Some(parent) = parent else { return 2 };
    // evalgrid may have ended before the death signal was armed: then start nothing.
    if crate::platform::parent_pid() != parent {
        return 1;
    }
    let Some((program, rest)) = args.get(2..).and_then(<[_]>::split_first) else { return 2 };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return 1 };
    runtime.block_on(async {
        // The handler first: a SIGTERM from here on stops the group instead of leaving the
        // server without its guard.
        let Ok(mut terminate) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else { return 1 };
        let mut child = match Command::new(program).args(rest).spawn() {
            Ok(child) => child,
            Err(e) => {
                eprintln!("error: cannot start `{}`: {e}", program.to_string_lossy());
                return 127;
            }
        };
        loop {
            tokio::select! {
                _ = terminate.recv() => {
                    stop_group(&mut child);
                    return 0;
                }
                () = tokio::time::sleep(POLL) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        // The server ended by itself; evalgrid kills what it left in the group.
                        return exit_code(status);
                    }
                    if crate::platform::parent_pid() != parent {
                        stop_group(&mut child);
                        return 1;
                    }
                }
            }
        }
    })
}

/// SIGTERM to the group (the server and whatever it started), a grace period for the server
/// to exit, then SIGKILL to the group, the guard included.
fn stop_group(child: &mut std::process::Child) {
    let group = std::process::id();
    crate::platform::signal_group(group, false);
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::platform::signal_group(group, true);
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        _ => 1,
    }
}
