//! Paired model comparisons (`comparisons.csv`): both models answered the same units, so
//! the difference is taken unit by unit, with a clustered SE, a normal p-value adjusted by
//! Holm within each (suite, metric) family, McNemar's exact test for binary units and the
//! minimum detectable difference at 80 % power (spec: `statistics.md`).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::cluster::{Z95, cluster_count, clustered_se};
use super::units::SuiteUnits;

/// z for 80 % power at two-sided α = 0.05, as the spec gives it: 1.96 + 0.84.
pub const MDE_FACTOR: f64 = 1.96 + 0.84;

/// One row of `comparisons.csv`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// Suite.
    pub suite: String,
    /// Per-unit metric.
    pub metric: String,
    /// The model that comes first in the pipeline.
    pub model_a: String,
    /// The other model.
    pub model_b: String,
    /// Units both models have a value for.
    pub n_pairs: u64,
    /// Tasks among those units.
    pub clusters: u64,
    /// Mean of model A over the common units.
    pub mean_a: Option<f64>,
    /// Mean of model B over the common units.
    pub mean_b: Option<f64>,
    /// Mean of `a − b`.
    pub diff: Option<f64>,
    /// Clustered SE of `diff` (none with one task).
    pub se: Option<f64>,
    /// `diff − 1.96·se`.
    pub ci_low: Option<f64>,
    /// `diff + 1.96·se`.
    pub ci_high: Option<f64>,
    /// Two-sided normal p-value of `diff / se`.
    pub p_value: Option<f64>,
    /// Holm-adjusted within the (suite, metric) family.
    pub p_holm: Option<f64>,
    /// McNemar's exact p on the discordant pairs (binary metrics; ignores clusters).
    pub mcnemar_p: Option<f64>,
    /// Minimum detectable difference at 80 % power: `(1.96 + 0.84)·se`.
    pub mde: Option<f64>,
    /// How `se` was taken: `task` (clustered by task), `item` (fewer than two task
    /// clusters: the item-level paired SE, items treated as independent), empty when none.
    #[serde(default)]
    pub se_level: String,
}

/// A unit's pairing key `(task, seed, item)` and its value.
type Keyed = ((u32, u64, u64), f64);

/// A suite's best model on its first per-unit metric: `(metric, best, [(model, tied, mde)])`.
pub type Ties<'c> = (&'c str, &'c str, Vec<(&'c str, bool, Option<f64>)>);

/// The header of `comparisons.csv` (an interface: checks recompute every figure from it).
pub const COMPARISON_COLUMNS: &str = "suite,metric,model_a,model_b,n_pairs,clusters,mean_a,mean_b,diff,se,ci_low,ci_high,p_value,p_holm,mcnemar_p,mde,se_level";

/// Every pair of models of `units`, for every unit metric, in pipeline order.
#[must_use]
pub fn compare(units: &SuiteUnits) -> Vec<Comparison> {
    let mut models: Vec<u32> = units.rows.iter().map(|r| r.model_index).collect();
    models.sort_unstable();
    models.dedup();
    let mut out = Vec::new();
    for (mi, metric) in units.metrics.iter().enumerate() {
        // Each model's units with a value, sorted by (task, seed, item) for a merge join.
        let keyed: Vec<Vec<Keyed>> = models
            .iter()
            .map(|m| {
                let mut v: Vec<_> =
                    units.rows.iter().filter(|r| r.model_index == *m).filter_map(|r| Some(((r.task_index, r.seed, r.item), r.values[mi]?))).collect();
                v.sort_by_key(|x| x.0);
                v
            })
            .collect();
        let first = out.len();
        for a in 0..models.len() {
            for b in a + 1..models.len() {
                let pairs = common(&keyed[a], &keyed[b]);
                let mut row = pair_row(&pairs, metric.binary);
                row.suite.clone_from(&units.suite);
                row.metric.clone_from(&metric.name);
                row.model_a.clone_from(&units.models[models[a] as usize]);
                row.model_b.clone_from(&units.models[models[b] as usize]);
                out.push(row);
            }
        }
        let adjusted = holm(&out[first..].iter().map(|c| c.p_value).collect::<Vec<_>>());
        for (c, p) in out[first..].iter_mut().zip(adjusted) {
            c.p_holm = p;
        }
    }
    out
}

/// `(task, a, b)` for the units both sorted lists hold.
fn common(a: &[Keyed], b: &[Keyed]) -> Vec<(u32, f64, f64)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push((a[i].0.0, a[i].1, b[j].1));
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// The figures of one pair from its common units `(cluster, a, b)`, names left empty:
/// what `comparisons.csv` holds for two models, and `evalgrid diff` for now against before.
#[must_use]
pub fn paired(pairs: &[(u32, f64, f64)], binary: bool) -> Comparison {
    pair_row(pairs, binary)
}

