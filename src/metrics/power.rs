//! How big a grid must be to see a difference (`evalgrid status P --power D`): a user
//! should learn before paying that a grid cannot tell its closest models apart. The
//! clustered SE of a paired difference falls as 1/√(units) when more seeds (or items)
//! are added in the same proportion to every task, so the minimum detectable difference
//! `(1.96 + 0.84)·SE` reaches `D` at `n · ((1.96 + 0.84)·SE / D)²` units.

use serde::Serialize;

use super::comparison::{Comparison, MDE_FACTOR};

/// What a suite's closest pair of models needs to detect a difference of `target`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PowerNeed {
    /// Suite.
    pub suite: String,
    /// The suite's first per-unit metric (the one the summaries rank by).
    pub metric: String,
    /// The pair with the smallest observed |difference| (and a clustered SE).
    pub model_a: String,
    /// The other model of the pair.
    pub model_b: String,
    /// Observed paired difference `a − b`.
    pub diff: f64,
    /// Its clustered SE.
    pub se: f64,
    /// Paired units now.
    pub n_pairs: u64,
    /// Tasks (clusters) among them.
    pub clusters: u64,
    /// Seeds in the suite's grid now.
    pub seeds: u64,
    /// Minimum detectable difference now, at 80 % power.
    pub mde: f64,
    /// The difference the user wants to detect.
    pub target: f64,
    /// Paired units needed for `mde ≤ target`.
    pub units_needed: u64,
    /// Seeds needed for that, every task and item kept.
    pub seeds_needed: u64,
    /// `units_needed − n_pairs` (0 when the grid is big enough).
    pub more_units: u64,
    /// `seeds_needed − seeds` (0 when the grid is big enough).
    pub more_seeds: u64,
}

/// One line per suite with a comparable pair: its closest pair on the suite's first
/// per-unit metric and what detecting `target` at 80 % power (α 0.05, two-sided) takes.
/// `seeds_of(suite)` gives the seeds the grid has for a suite. Pairs without a clustered
/// SE (one task) or with an SE of 0 (identical answers) cannot be extrapolated and are
/// left out.
#[must_use]
pub fn power_needs(rows: &[Comparison], target: f64, seeds_of: &dyn Fn(&str) -> u64) -> Vec<PowerNeed> {
    let mut suites: Vec<&str> = Vec::new();
    for c in rows {
        if !suites.contains(&c.suite.as_str()) {
            suites.push(&c.suite);
        }
    }
    let mut out = Vec::new();
    for suite in suites {
        let Some(metric) = rows.iter().find(|c| c.suite == suite).map(|c| c.metric.as_str()) else { continue };
        let closest = rows
            .iter()
            .filter(|c| c.suite == suite && c.metric == metric)
            .filter_map(|c| Some((c, c.diff?, c.se.filter(|s| *s > 0.0)?)))
            .min_by(|x, y| x.1.abs().total_cmp(&y.1.abs()));
        let Some((c, diff, se)) = closest else { continue };
        let factor = (MDE_FACTOR * se / target).powi(2);
        let seeds = seeds_of(suite);
        #[expect(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "unit and seed counts are far below 2^52")]
        let scale = |n: u64| (n as f64 * factor).ceil() as u64;
        let (units_needed, seeds_needed) = (scale(c.n_pairs), scale(seeds));
        out.push(PowerNeed {
            suite: suite.to_owned(),
            metric: metric.to_owned(),
            model_a: c.model_a.clone(),
            model_b: c.model_b.clone(),
            diff,
            se,
            n_pairs: c.n_pairs,
            clusters: c.clusters,
            seeds,
            mde: MDE_FACTOR * se,
            target,
            units_needed,
            seeds_needed,
            more_units: units_needed.saturating_sub(c.n_pairs),
            more_seeds: seeds_needed.saturating_sub(seeds),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(a: &str, b: &str, diff: f64, se: f64) -> Comparison {
        Comparison {
            suite: "bbeh".into(),
            metric: "correct".into(),
            model_a: a.into(),
            model_b: b.into(),
            n_pairs: 400,
            clusters: 20,
            mean_a: None,
            mean_b: None,
            diff: Some(diff),
            se: Some(se),
            ci_low: None,
            ci_high: None,
            p_value: None,
            p_holm: None,
            mcnemar_p: None,
            mde: Some(MDE_FACTOR * se),
            se_level: "task".into(),
        }
    }

    #[test]
    fn the_closest_pair_with_an_se_sets_the_size() {
        // The twins (diff 0, SE 0) carry no information; a–c is closer than a–b.
        let rows = [pair("a", "b", 0.2, 0.05), pair("a", "c", -0.01, 0.02), pair("a", "twin", 0.0, 0.0)];
        let need = &power_needs(&rows, 0.03, &|_| 2)[0];
        assert_eq!((need.model_a.as_str(), need.model_b.as_str()), ("a", "c"));
        // MDE now 2.8 · 0.02 = 0.056: (0.056 / 0.03)² = 3.484 × the units (1,393.8) and seeds (6.97).
        assert_eq!((need.units_needed, need.more_units, need.seeds_needed, need.more_seeds), (1394, 994, 7, 5));
        // A target above the MDE needs nothing more.
        let need = &power_needs(&rows, 0.1, &|_| 2)[0];
        assert_eq!((need.more_units, need.more_seeds), (0, 0));
        assert!(power_needs(&rows[2..], 0.1, &|_| 2).is_empty(), "identical models cannot be extrapolated");
    }
}
