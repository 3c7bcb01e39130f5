//! The renderings of grids (see [`crate::run::grid`]): a sweep's table, CSV and plots
//! ([`sweep`]), a map's heatmaps and cliff lines (`map`), and the shard files a grid split over
//! machines writes and `sim merge` reads back (`shards`).

pub(crate) mod map;
pub(crate) mod shards;
pub mod sweep;