/// The figures of one pair from its common units (names left empty).
fn pair_row(pairs: &[(u32, f64, f64)], binary: bool) -> Comparison {
    let n = pairs.len();
    #[expect(clippy::cast_precision_loss, reason = "unit counts are far below 2^52")]
    let nf = n as f64;
    let mean = |f: &dyn Fn(&(u32, f64, f64)) -> f64| (n > 0).then(|| pairs.iter().map(f).sum::<f64>() / nf);
    let d: Vec<(u32, f64)> = pairs.iter().map(|(c, a, b)| (*c, a - b)).collect();
    let diff = mean(&|p| p.1 - p.2);
    // Fewer than two task clusters leave no clustered SE: fall back to the item-level
    // paired SE (each unit its own cluster, `s/√n`) and say so in `se_level`.
    let (se, se_level) = match clustered_se(&d) {
        Some(se) => (Some(se), "task"),
        None => {
            let items: Vec<(u32, f64)> = d.iter().enumerate().map(|(i, (_, x))| (u32::try_from(i).unwrap_or(u32::MAX), *x)).collect();
            let se = if n >= 2 { clustered_se(&items) } else { None };
            (se, if se.is_some() { "item" } else { "" })
        }
    };
    let p_value = diff.zip(se).map(|(diff, se)| {
        if se > 0.0 {
            two_sided_p(diff / se)
        } else if diff == 0.0 {
            1.0
        } else {
            0.0
        }
    });
    let mcnemar_p = (binary && n > 0).then(|| {
        let b10 = pairs.iter().filter(|(_, a, b)| *a > *b).count() as u64;
        let b01 = pairs.iter().filter(|(_, a, b)| *a < *b).count() as u64;
        mcnemar_exact(b01, b10)
    });
    Comparison {
        suite: String::new(),
        metric: String::new(),
        model_a: String::new(),
        model_b: String::new(),
        n_pairs: n as u64,
        clusters: cluster_count(&d) as u64,
        mean_a: mean(&|p| p.1),
        mean_b: mean(&|p| p.2),
        diff,
        se,
        ci_low: diff.zip(se).map(|(d, s)| d - Z95 * s),
        ci_high: diff.zip(se).map(|(d, s)| d + Z95 * s),
        p_value,
        p_holm: None,
        mcnemar_p,
        mde: se.map(|s| MDE_FACTOR * s),
        se_level: se_level.to_owned(),
    }
}

/// Which models cannot be told apart from the best on a suite's first per-unit metric
/// ([`indistinguishable`]), with the minimum detectable difference of each pair:
/// `(metric, best, [(model, tied, mde)])`, or `None` with fewer than two models or when
/// every model has the same mean (then all are tied and none is best).
#[must_use]
pub fn ties_with_best<'c>(rows: &'c [Comparison], suite: &str) -> Option<Ties<'c>> {
    let metric = rows.iter().find(|c| c.suite == suite)?.metric.as_str();
    let family: Vec<&Comparison> = rows.iter().filter(|c| c.suite == suite && c.metric == metric).collect();
    let mut best: Option<(&str, f64)> = None;
    for c in &family {
        for (model, mean) in [(c.model_a.as_str(), c.mean_a), (c.model_b.as_str(), c.mean_b)] {
            if let Some(mean) = mean
                && best.is_none_or(|(_, m)| mean > m)
            {
                best = Some((model, mean));
            }
        }
    }
    let (best, top) = best?;
    // Equal means are ties: when every model has the best mean, none is best (all 0 %).
    let all_equal = family.iter().all(|c| c.mean_a.is_none_or(|m| m == top) && c.mean_b.is_none_or(|m| m == top));
    if all_equal {
        return None;
    }
    let others = family
        .iter()
        .filter_map(|c| match (c.model_a == best, c.model_b == best) {
            (true, _) => Some((c.model_b.as_str(), c.mean_b, *c)),
            (_, true) => Some((c.model_a.as_str(), c.mean_a, *c)),
            _ => None,
        })
        .map(|(model, mean, c)| (model, indistinguishable(c, mean == Some(top)), c.mde))
        .collect();
    Some((metric, best, others))
}

