//! The built-in `scripted` agent: replays a fixed list of responses (spec §6.6) so the
//! whole executor path can be tested offline, plus the driver loop [`play`].

use super::episode::{CodeRunner, Episode, EpisodeError, EpisodeRecord};
use super::minishapes::Solution;

/// Anything that answers the task prompt and then each feedback message.
pub trait Agent {
    /// Next response; `feedback` is `None` for the first one. `None` = stop early.
    fn respond(&mut self, feedback: Option<&str>) -> Option<String>;
}

/// Replays canned responses in order and remembers the feedback it was shown.
#[derive(Debug, Clone, Default)]
pub struct ScriptedAgent {
    responses: Vec<String>,
    next: usize,
    /// Feedback messages received, in order.
    pub feedback_seen: Vec<String>,
}

fn fenced(prose: &str, code: &str) -> String {
    format!("{prose}\n\n```python\n{}\n```\n", code.trim_end())
}

/// Response 2 of §6.6: a script that raises.
pub const RAISES: &str = "import numpy as np\nx = np.load('data/train_data.npy')\n\
raise RuntimeError('scripted failure after loading ' + str(x.shape))\n";

/// Response 3 of §6.6: prints data statistics only, writes no predictions.
pub const STATS_ONLY: &str = "import numpy as np\nx = np.load('data/train_data.npy')\n\
y = np.load('data/train_labels.npy')\nprint('train', x.shape, x.dtype, 'labels', np.bincount(y))\n\
for c in range(3):\n    print(c, x[y == c].mean(axis=(0, 1)), x[y == c].std())\n";

/// Response 5 of §6.6: sleeps far past a 2 s limit.
pub const SLEEPS: &str = "import time\nprint('training...', flush=True)\ntime.sleep(60)\n";

impl ScriptedAgent {
    /// Agent replaying `responses`.
    pub fn new(responses: Vec<String>) -> Self {
        Self { responses, next: 0, feedback_seen: Vec::new() }
    }

    /// The §6.6 episode: no code, exception, no results file, weak (0.535), timeout.
    /// Response 4 also holds a shorter shell block, so the longest-block rule is exercised.
    pub fn spec_episode() -> Self {
        Self::new(vec![
            "I will first think about the geometry of the shapes before writing any code.".into(),
            fenced("Let me load the data.", RAISES),
            fenced("Let me look at the data statistics first.", STATS_ONLY),
            format!("Run it as:\n```\npython main.py\n```\n\n{}", fenced("A one-feature nearest-centroid baseline:", &Solution::Weak.script())),
            fenced("A bigger model that needs longer training:", SLEEPS),
        ])
    }

    /// A second run ending with the reference solution (run accuracy 0.995): no code,
    /// majority, 6-bin, 12-bin, 24-bin.
    pub fn reference_episode() -> Self {
        let mut v = vec!["No code this time, only a plan.".to_string()];
        for s in [Solution::Majority, Solution::Medium, Solution::TwelveBin, Solution::Reference] {
            v.push(fenced(&format!("Trying {s:?}."), &s.script()));
        }
        Self::new(v)
    }
}

impl Agent for ScriptedAgent {
    fn respond(&mut self, feedback: Option<&str>) -> Option<String> {
        if let Some(f) = feedback {
            self.feedback_seen.push(f.to_string());
        }
        let r = self.responses.get(self.next).cloned();
        self.next += 1;
        r
    }
}

/// Drives `episode` with `agent` until the budget is used or the agent stops.
pub fn play(episode: &mut Episode, agent: &mut dyn Agent, runner: &mut dyn CodeRunner) -> Result<EpisodeRecord, EpisodeError> {
    let mut feedback: Option<String> = None;
    while !episode.is_done() {
        let Some(response) = agent.respond(feedback.as_deref()) else {
            break;
        };
        let step = episode.step(&response, runner)?;
        feedback = step.feedback;
    }
    Ok(episode.record())
}

#[cfg(test)]
mod tests;
