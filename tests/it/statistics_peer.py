"""Independent peer for evalgrid's statistics (spec: statistics.md).

Recomputes every clustered SE, pooled CI, paired difference, p-value, Holm adjustment,
McNemar p and MDE of a report from its items.csv with statsmodels, scipy and (when
installed) Inspect AI, and checks the bootstrap interval of the BBEH harmonic mean with
an independent numpy bootstrap. Usage: statistics_peer.py REPORT_DIR. Exit 0 = all agree;
exit 3 = a peer library is missing (the Rust test prints SKIPPED).
"""
import math
import sys

try:
    import numpy as np
    import pandas as pd
    import statsmodels.api as sm
    from scipy.stats import binomtest, norm
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests
except ImportError as e:  # pragma: no cover
    print(f"missing: {e}")
    sys.exit(3)

# Per-unit metric -> (summary column that is its mean, its pooled CI columns).
SUMMARY = {
    "correct": ("accuracy", ("ci_low", "ci_high")),
    "score": ("mean_score", ("mean_score_ci_low", "mean_score_ci_high")),
    "success": ("success_rate", None),
    "solved": ("solve_rate", ("ci_low", "ci_high")),
    "accuracy": ("task_score", ("task_score_ci_low", "task_score_ci_high")),
}
KEYS = ["task", "seed", "item"]
checked = {"se": 0, "inspect_se": 0, "ci": 0, "pairs": 0, "mcnemar": 0, "holm": 0, "bootstrap": 0}
failures = []


def close(got, want, what, rel=1e-9, abs_=1e-12):
    if isinstance(got, float) and math.isnan(got) and math.isnan(want):
        return
    if not (abs(got - want) <= max(rel * abs(want), abs_)):
        failures.append(f"{what}: evalgrid {got!r}, peer {want!r}")