/// Whether a pair cannot be told apart: equal means, a Holm-adjusted p ≥ 0.05 (clustered by
/// task, or item-level with fewer than two task clusters), McNemar's p ≥ 0.05 where there is
/// no Holm p, or no p-value at all (a pair without one is "not distinguishable", never "not
/// tied").
#[must_use]
pub fn indistinguishable(c: &Comparison, equal_means: bool) -> bool {
    equal_means || c.p_holm.or(c.mcnemar_p).is_none_or(|p| p >= 0.05)
}

/// Two-sided normal p-value `2·(1 − Φ(|z|)) = erfc(|z|/√2)`.
#[must_use]
pub fn two_sided_p(z: f64) -> f64 {
    erfc(z.abs() / std::f64::consts::SQRT_2)
}

/// Complementary error function for `x ≥ 0` to near machine precision: the all-positive
/// series of erf below 3, Laplace's continued fraction above (std has no erf).
#[must_use]
pub fn erfc(x: f64) -> f64 {
    let x = x.abs();
    let front = (-x * x).exp() / std::f64::consts::PI.sqrt();
    if x < 3.0 {
        // erf(x) = 2/√π · e^{−x²} · Σ_n 2^n x^{2n+1} / (2n+1)!!
        let (mut term, mut sum, mut k) = (x, x, 0.0);
        while term > sum * 1e-17 {
            term *= 2.0 * x * x / (2.0 * k + 3.0);
            sum += term;
            k += 1.0;
        }
        1.0 - 2.0 * front * sum
    } else {
        // erfc(x) = e^{−x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))
        let mut f = x;
        for k in (1..=80).rev() {
            f = x + f64::from(k) / 2.0 / f;
        }
        front / f
    }
}

/// McNemar's exact test: two-sided binomial test of `b01` successes in `b01 + b10`
/// trials with p = ½ (what scipy's `binomtest` gives).
#[must_use]
pub fn mcnemar_exact(b01: u64, b10: u64) -> f64 {
    let n = b01 + b10;
    let k = b01.min(b10);
    if n == 0 || 2 * k == n {
        return 1.0;
    }
    // ln C(n, j) − n·ln 2 for j = 0..=k, summed in log space (2^−n underflows for big n).
    #[expect(clippy::cast_precision_loss, reason = "counts are far below 2^52")]
    let (nf, ln2n) = (n as f64, n as f64 * std::f64::consts::LN_2);
    let mut logs = Vec::with_capacity(usize::try_from(k).unwrap_or(0) + 1);
    let mut ln_c = 0.0;
    for j in 0..=k {
        logs.push(ln_c - ln2n);
        #[expect(clippy::cast_precision_loss, reason = "counts are far below 2^52")]
        let jf = j as f64;
        ln_c += (nf - jf).ln() - (jf + 1.0).ln();
    }
    let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tail = top.exp() * logs.iter().map(|l| (l - top).exp()).sum::<f64>();
    (2.0 * tail).min(1.0)
}

/// McNemar's mid-p: the exact two-sided p minus the probability of the observed split,
/// `2·P(X ≤ k) − P(X = k)` for `k = min(b01, b10)`, X ~ Bin(b01 + b10, ½) (less
/// conservative than the exact test; Fagerland et al. 2013).
#[must_use]
pub fn mcnemar_mid_p(b01: u64, b10: u64) -> f64 {
    let n = b01 + b10;
    let k = b01.min(b10);
    if n == 0 || 2 * k == n {
        return 1.0;
    }
    // P(X = k) = C(n, k) / 2^n, in log space; below n/2, 2·P(X ≤ k) < 1 is never capped.
    #[expect(clippy::cast_precision_loss, reason = "counts are far below 2^52")]
    let ln_point = (0..k).map(|j| ((n - j) as f64).ln() - ((j + 1) as f64).ln()).sum::<f64>() - n as f64 * std::f64::consts::LN_2;
    (mcnemar_exact(b01, b10) - ln_point.exp()).clamp(0.0, 1.0)
}

/// Holm's step-down adjustment of the p-values that are present (absent ones stay absent).
#[must_use]
pub fn holm(p: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut order: Vec<(usize, f64)> = p.iter().enumerate().filter_map(|(i, p)| Some((i, (*p)?))).collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let m = order.len();
    let mut out = vec![None; p.len()];
    let mut running: f64 = 0.0;
    for (rank, (i, p)) in order.into_iter().enumerate() {
        #[expect(clippy::cast_precision_loss, reason = "family sizes are small")]
        let factor = (m - rank) as f64;
        running = running.max((factor * p).min(1.0));
        out[i] = Some(running);
    }
    out
}

