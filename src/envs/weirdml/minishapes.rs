//! "mini-shapes", the deterministic CPU stand-in task of spec §6: the normative SplitMix64
//! generator (bit-exact binary64, no FMA), `.npy` task files, the task prompt and the
//! reference solutions with their pinned accuracies (§6.4).

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::npy;
use super::task::TaskManifest;

/// Points per sample (§6.1).
pub const POINTS: usize = 64;
/// Default generator seed (§6.1).
pub const DEFAULT_SEED: u32 = 42;
/// Default train and test sizes (§6.1).
pub const DEFAULT_N: u32 = 400;

pub use crate::envs::splitmix::SplitMix64;

/// Train or test split; its number is part of each sample's stream id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Split 0.
    Train,
    /// Split 1.
    Test,
}

impl Split {
    fn id(self) -> u64 {
        match self {
            Split::Train => 0,
            Split::Test => 1,
        }
    }
}

/// One generated sample: label, number of outline points, float32 points after shuffling.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Class: 0 circle, 1 square, 2 triangle.
    pub label: u8,
    /// Number of outline points (16..=48).
    pub k: u32,
    /// The 64 points, (x, y), already shuffled and rounded to f32.
    pub points: [[f32; 2]; POINTS],
}

/// Generator or file-writing failures.
#[derive(Debug, Error)]
pub enum MiniShapesError {
    /// Sample index does not fit the 24-bit stream-id field.
    #[error("sample index {0} does not fit in 24 bits")]
    IndexTooLarge(u32),
    /// Writing a task file failed.
    #[error("writing {path}: {source}")]
    Io {
        /// File or directory being written.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
}

const SQUARE: [(f64, f64); 4] = [(0.29, 0.29), (0.71, 0.29), (0.71, 0.71), (0.29, 0.71)];
const TRIANGLE: [(f64, f64); 3] = [(0.5, 0.8), (0.240_192_378_864_668_43, 0.35), (0.759_807_621_135_331_6, 0.35)];

fn polygon_point(rng: &mut SplitMix64, v: &[(f64, f64)]) -> (f64, f64) {
    let count = v.len();
    let e = usize::try_from(rng.below(count as u64)).unwrap_or(0);
    let t = rng.uniform();
    let (ax, ay) = v[e];
    let (bx, by) = v[(e + 1) % count];
    (ax + t * (bx - ax), ay + t * (by - ay))
}

fn circle_point(rng: &mut SplitMix64) -> (f64, f64) {
    loop {
        let u = rng.uniform();
        let v = rng.uniform();
        let x = 2.0 * u - 1.0;
        let y = 2.0 * v - 1.0;
        let xx = x * x;
        let yy = y * y;
        let r2 = xx + yy;
        if r2 > 0.0 && r2 <= 1.0 {
            let r = r2.sqrt();
            return (0.5 + 0.3 * (x / r), 0.5 + 0.3 * (y / r));
        }
    }
}

/// Generates sample `index` of `split` for `seed` (independent of N, per §6.2).
pub fn sample(seed: u32, split: Split, index: u32) -> Result<Sample, MiniShapesError> {
    if index >= 1 << 24 {
        return Err(MiniShapesError::IndexTooLarge(index));
    }
    let state = (u64::from(seed) << 32) | (split.id() << 24) | u64::from(index);
    let mut rng = SplitMix64::new(state);
    let label = rng.below(3);
    let k = 16 + rng.below(33);
    let mut pts = [[0.0f64; 2]; POINTS];
    let outline = usize::try_from(k).unwrap_or(POINTS).min(POINTS);
    for p in pts.iter_mut().take(outline) {
        let (mut px, mut py) = match label {
            0 => circle_point(&mut rng),
            1 => polygon_point(&mut rng, &SQUARE),
            _ => polygon_point(&mut rng, &TRIANGLE),
        };
        let jx = rng.uniform();
        let jy = rng.uniform();
        px += (2.0 * jx - 1.0) * 0.01;
        py += (2.0 * jy - 1.0) * 0.01;
        *p = [px, py];
    }
    for p in pts.iter_mut().skip(outline) {
        let px = rng.uniform();
        let py = rng.uniform();
        *p = [px, py];
    }
    for i in (1..POINTS).rev() {
        let j = usize::try_from(rng.below(i as u64 + 1)).unwrap_or(0);
        pts.swap(i, j);
    }
    let mut points = [[0.0f32; 2]; POINTS];
    for (dst, src) in points.iter_mut().zip(pts.iter()) {
        *dst = [src[0] as f32, src[1] as f32];
    }
    Ok(Sample { label: label as u8, k: k as u32, points })
}

/// Generator parameters; `Default` is the spec's seed 42, 400 train / 400 test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MiniShapes {
    /// Seed (< 2^32 by type).
    pub seed: u32,
    /// Train size.
    pub train_n: u32,
    /// Test size.
    pub test_n: u32,
}

impl Default for MiniShapes {
    fn default() -> Self {
        Self { seed: DEFAULT_SEED, train_n: DEFAULT_N, test_n: DEFAULT_N }
    }
}

/// File bytes of one generated task (so tests can hash without touching disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFiles {
    /// `data/train_data.npy`.
    pub train_data: Vec<u8>,
    /// `data/train_labels.npy`.
    pub train_labels: Vec<u8>,
    /// `data/test_data.npy`.
    pub test_data: Vec<u8>,
    /// Hidden `test_labels.npy`.
    pub test_labels: Vec<u8>,
}

