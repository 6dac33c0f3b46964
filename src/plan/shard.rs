//! Shards and resource classes: how a grid is split across machines. Cell `j` of the plan
//! (in plan order, after `--filter` and `--class`) belongs to shard `j mod n`: balanced to
//! within one cell, and a function of the pipeline alone, never of what is cached, of
//! timing or of the machine, so shards that start at different times agree. The shard
//! never enters a cache key.

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
    /// This shard's part of `items` (the plan's cells, in plan order).
    #[must_use]
    pub fn part<T: Clone>(&self, items: &[T]) -> Vec<T> {
        items.iter().enumerate().filter(|(j, _)| shard_of(*j, self.count) == self.index).map(|(_, c)| c.clone()).collect()
    }
}

/// The shard (of `count`) of the `j`-th cell in plan order.
#[must_use]
pub fn shard_of(j: usize, count: u32) -> u32 {
    u32::try_from(j % usize::try_from(count.max(1)).unwrap_or(1)).unwrap_or(0)
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
        /// For any grid and any n: the n shards are disjoint, cover the grid and are balanced
        /// to within one cell (they read nothing but the plan).
        #[test]
        fn shards_are_disjoint_cover_the_grid_and_are_balanced(models in 1usize..6, tasks in 1usize..8, seeds in 1u64..6, n in 1u32..9) {
            let ids: Vec<String> = (0..models)
                .flat_map(|m| (0..tasks).flat_map(move |t| (0..seeds).map(move |s| format!("m{m}/bench/t{t}/{s}"))))
                .collect();
            let parts: Vec<Vec<String>> = (0..n).map(|index| Shard { index, count: n }.part(&ids)).collect();
            for id in &ids {
                let owners = parts.iter().filter(|p| p.contains(id)).count();
                prop_assert_eq!(owners, 1, "{} is in {} shards", id, owners);
            }
            let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
            prop_assert_eq!(sizes.iter().sum::<usize>(), ids.len());
            prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{:?}", sizes);
        }
    }
}
