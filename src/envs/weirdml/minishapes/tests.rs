//! Pinned outputs of spec §6.3 (PRNG spot values, sample spot values, class counts, file
//! sizes and sha256) and the exact §6.4 accuracies recomputed in Rust from the generated data.

use sha2::{Digest, Sha256};

use super::*;

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn splitmix_spot_values() {
    assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    let mut r = SplitMix64::new(42u64 << 32);
    assert_eq!(42u64 << 32, 180_388_626_432);
    assert_eq!(r.next_u64(), 16_890_718_455_390_265_275);
    assert_eq!(r.next_u64(), 4_978_774_168_561_202_140);
    assert_eq!(r.next_u64(), 8_908_299_512_895_866_473);
}

#[test]
fn sample_spot_values() {
    let s = sample(42, Split::Train, 0).expect("sample");
    assert_eq!((s.label, s.k), (0, 26));
    let want = [
        (0.366_487_145_423_889_16, 0.565_620_839_595_794_7),
        (0.074_557_296_931_743_62, 0.211_443_543_434_143_07),
        (0.323_599_159_717_559_8, 0.736_491_560_935_974_1),
    ];
    for (p, (x, y)) in s.points.iter().zip(want) {
        assert_eq!((f64::from(p[0]), f64::from(p[1])), (x, y));
    }
    let s = sample(42, Split::Train, 1).expect("sample");
    assert_eq!((s.label, s.k), (1, 33));
    assert_eq!((f64::from(s.points[0][0]), f64::from(s.points[0][1])), (0.131_785_571_575_164_8, 0.883_963_167_667_388_9));
    let s = sample(42, Split::Test, 0).expect("sample");
    assert_eq!((s.label, s.k), (2, 43));
    assert_eq!((f64::from(s.points[0][0]), f64::from(s.points[0][1])), (0.707_848_608_493_804_9, 0.433_952_599_763_870_24));
}

#[test]
fn samples_are_independent_of_n_and_index_is_bounded() {
    let small = MiniShapes { train_n: 3, ..MiniShapes::default() }.generate(Split::Train).expect("gen");
    let big = MiniShapes::default().generate(Split::Train).expect("gen");
    assert_eq!(small[..], big[..3]);
    assert!(matches!(sample(42, Split::Train, 1 << 24), Err(MiniShapesError::IndexTooLarge(_))));
}

#[test]
fn class_counts() {
    let count = |split| {
        let mut c = [0; 3];
        for s in MiniShapes::default().generate(split).expect("gen") {
            c[usize::from(s.label)] += 1;
        }
        c
    };
    assert_eq!(count(Split::Train), [129, 145, 126]);
    assert_eq!(count(Split::Test), [134, 134, 132]);
}

#[test]
fn pinned_file_sizes_and_hashes() {
    let f = MiniShapes::default().files().expect("files");
    let table = [
        (&f.train_data, 204_928, "e5725b710b75c5f5a5c2a58bd4df4f34f933e275a8787b840438d4bcf3e9416d"),
        (&f.train_labels, 3_328, "0179107eeae7ed1b21d6ccb44954f723350a8f51eccc7d18bb50c5b80be2e655"),
        (&f.test_data, 204_928, "2ab225dcc2f26e2d6cad9efd0f382af7ac41980c3b079ab46dbc222ee8f6da98"),
        (&f.test_labels, 3_328, "4b5c735a3db34805573237ef2d9fa2c3a4f2cf38929fa907fc21d4dc002c66ba"),
    ];
    for (bytes, len, hash) in table {
        assert_eq!(bytes.len(), len);
        assert_eq!(sha256_hex(bytes), hash);
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 118, "header length");
    }
    let labels = npy::read_int(&f.test_labels).expect("labels parse back");
    assert_eq!(labels.shape, vec![400]);
}

#[test]
fn write_produces_a_valid_manifest_with_hidden_labels_outside_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let task = MiniShapes::default().write(dir.path()).expect("write");
    task.validate().expect("valid manifest");
    let bytes = std::fs::read(&task.labels_path).expect("labels");
    assert_eq!(sha256_hex(&bytes), "4b5c735a3db34805573237ef2d9fa2c3a4f2cf38929fa907fc21d4dc002c66ba");
    let reread = TaskManifest::from_path(&dir.path().join("task.json")).expect("reload");
    assert_eq!(reread, task);
}

