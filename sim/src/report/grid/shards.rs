//! The raw results of a sharded sweep or map, and `sim merge`: each shard writes its runs with a
//! manifest; the merge checks that the shards belong together and cover every run exactly once,
//! then hands the runs, in the unsharded order, to the same report code the unsharded command
//! uses, so the report is byte-identical.
//!
//! A shard's folder, `OUT/<scenario>.shards/<i>-of-<n>/`, holds `manifest.json` ([`Manifest`])
//! and one `run-<point>-<seed>-<policy>.json` per run ([`RawRun`]). Numbers are written so that
//! they read back to the same bits (serde_json's shortest round-trip form, read with
//! `float_roundtrip`), which is what makes the merged report identical.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::run::grid::shard::Shard;
use crate::run::grid::{RawRun, points};
use crate::scenario::{Scenario, Sweep};

/// The manifest format this simulator writes and reads.
pub const FORMAT: &str = "sim-shard/1";

/// Largest manifest or run file read (a run summary is a few kB).
const MAX_FILE: u64 = 16 << 20;

/// Which report the runs are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `sim sweep`: one axis.
    Sweep,
    /// `sim map`: two axes.
    Map,
}

/// What a shard ran: enough to check that shards belong together and to write the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// The simulator's version (`sim 0.1.0`); shards of another version are not merged.
    pub simulator: String,
    /// Sweep or map.
    pub kind: Kind,
    /// The command as the report shows it (`sim map scenarios/boundary-map.ron`).
    pub command: String,
    /// FNV-1a 64 of the scenario, axes and seeds as JSON, in hex.
    pub scenario_hash: String,
    /// The scenario as run.
    pub scenario: Scenario,
    /// The grid's parameters and values: one for a sweep, x and y for a map.
    pub axes: Vec<Sweep>,
    /// Every seed of the batch, in order.
    pub seeds: Vec<u64>,
    /// This shard.
    pub shard: Shard,
    /// This shard's seeds.
    pub shard_seeds: Vec<u64>,
    /// Run files this shard wrote.
    pub runs: usize,
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The hash a manifest records for `scenario`, `axes` and `seeds`.
pub fn scenario_hash(scenario: &Scenario, axes: &[Sweep], seeds: &[u64]) -> String {
    let text = serde_json::to_string(&(scenario, axes, seeds)).unwrap_or_default();
    format!("{:016x}", fnv1a64(text.as_bytes()))
}

/// The simulator's version as manifests record it.
pub fn simulator() -> String {
    format!("sim {}", env!("CARGO_PKG_VERSION"))
}

impl Manifest {
    /// The manifest of shard `shard` of a batch.
    pub fn new(
        kind: Kind,
        command: &str,
        scenario: &Scenario,
        axes: &[Sweep],
        seeds: &[u64],
        shard: Shard,
        runs: usize,
    ) -> Self {
        Manifest {
            format: FORMAT.into(),
            simulator: simulator(),
            kind,
            command: command.into(),
            scenario_hash: scenario_hash(scenario, axes, seeds),
            scenario: scenario.clone(),
            axes: axes.to_vec(),
            seeds: seeds.to_vec(),
            shard,
            shard_seeds: shard.seeds(seeds),
            runs,
        }
    }
}

/// The file name of a run.
fn run_file(r: &RawRun) -> String {
    format!("run-{}-{}-{}.json", r.point, r.seed, r.policy)
}

/// The folder shard `shard` of scenario folder `folder` writes into, under `out`.
fn shard_dir(out: &Path, folder: &str, shard: Shard) -> PathBuf {
    out.join(format!("{folder}.shards"))
        .join(format!("{}-of-{}", shard.index, shard.count))
}

/// Writes a shard's runs and manifest into its folder (see [`shard_dir`]), replacing any earlier
/// one atomically; returns the folder.
pub fn write(out: &Path, m: &Manifest, runs: &[RawRun]) -> std::io::Result<PathBuf> {
    let mut files = Vec::with_capacity(runs.len() + 1);
    for r in runs {
        files.push((
            run_file(r),
            serde_json::to_vec(r).map_err(std::io::Error::other)?,
        ));
    }
    files.push((
        "manifest.json".to_string(),
        serde_json::to_vec_pretty(m).map_err(std::io::Error::other)?,
    ));
    let dir = shard_dir(
        out,
        &crate::scenario::folder_name(&m.scenario.name),
        m.shard,
    );
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str()))
    else {
        return Err(std::io::Error::other("no shard folder name"));
    };
    crate::report::write::replace_folder(parent, name, files)
}

fn read_capped(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let shown = || crate::scenario::escape(&path.display().to_string()).into_owned();
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", shown()))?;
    if !f
        .metadata()
        .map_err(|e| format!("{}: {e}", shown()))?
        .is_file()
    {
        return Err(format!("{}: not a regular file", shown()));
    }
    let mut bytes = Vec::new();
    f.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", shown()))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!("{}: larger than {MAX_FILE} bytes", shown()));
    }
    Ok(bytes)
}

