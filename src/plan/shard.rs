//! Shards and resource classes: how a grid is split across machines. A cell's shard is a
//! pure function of its id (`model/benchmark/task/seed`) and the shard count, so it never
//! depends on what is cached, on timing or on the machine, and it does not move when
//! other cells are added or edited. The shard never enters a cache key.

use std::fmt;
use std::str::FromStr;

/// `--shard i/n`: the `i`-th of `n` disjoint parts of the grid, `0 <= i < n` (Slurm array
/// and Kubernetes completion indices start at 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This part, from 0.
    pub index: u32,
    /// Number of parts, at least 1.
    pub count: u32,
}

/// A malformed `--shard` value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a shard: expected `i/n` with 0 <= i < n (e.g. `0/4`)")]
pub struct ShardError(String);

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ShardError(s.to_owned());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Whether the cell called `cell_id` belongs to this shard.
    #[must_use]
    pub fn contains(&self, cell_id: &str) -> bool {
        shard_of(cell_id, self.count) == self.index
    }
}

/// The shard (of `count`) that the cell called `cell_id` belongs to.
#[must_use]
pub fn shard_of(cell_id: &str, count: u32) -> u32 {
    let hash = blake3::hash(cell_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    u32::try_from(u64::from_le_bytes(first) % u64::from(count.max(1))).unwrap_or(0)
}

/// The resource a cell needs most, so each class can ask its scheduler for the right
/// machines: built-in agents are `cpu`, API-model cells `api`, WeirdML cells `gpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceClass {
    /// Local computation only.
    Cpu,
    /// Mostly waiting on a model API.
    Api,
    /// Runs code that wants a GPU.
    Gpu,
}

/// A `--class` value that is not `cpu`, `api` or `gpu`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a resource class (expected cpu, api or gpu)")]
pub struct ClassError(String);

impl FromStr for ResourceClass {
    type Err = ClassError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "api" => Ok(Self::Api),
            "gpu" => Ok(Self::Gpu),
            other => Err(ClassError(other.to_owned())),
        }
    }
}

impl fmt::Display for ResourceClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Api => "api",
            Self::Gpu => "gpu",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shard_values_parse_and_reject() {
        assert_eq!("0/4".parse(), Ok(Shard { index: 0, count: 4 }));
        assert_eq!("3/4".parse::<Shard>().map(|s| s.to_string()), Ok("3/4".to_owned()));
        for bad in ["4/4", "1/0", "-1/4", "a/b", "2", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!("gpu".parse(), Ok(ResourceClass::Gpu));
        assert!("tpu".parse::<ResourceClass>().is_err());
    }

    proptest! {
        /// For any grid and any n: the n shards are disjoint, cover the grid, and a cell's
        /// shard depends only on its id (not on the other cells, a cache or the order).
        #[test]
        fn shards_are_disjoint_cover_the_grid_and_are_stable(models in 1usize..6, tasks in 1usize..8, seeds in 1u64..6, n in 1u32..9) {
            let ids: Vec<String> = (0..models)
                .flat_map(|m| (0..tasks).flat_map(move |t| (0..seeds).map(move |s| format!("m{m}/bench/t{t}/{s}"))))
                .collect();
            let shards: Vec<Shard> = (0..n).map(|index| Shard { index, count: n }).collect();
            for id in &ids {
                let owners = shards.iter().filter(|s| s.contains(id)).count();
                prop_assert_eq!(owners, 1, "{} is in {} shards", id, owners);
            }
            // Adding cells (a bigger grid) moves none of the existing ones.
            let bigger: Vec<String> = ids.iter().cloned().chain((0..seeds).map(|s| format!("new/bench/t0/{s}"))).collect();
            for id in &ids {
                prop_assert!(bigger.contains(id));
                prop_assert_eq!(shard_of(id, n), shard_of(id, n));
            }
        }
    }

    #[test]
    fn shards_are_roughly_balanced() {
        let ids: Vec<String> = (0..4000).map(|i| format!("m/b/t{}/{}", i % 40, i / 40)).collect();
        let mut counts = [0usize; 4];
        for id in &ids {
            counts[shard_of(id, 4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..=1200).contains(&c)), "{counts:?}");
    }
}
