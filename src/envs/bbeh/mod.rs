//! BIG-Bench Extra Hard (BBEH, Kazemi et al. 2025): the pure-logic part of the benchmark.
//!
//! Data loading and SHA-256 pins (`dataset`), the generic prompt suffix (`prompt`), an exact
//! port of the official scorer at `google-deepmind/bbeh@80d12ca` (`scorer`, with CPython
//! string/float emulation in `pystr`), answer spaces for the random baseline
//! (`answer_space`), the paper's aggregate metrics (`aggregate`) and `evalgrid bbeh score`
//! (`tools`). Specification: `specs/bbeh.md`. Data are CC-BY 4.0 (Google LLC) and carry a
//! training-data canary.

pub mod aggregate;
pub mod answer_space;
pub mod benchmark;
pub mod dataset;
pub mod install;
pub mod prompt;
pub mod report;
pub use crate::envs::pystr;
pub mod scorer;
mod tools;
pub mod units;

#[cfg(test)]
mod testdata;

pub use aggregate::{AggregateError, harmonic_mean, macro_mean, micro, task_accuracy, weighted_mean, wilson_interval};
pub use answer_space::{AnswerSpace, answer_space, expected_random_accuracy, random_answer};
pub use dataset::{DatasetError, Item, Manifest, ManifestFile, MiniItem, TASKS, Upstream, load_all, load_mini, load_task, mini_indices, verify_checksums};
pub use prompt::{SUFFIX, SUFFIX_VERSION, build_prompt};
pub use scorer::{SCORER_VERSION, ScoreDetail, evaluate_correctness, extract_answer, preprocess_prediction, preprocess_reference, score};