def ols_cluster_se(values, groups):
    """statsmodels' cluster-robust SE of a mean: OLS on a constant."""
    values = np.asarray(values, dtype=float)
    if len(set(groups)) < 2:
        return float("nan")
    codes = pd.factorize(pd.Series(groups))[0]
    fit = sm.OLS(values, np.ones(len(values))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    return float(fit.bse[0])


def inspect_se(values, groups):
    """Inspect AI's stderr(cluster=...) on the same values, or None without Inspect."""
    try:
        from inspect_ai.scorer import SampleScore, Score, stderr
    except Exception:
        return None
    scores = [SampleScore(score=Score(value=float(v)), sample_id=i, sample_metadata={"task": g}) for i, (v, g) in enumerate(zip(values, groups))]
    return float(stderr(cluster="task")(scores))


def main(report):
    items = pd.read_csv(f"{report}/items.csv", keep_default_na=True)
    summary = pd.read_csv(f"{report}/summary.csv")
    comparisons = pd.read_csv(f"{report}/comparisons.csv")
    metrics = [c for c in items.columns if c not in ("suite", "model") + tuple(KEYS)]

    # Pooled rows: clustered SE (statsmodels and Inspect) and the CI built from it.
    for (suite, model), rows in items.groupby(["suite", "model"], sort=False):
        pooled = summary[(summary.suite == suite) & (summary.model == model) & (summary.task == "*")]
        assert len(pooled) == 1, (suite, model)
        pooled = pooled.iloc[0]
        for m in metrics:
            if m not in SUMMARY or SUMMARY[m][0] + "_se" not in summary.columns:
                continue
            col, ci = SUMMARY[m]
            data = rows[rows[m].notna()]
            if data.empty or pd.isna(pooled.get(col)):
                continue
            want = ols_cluster_se(data[m], list(data.task))
            got = pooled[col + "_se"]
            if math.isnan(want):
                if not pd.isna(got):
                    failures.append(f"{suite}/{model}/{col}_se: one cluster must give no SE, got {got}")
                continue
            close(float(got), want, f"{suite}/{model}/{col}_se vs statsmodels")
            checked["se"] += 1
            by_inspect = inspect_se(list(data[m]), list(data.task))
            if by_inspect is not None:
                close(float(got), by_inspect, f"{suite}/{model}/{col}_se vs inspect_ai")
                checked["inspect_se"] += 1
            close(float(pooled[col]), float(data[m].mean()), f"{suite}/{model}/{col} mean")
            if ci and ci[0] in summary.columns and pd.notna(pooled[ci[0]]):
                close(float(pooled[ci[0]]), float(pooled[col]) - 1.96 * want, f"{suite}/{model}/{ci[0]}")
                close(float(pooled[ci[1]]), float(pooled[col]) + 1.96 * want, f"{suite}/{model}/{ci[1]}")
                checked["ci"] += 1

    # Paired comparisons.
    for _, c in comparisons.iterrows():
        sub = items[items.suite == c.suite]
        a = sub[sub.model == c.model_a][KEYS + [c.metric]].dropna()
        b = sub[sub.model == c.model_b][KEYS + [c.metric]].dropna()
        pair = a.merge(b, on=KEYS, suffixes=("_a", "_b"))
        what = f"{c.suite}/{c.metric}/{c.model_a}-{c.model_b}"
        if int(c.n_pairs) != len(pair) or int(c.clusters) != pair.task.nunique():
            failures.append(f"{what}: n_pairs/clusters {c.n_pairs}/{c.clusters}, peer {len(pair)}/{pair.task.nunique()}")
            continue
        d = pair[c.metric + "_a"] - pair[c.metric + "_b"]
        close(c.mean_a, pair[c.metric + "_a"].mean(), what + " mean_a")
        close(c.mean_b, pair[c.metric + "_b"].mean(), what + " mean_b")
        close(c["diff"], d.mean(), what + " diff")
        se = ols_cluster_se(d, list(pair.task))
        if math.isnan(se) or pair.task.nunique() < 2:
            # Fewer than two task clusters: the item-level paired SE stands in (issue 34.7).
            if len(d) < 2:
                if pd.notna(c.se):
                    failures.append(f"{what}: one unit must give no SE")
                continue
            se = float(d.std(ddof=1) / math.sqrt(len(d)))
            if c.se_level != "item":
                failures.append(f"{what}: se_level {c.se_level!r}, want 'item' with one cluster")
        elif c.se_level != "task":
            failures.append(f"{what}: se_level {c.se_level!r}, want 'task'")
        close(c.se, se, what + " se")
        close(c.ci_low, d.mean() - 1.96 * se, what + " ci_low")
        close(c.ci_high, d.mean() + 1.96 * se, what + " ci_high")
        close(c.mde, 2.8 * se, what + " mde")
        if se > 0:
            p = float(2 * norm.sf(abs(d.mean()) / se))
        else:
            p = 1.0 if d.mean() == 0 else 0.0
        close(c.p_value, p, what + " p_value", rel=1e-9, abs_=1e-300)
        checked["pairs"] += 1
        binary = set(pd.unique(pd.concat([pair[c.metric + "_a"], pair[c.metric + "_b"]]))) <= {0.0, 1.0}
        if c.metric in ("correct", "success", "solved") and binary:
            b10 = int(((pair[c.metric + "_a"] == 1) & (pair[c.metric + "_b"] == 0)).sum())
            b01 = int(((pair[c.metric + "_a"] == 0) & (pair[c.metric + "_b"] == 1)).sum())
            by_scipy = 1.0 if b01 + b10 == 0 else binomtest(b01, b01 + b10, 0.5).pvalue
            by_statsmodels = mcnemar([[0, b10], [b01, 0]], exact=True).pvalue if b01 + b10 else 1.0
            close(c.mcnemar_p, by_scipy, what + " mcnemar vs scipy binomtest", rel=1e-9, abs_=1e-300)
            close(c.mcnemar_p, min(1.0, by_statsmodels), what + " mcnemar vs statsmodels", rel=1e-9, abs_=1e-300)
            checked["mcnemar"] += 1
        elif pd.notna(c.mcnemar_p) and c.metric not in ("correct", "success", "solved"):
            failures.append(f"{what}: McNemar on a non-binary metric")

    # Holm within each (suite, metric) family.
    for _, fam in comparisons.groupby(["suite", "metric"]):
        fam = fam[fam.p_value.notna()]
        if fam.empty:
            continue
        adjusted = multipletests(fam.p_value.to_numpy(), method="holm")[1]
        for got, want, (_, r) in zip(fam.p_holm, adjusted, fam.iterrows()):
            close(float(got), float(want), f"{r.suite}/{r.metric}/{r.model_a}-{r.model_b} p_holm", abs_=1e-300)
            checked["holm"] += 1

    # BBEH harmonic mean: an independent stratified bootstrap agrees on the interval.
    if "harmonic_mean_ci_low" in summary.columns:
        rng = np.random.default_rng(12345)
        for _, r in summary[(summary.task == "*") & summary.harmonic_mean_ci_low.notna()].iterrows():
            units = items[(items.suite == r.suite) & (items.model == r.model)]
            tasks = [g["correct"].to_numpy() for _, g in units.groupby("task")]
            def hm(accs):
                return len(accs) / sum(1.0 / (a + 1.0) for a in accs)
            close(float(r.harmonic_mean), hm([100 * t.mean() for t in tasks]), f"{r.suite}/{r.model} harmonic_mean", rel=1e-9)
            draws = [hm([100 * rng.choice(t, size=len(t), replace=True).mean() for t in tasks]) for _ in range(2000)]
            lo, hi = np.percentile(draws, [2.5, 97.5])
            width = max(hi - lo, 1e-9)
            for got, want, name in ((r.harmonic_mean_ci_low, lo, "low"), (r.harmonic_mean_ci_high, hi, "high")):
                if abs(got - want) > 0.15 * width + 1e-9:
                    failures.append(f"{r.suite}/{r.model} harmonic_mean_ci_{name}: evalgrid {got}, numpy bootstrap {want} (width {width})")
            checked["bootstrap"] += 1

    print("checked", checked)
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1])
