//! Tests of the sandbox and GPU pool as WeirdML uses them (the mini-shapes fixture from
//! `test_support.rs`): containment of hostile submissions and GPU slots that never overlap.

mod gpu;
mod sandbox;
mod supervisor;
