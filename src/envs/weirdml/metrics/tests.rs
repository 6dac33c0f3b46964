//! Metrics: the §5.2 worked example, brute-force and pass@k property tests, and the
//! aggregate definitions of §5.1.

use proptest::prelude::*;

use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * (1.0 + a.abs().max(b.abs()))
}

/// Average of max over all k-subsets, by enumeration.
fn brute_force(xs: &[f64], k: usize) -> f64 {
    let n = xs.len();
    let (mut sum, mut count) = (0.0, 0u64);
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != k {
            continue;
        }
        let m = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| xs[i]).fold(f64::NEG_INFINITY, f64::max);
        sum += m;
        count += 1;
    }
    sum / count as f64
}

/// The biased plug-in estimator the spec warns against (for the table's last column).
fn plug_in(xs: &[f64], k: usize) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    s.iter().enumerate().map(|(i, x)| x * (((i + 1) as f64 / n).powi(k as i32) - (i as f64 / n).powi(k as i32))).sum()
}

#[test]
fn worked_example() {
    let x = [0.90, 0.00, 0.55, 0.40, 0.55]; // unsorted on purpose
    let unbiased = [0.48, 0.675, 0.76, 0.83, 0.90];
    let plug = [0.48, 0.636, 0.708, 0.75216, 0.783648];
    let weights: [&[f64]; 5] =
        [&[0.2, 0.2, 0.2, 0.2, 0.2], &[0.0, 0.1, 0.2, 0.3, 0.4], &[0.0, 0.0, 0.1, 0.3, 0.6], &[0.0, 0.0, 0.0, 0.2, 0.8], &[0.0, 0.0, 0.0, 0.0, 1.0]];
    for k in 1..=5 {
        let est = max_at_k(&x, k).expect("defined");
        assert!(close(est, unbiased[k - 1]), "k={k}: {est}");
        assert!(close(est, brute_force(&x, k)), "k={k} brute force");
        assert!(close(plug_in(&x, k), plug[k - 1]), "plug-in k={k}");
        let w = max_at_k_weights(5, k).expect("weights");
        assert!(w.iter().zip(weights[k - 1]).all(|(a, b)| close(*a, *b)), "weights k={k}: {w:?}");
    }
    let passes = [0.4, 0.7, 0.9, 1.0, 1.0];
    for k in 1..=5 {
        let est = max_at_k(&[1.0, 0.0, 0.0, 1.0, 0.0], k).expect("defined");
        assert!(close(est, passes[k - 1]) && close(est, pass_at_k(5, 2, k).expect("defined")), "k={k}");
    }
    assert_eq!(max_at_k(&x, 0), None);
    assert_eq!(max_at_k(&x, 6), None);
    assert_eq!(max_at_k(&[f64::NAN], 1), None);
}

#[test]
fn weights_do_not_overflow_for_large_n() {
    let w = max_at_k_weights(100_000, 50).expect("weights");
    assert!(close(w.iter().sum::<f64>(), 1.0));
    assert!(w.iter().all(|x| x.is_finite() && *x >= 0.0));
}

proptest! {
    #[test]
    fn estimator_equals_brute_force(xs in prop::collection::vec(prop_oneof![0.0..1.0f64, Just(0.5), Just(0.0)], 1..11), kk in 0usize..100) {
        let k = 1 + kk % xs.len();
        let est = max_at_k(&xs, k).expect("defined");
        prop_assert!((est - brute_force(&xs, k)).abs() < 1e-9, "{} vs {}", est, brute_force(&xs, k));
    }

    #[test]
    fn estimator_equals_pass_at_k_on_binary(bits in prop::collection::vec(any::<bool>(), 1..40), kk in 0usize..100) {
        let n = bits.len();
        let k = 1 + kk % n;
        let xs: Vec<f64> = bits.iter().map(|&b| if b { 1.0 } else { 0.0 }).collect();
        let c = bits.iter().filter(|&&b| b).count();
        let est = max_at_k(&xs, k).expect("defined");
        prop_assert!((est - pass_at_k(n, c, k).expect("defined")).abs() < 1e-9);
    }
}

#[test]
fn aggregates() {
    let runs = vec![vec![0.0, 0.0, 0.0, 0.535, 0.0], vec![0.2, 0.1], vec![]];
    assert_eq!(run_accuracy(&runs[0]), Some(0.535));
    assert_eq!(run_accuracy(&[]), None);
    assert_eq!(best_so_far(&runs[0]), vec![0.0, 0.0, 0.0, 0.535, 0.535]);
    assert_eq!(task_score(&[0.535, 0.995]), Some(0.765));
    assert!(close(accuracy_after_k(&runs, 1).expect("k=1"), 0.2 / 3.0));
    assert!(close(accuracy_after_k(&runs, 5).expect("k=5"), (0.535 + 0.2) / 3.0), "carry forward");
    let failed = vec![vec![true, true, true, false, true], vec![false, true]];
    assert_eq!(failure_rate(&failed), Some(5.0 / 7.0));
    assert_eq!(failure_rate(&[]), None);
    assert_eq!(per_run_failure_rate(&[vec![0.0, 0.0], vec![0.3]]), Some(0.5));
    let m = model_average(&[0.5, 0.7], Some(3));
    assert_eq!((m.n_tasks, m.complete), (2, false));
    assert!(close(m.mean.expect("mean"), 0.6));
    assert!(model_average(&[0.5], None).complete);
}

#[test]
fn standard_error_formula() {
    // One task, runs (0, 1): var ddof0 = 0.25, /n = 0.125 → sqrt = 0.35355...
    let se0 = standard_error(&[vec![0.0, 1.0]], 0).expect("se");
    assert!(close(se0, 0.125f64.sqrt()));
    let se1 = standard_error(&[vec![0.0, 1.0], vec![0.5, 0.5]], 1).expect("se");
    assert!(close(se1, 0.25f64.sqrt() / 2.0));
    assert_eq!(standard_error(&[vec![0.3]], 1), None);
}
