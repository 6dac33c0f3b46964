//! The process's exit codes, one enum with their meaning (as cargo-nextest documents its
//! own), so every command maps its outcome the same way.

/// How an `evalgrid` command ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Everything asked for succeeded.
    Ok,
    /// The command ran, but some cells failed (rerun with `--retry-errors`) or a check
    /// (`cache verify`, a `bbq call` input) found a problem.
    Failed,
    /// Invalid input: the pipeline, a filter, arguments, a missing dataset or sandbox.
    /// Also what clap uses for bad arguments.
    Invalid,
    /// The budget (`budget.usd`, `--budget-usd`) held a call back: the cells not started
    /// stay missing, and the same command with a larger budget goes on.
    BudgetReached,
    /// Ctrl-C stopped a run; the same command resumes it.
    Interrupted,
}

impl Exit {
    /// `Failed` when `failed`, else `Ok`.
    #[must_use]
    pub(crate) fn failed_if(failed: bool) -> Self {
        if failed { Self::Failed } else { Self::Ok }
    }

    /// The numeric status: 0, 1, 2, 3 or 130.
    #[must_use]
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::Failed => 1,
            Self::Invalid => 2,
            Self::BudgetReached => 3,
            Self::Interrupted => 130,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        Self::from(exit.code())
    }
}