/// Distances of a sample's points to the centre, in f64 from the f32 data (§6.4).
fn distances(s: &Sample) -> Vec<f64> {
    s.points
        .iter()
        .map(|p| {
            let dx = f64::from(p[0]) - 0.5;
            let dy = f64::from(p[1]) - 0.5;
            (dx * dx + dy * dy).sqrt()
        })
        .collect()
}

fn argmin(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x < v[best] {
            best = i;
        }
    }
    best
}

fn accuracy(pred: &[usize], samples: &[Sample]) -> f64 {
    let ok = pred.iter().zip(samples).filter(|(p, s)| **p == usize::from(s.label)).count();
    ok as f64 / samples.len() as f64
}

/// Rust re-implementation of each §6.4 solution: (test accuracy, train accuracy).
fn solve(sol: Solution, train: &[Sample], test: &[Sample]) -> (f64, f64) {
    match sol {
        Solution::Majority => {
            let mut c = [0; 3];
            train.iter().for_each(|s| c[usize::from(s.label)] += 1);
            let m = argmin(&c.map(|x: i32| -f64::from(x)));
            (accuracy(&vec![m; test.len()], test), accuracy(&vec![m; train.len()], train))
        }
        Solution::Weak => {
            let feat = |s: &Sample| {
                let d = distances(s);
                let m = d.iter().sum::<f64>() / 64.0;
                (d.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 64.0).sqrt()
            };
            let cent: Vec<f64> = (0..3u8)
                .map(|c| {
                    let f: Vec<f64> = train.iter().filter(|s| s.label == c).map(feat).collect();
                    f.iter().sum::<f64>() / f.len() as f64
                })
                .collect();
            let pred = |set: &[Sample]| -> Vec<usize> { set.iter().map(|s| argmin(&cent.iter().map(|c| (feat(s) - c).abs()).collect::<Vec<_>>())).collect() };
            (accuracy(&pred(test), test), accuracy(&pred(train), train))
        }
        _ => {
            let (bins, width) = sol.histogram().expect("histogram solution");
            let hist = |s: &Sample| {
                let mut h = vec![0.0; bins];
                for d in distances(s) {
                    h[((d / width).floor() as usize).min(bins - 1)] += 1.0;
                }
                h.iter().map(|c| c / 64.0).collect::<Vec<f64>>()
            };
            let means: Vec<Vec<f64>> = (0..3u8)
                .map(|c| {
                    let hs: Vec<Vec<f64>> = train.iter().filter(|s| s.label == c).map(hist).collect();
                    (0..bins).map(|b| hs.iter().map(|h| h[b]).sum::<f64>() / hs.len() as f64).collect()
                })
                .collect();
            let pred = |set: &[Sample]| -> Vec<usize> {
                set.iter()
                    .map(|s| {
                        let h = hist(s);
                        let d: Vec<f64> = means.iter().map(|m| m.iter().zip(&h).map(|(a, b)| (b - a) * (b - a)).sum()).collect();
                        argmin(&d)
                    })
                    .collect()
            };
            (accuracy(&pred(test), test), accuracy(&pred(train), train))
        }
    }
}

#[test]
fn reference_solution_accuracies_are_exact() {
    let g = MiniShapes::default();
    let train = g.generate(Split::Train).expect("gen");
    let test = g.generate(Split::Test).expect("gen");
    for sol in Solution::ALL {
        let (te, tr) = solve(sol, &train, &test);
        assert_eq!(te, sol.test_accuracy(), "{sol:?} test accuracy");
        match sol {
            Solution::Weak => assert_eq!(tr, 0.52),
            Solution::Reference => assert_eq!(tr, 0.9925),
            _ => {}
        }
    }
}

#[test]
fn scripts_are_self_contained_python() {
    for sol in Solution::ALL {
        let s = sol.script();
        assert!(s.contains("results/test_preds.txt") && !s.contains("__BINS__") && !s.contains("__WIDTH__"));
    }
    assert!(Solution::Reference.script().contains("BINS = 24\nWIDTH = 0.03\n"));
}