/// Task prompt (evalgrid's own wording; the upstream prompts carry no licence, §0).
pub const PROMPT: &str = include_str!("py/minishapes_prompt.md");

impl MiniShapes {
    /// All samples of a split, index 0..n.
    pub fn generate(&self, split: Split) -> Result<Vec<Sample>, MiniShapesError> {
        let n = match split {
            Split::Train => self.train_n,
            Split::Test => self.test_n,
        };
        (0..n).map(|i| sample(self.seed, split, i)).collect()
    }

    /// The four `.npy` files, byte-identical to `numpy.save` of the same arrays.
    pub fn files(&self) -> Result<TaskFiles, MiniShapesError> {
        let train = self.generate(Split::Train)?;
        let test = self.generate(Split::Test)?;
        Ok(TaskFiles { train_data: data_npy(&train), train_labels: labels_npy(&train), test_data: data_npy(&test), test_labels: labels_npy(&test) })
    }

    /// Writes `dir/data/*.npy`, the hidden `dir/hidden/test_labels.npy` (directory mode 0700) and
    /// `dir/task.json`, returning the manifest (paths absolute).
    pub fn write(&self, dir: &Path) -> Result<TaskManifest, MiniShapesError> {
        let files = self.files()?;
        let data = dir.join("data");
        let hidden = dir.join("hidden");
        for d in [&data, &hidden] {
            std::fs::create_dir_all(d).map_err(|source| MiniShapesError::Io { path: d.clone(), source })?;
        }
        let writes = [
            (data.join("train_data.npy"), &files.train_data),
            (data.join("train_labels.npy"), &files.train_labels),
            (data.join("test_data.npy"), &files.test_data),
            (hidden.join("test_labels.npy"), &files.test_labels),
        ];
        for (path, bytes) in writes {
            std::fs::write(&path, bytes).map_err(|source| MiniShapesError::Io { path, source })?;
        }
        // Hidden labels: owner-only, so a submission under another uid cannot read them even
        // without filesystem isolation (rlimits-only with a per-run uid).
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700)).map_err(|source| MiniShapesError::Io { path: hidden.clone(), source })?;
        }
        let manifest = TaskManifest {
            id: format!("mini_shapes_seed{}", self.seed),
            prompt: PROMPT.to_string(),
            data_dir: data,
            train_files: vec!["train_data.npy".into(), "train_labels.npy".into()],
            test_inputs: vec!["test_data.npy".into()],
            labels_path: hidden.join("test_labels.npy"),
            predictions_file: super::task::DEFAULT_PREDICTIONS.to_string(),
            test_size: self.test_n as usize,
            pred_width: 1,
            time_limit_s: super::task::DEFAULT_TIME_LIMIT_S,
            iterations: super::task::DEFAULT_ITERATIONS,
        };
        let path = dir.join("task.json");
        let json = serde_json::to_string_pretty(&manifest).map_err(|e| MiniShapesError::Io { path: path.clone(), source: e.into() })?;
        std::fs::write(&path, json).map_err(|source| MiniShapesError::Io { path, source })?;
        Ok(manifest)
    }
}

/// `(N, 64, 2) <f4` point-cloud file bytes.
pub fn data_npy(samples: &[Sample]) -> Vec<u8> {
    let flat: Vec<f32> = samples.iter().flat_map(|s| s.points.iter().flatten().copied()).collect();
    npy::write_f32(&[samples.len(), POINTS, 2], &flat)
}

/// `(N,) <i8` label file bytes.
pub fn labels_npy(samples: &[Sample]) -> Vec<u8> {
    let labels: Vec<i64> = samples.iter().map(|s| i64::from(s.label)).collect();
    npy::write_i64(&labels)
}

/// The reference submissions of §6.4 (numpy-only Python scripts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solution {
    /// Predict the most frequent train label.
    Majority,
    /// Nearest centroid on the population std of the 64 centre distances.
    Weak,
    /// 6-bin distance histogram, nearest class mean.
    Medium,
    /// 12-bin histogram.
    TwelveBin,
    /// 24-bin histogram (the reference solution).
    Reference,
}

impl Solution {
    /// Every solution, in the §6.4 table order.
    pub const ALL: [Solution; 5] = [Solution::Majority, Solution::Weak, Solution::Medium, Solution::TwelveBin, Solution::Reference];

    /// Pinned seed-42 test accuracy from §6.4.
    pub fn test_accuracy(self) -> f64 {
        match self {
            Solution::Majority => 0.335,
            Solution::Weak => 0.535,
            Solution::Medium => 0.8725,
            Solution::TwelveBin => 0.985,
            Solution::Reference => 0.995,
        }
    }

    /// Histogram (bins, width) for the histogram solutions.
    pub fn histogram(self) -> Option<(usize, f64)> {
        match self {
            Solution::Medium => Some((6, 0.12)),
            Solution::TwelveBin => Some((12, 0.06)),
            Solution::Reference => Some((24, 0.03)),
            Solution::Majority | Solution::Weak => None,
        }
    }

    /// The Python script (what a scripted "model" puts in its code block).
    pub fn script(self) -> String {
        match (self, self.histogram()) {
            (Solution::Majority, _) => include_str!("py/majority.py").to_string(),
            (Solution::Weak, _) => include_str!("py/weak.py").to_string(),
            (_, Some((bins, width))) => include_str!("py/histogram.py").replace("__BINS__", &bins.to_string()).replace("__WIDTH__", &width.to_string()),
            (_, None) => String::new(),
        }
    }
}

#[cfg(test)]
mod tests;