/// `comparisons.csv`: the header, then one line per comparison (empty where undefined).
#[must_use]
pub fn comparisons_csv(rows: &[Comparison]) -> String {
    let mut out = format!("{COMPARISON_COLUMNS}\n");
    // Debug keeps every digit and switches to an exponent for tiny p-values.
    let num = |v: Option<f64>| v.map(|x| format!("{x:?}")).unwrap_or_default();
    for c in rows {
        let names = [&c.suite, &c.metric, &c.model_a, &c.model_b].map(|s| crate::exhibit::csv_field(s));
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            names[0],
            names[1],
            names[2],
            names[3],
            c.n_pairs,
            c.clusters,
            num(c.mean_a),
            num(c.mean_b),
            num(c.diff),
            num(c.se),
            num(c.ci_low),
            num(c.ci_high),
            num(c.p_value),
            num(c.p_holm),
            num(c.mcnemar_p),
            num(c.mde),
            c.se_level
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_tabulated_values() {
        for (x, want) in
            [(0.0, 1.0), (0.5, 0.479_500_122_186_953_5), (1.0, 0.157_299_207_050_285_13), (3.0, 2.209_049_699_858_544e-5), (5.0, 1.537_459_794_428_035e-12)]
        {
            let got = erfc(x);
            assert!((got - want).abs() <= 1e-13 * want, "erfc({x}) = {got}, want {want}");
        }
        assert!((two_sided_p(1.96) - 0.049_995_790_296_440_94).abs() < 1e-15);
    }

    #[test]
    fn mcnemar_and_holm_on_textbook_cases() {
        // 1 vs 9 discordant: 2·(1 + 10)/1024.
        assert!((mcnemar_exact(1, 9) - 22.0 / 1024.0).abs() < 1e-15);
        assert_eq!(mcnemar_exact(4, 4), 1.0);
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(holm(&[Some(0.01), None, Some(0.04), Some(0.03)]), vec![Some(0.03), None, Some(0.06), Some(0.06)]);
    }

    #[test]
    fn mcnemar_mid_p_on_textbook_cases() {
        // 1 vs 9 discordant: 2·(1 + 10)/1024 − 10/1024.
        assert!((mcnemar_mid_p(1, 9) - 12.0 / 1024.0).abs() < 1e-15);
        assert!((mcnemar_mid_p(0, 3) - (2.0 / 8.0 - 1.0 / 8.0)).abs() < 1e-15);
        assert_eq!(mcnemar_mid_p(0, 0), 1.0);
    }

    #[test]
    fn identical_models_differ_by_zero_with_p_one() {
        let pairs: Vec<(u32, f64, f64)> = (0..6).map(|i| (i % 3, f64::from(i % 2), f64::from(i % 2))).collect();
        let c = pair_row(&pairs, true);
        assert_eq!((c.diff, c.se, c.p_value, c.mcnemar_p), (Some(0.0), Some(0.0), Some(1.0), Some(1.0)));
    }
}

#[cfg(test)]
mod ties_tests {
    use super::*;

    fn pair(a: &str, b: &str, means: (f64, f64), p_holm: Option<f64>, mcnemar_p: Option<f64>) -> Comparison {
        Comparison {
            suite: "s".into(),
            metric: "correct".into(),
            model_a: a.into(),
            model_b: b.into(),
            n_pairs: 20,
            clusters: 1,
            mean_a: Some(means.0),
            mean_b: Some(means.1),
            diff: Some(means.0 - means.1),
            se: None,
            ci_low: None,
            ci_high: None,
            p_value: None,
            p_holm,
            mcnemar_p,
            mde: None,
            se_level: String::new(),
        }
    }

    #[test]
    fn equal_means_are_ties_and_name_no_best() {
        // Issue 34: three models all at 0 % named a best and said none was tied.
        let rows = [pair("a", "b", (0.0, 0.0), None, Some(1.0)), pair("a", "c", (0.0, 0.0), None, Some(1.0)), pair("b", "c", (0.0, 0.0), None, Some(1.0))];
        assert!(ties_with_best(&rows, "s").is_none());
    }

    #[test]
    fn a_pair_without_a_p_value_is_not_distinguishable_and_mcnemar_stands_in_for_one_cluster() {
        let rows = [pair("a", "b", (0.5, 0.4), None, None), pair("a", "c", (0.5, 0.1), None, Some(0.01)), pair("a", "d", (0.5, 0.45), None, Some(0.6))];
        let (_, best, others) = ties_with_best(&rows, "s").unwrap();
        assert_eq!(best, "a");
        let tied: Vec<(&str, bool)> = others.iter().map(|o| (o.0, o.1)).collect();
        assert_eq!(tied, [("b", true), ("c", false), ("d", true)], "no p: not distinguishable; McNemar p 0.01: behind; 0.6: tied");
    }
}
