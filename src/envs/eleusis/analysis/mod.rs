//! Published results and the write-up's metrics: the `results.json` model and reader, the
//! spec §5 metrics over it, evalgrid rounds exported to that shape, and replay through the engine.

pub mod export;
pub mod metrics;
pub mod replay;
pub mod results;