/// The shard folders named by `dirs`: each is a shard folder (it has a `manifest.json`) or holds
/// shard folders (`OUT/<scenario>.shards/`), taken in name order.
fn shard_dirs(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for d in dirs {
        let shown = crate::scenario::escape(&d.display().to_string()).into_owned();
        if d.join("manifest.json").is_file() {
            out.push(d.clone());
            continue;
        }
        let entries = std::fs::read_dir(d).map_err(|e| format!("{shown}: {e}"))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("manifest.json").is_file())
            .collect();
        if found.is_empty() {
            return Err(format!(
                "{shown}: no manifest.json in it or in its folders: expected a shard folder (written by `--shard`) or the folder holding them"
            ));
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// The fields two manifests of one batch must share, for the message naming the first that
/// differs.
fn differs(a: &Manifest, b: &Manifest) -> Option<&'static str> {
    if a.format != b.format {
        Some("format")
    } else if a.simulator != b.simulator {
        Some("simulator version")
    } else if a.kind != b.kind {
        Some("kind (sweep or map)")
    } else if a.scenario_hash != b.scenario_hash || a.scenario != b.scenario {
        Some("scenario")
    } else if a.axes != b.axes {
        Some("parameters")
    } else if a.seeds != b.seeds {
        Some("seeds")
    } else if a.shard.count != b.shard.count {
        Some("shard count")
    } else if a.command != b.command {
        Some("command")
    } else {
        None
    }
}

/// Reads the shards in `dirs` (see [`shard_dirs`]), checks them, and returns their common
/// manifest and every run in (point, seed, policy) order: the runs the unsharded batch makes,
/// exactly once each.
pub fn read(dirs: &[PathBuf]) -> Result<(Manifest, Vec<RawRun>), String> {
    let dirs = shard_dirs(dirs)?;
    let shown = |p: &Path| crate::scenario::escape(&p.display().to_string()).into_owned();
    let mut manifests: Vec<(PathBuf, Manifest)> = Vec::with_capacity(dirs.len());
    for d in &dirs {
        let path = d.join("manifest.json");
        let m: Manifest = serde_json::from_slice(&read_capped(&path)?)
            .map_err(|e| format!("{}: {e}", shown(&path)))?;
        if m.format != FORMAT {
            return Err(format!(
                "{}: format {:?}: this simulator reads {FORMAT:?}",
                shown(&path),
                m.format
            ));
        }
        if m.simulator != simulator() {
            return Err(format!(
                "{}: written by {}, this is {}: rerun the shards, or merge with that version",
                shown(&path),
                m.simulator,
                simulator()
            ));
        }
        if m.scenario_hash != scenario_hash(&m.scenario, &m.axes, &m.seeds) {
            return Err(format!(
                "{}: the scenario does not match its hash (edited by hand?)",
                shown(&path)
            ));
        }
        if m.shard_seeds != m.shard.seeds(&m.seeds) {
            return Err(format!(
                "{}: shard {}'s seeds are not its share of the batch's",
                shown(&path),
                m.shard
            ));
        }
        if let Some((first_dir, first)) = manifests.first()
            && let Some(what) = differs(first, &m)
        {
            return Err(format!(
                "{} and {}: the shards are of different batches (their {what} differs)",
                shown(first_dir),
                shown(d)
            ));
        }
        manifests.push((d.clone(), m));
    }
    let first = manifests[0].1.clone();
    let n = first.shard.count as usize;
    let mut seen: Vec<Option<&Path>> = vec![None; n];
    for (d, m) in &manifests {
        let i = m.shard.index as usize;
        if let Some(other) = seen[i] {
            return Err(format!(
                "shard {} given twice: {} and {}",
                m.shard,
                shown(other),
                shown(d)
            ));
        }
        seen[i] = Some(d);
    }
    let missing: Vec<String> = seen
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("{i}/{n}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "missing shard{} {} of {}: merge needs all {n}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            first.scenario.name
        ));
    }
    // Every run exactly once, each in its own shard.
    let seed_index: HashMap<u64, usize> = first
        .seeds
        .iter()
        .enumerate()
        .map(|(j, &s)| (s, j))
        .collect();
    let (np, npol, ns) = (
        points(&first.axes),
        first.scenario.policies.len(),
        first.seeds.len(),
    );
    let total = np * ns * npol;
    let mut slots: Vec<Option<RawRun>> = vec![None; total];
    for (d, m) in &manifests {
        let mut files: Vec<PathBuf> = std::fs::read_dir(d)
            .map_err(|e| format!("{}: {e}", shown(d)))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("run-") && n.ends_with(".json"))
            })
            .collect();
        files.sort();
        if files.len() != m.runs {
            return Err(format!(
                "{}: {} run files, its manifest lists {}",
                shown(d),
                files.len(),
                m.runs
            ));
        }
        for f in files {
            let r: RawRun = serde_json::from_slice(&read_capped(&f)?)
                .map_err(|e| format!("{}: {e}", shown(&f)))?;
            let j = seed_index.get(&r.seed).copied();
            let ok = (r.point as usize) < np
                && (r.policy as usize) < npol
                && j.is_some_and(|j| m.shard.owns(j));
            let Some(j) = j.filter(|_| ok) else {
                return Err(format!(
                    "{}: run (point {}, seed {}, policy {}) is not one of shard {}'s",
                    shown(&f),
                    r.point,
                    r.seed,
                    r.policy,
                    m.shard
                ));
            };
            let k = (r.point as usize * ns + j) * npol + r.policy as usize;
            if slots[k].is_some() {
                return Err(format!("{}: run given twice", shown(&f)));
            }
            slots[k] = Some(r);
        }
    }
    let got = slots.iter().filter(|s| s.is_some()).count();
    if got != total {
        return Err(format!(
            "{got} of {total} runs: the shards do not cover the batch"
        ));
    }
    Ok((first, slots.into_iter().flatten().collect()))
}
