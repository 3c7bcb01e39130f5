//! Writing a report folder so that it is either complete or absent: every file goes into a
//! temporary folder beside the target, which is renamed into place once all are written. A
//! failure part-way (a full disk, a plot that cannot be drawn) leaves the previous report, if
//! any, untouched, and no folder that looks complete.

use std::path::{Path, PathBuf};

use crate::run::Runs;

/// Writes the report of `runs` into `out/<folder name of the scenario>/` and returns that
/// folder: `summary.md`, `summary.json`, `timeseries.csv` and the plots (SVG and PNG). Atomic
/// (see the module docs); an earlier report in the folder is replaced.
pub fn write(out: &Path, runs: &Runs<'_>) -> std::io::Result<PathBuf> {
    use crate::run::par::*;
    let c = runs.compiled;
    let policies = runs.per_policy();
    let figs = super::figures::figures(c, &runs.seeds, &runs.results);
    let files: Vec<(String, Vec<u8>)> = vec![
        (
            "summary.json".into(),
            super::json::summary_json(c, &runs.seeds, &policies).into_bytes(),
        ),
        (
            "timeseries.csv".into(),
            super::csv::timeseries(c, &runs.results).into_bytes(),
        ),
        (
            "summary.md".into(),
            super::markdown::summary_md(c, &runs.seeds, &policies, &figs).into_bytes(),
        ),
    ];
    let plots = figs
        .par_iter()
        .map(|f| crate::plot::render(&f.chart, f.stem))
        .collect::<std::io::Result<Vec<_>>>()?;
    let graph = super::graph_svg::graph_svg(c, &policies)
        .map(|g| ("graph.svg".to_string(), g.into_bytes()));
    let files = files
        .into_iter()
        .chain(graph)
        .chain(plots.into_iter().flatten());
    write_folder(out, &crate::scenario::folder_name(&c.scenario.name), files)
}

/// Writes `files` (name, bytes) into `out/name/` atomically: into `out/.name.tmp-<pid>/` first,
/// then renamed into place (an existing folder is moved aside and removed after the rename).
/// Files of the existing folder that are not rewritten (a run's report beside a sweep's of the
/// same scenario) are carried over.
pub(crate) fn write_folder(
    out: &Path,
    name: &str,
    files: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> std::io::Result<PathBuf> {
    put_folder(out, name, files, true)
}

/// Like [`write_folder`], but nothing of an existing folder is kept: for folders whose files must
/// all come from one write (a shard's raw runs, where a stale file would be merged).
pub(crate) fn replace_folder(
    out: &Path,
    name: &str,
    files: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> std::io::Result<PathBuf> {
    put_folder(out, name, files, false)
}

fn put_folder(
    out: &Path,
    name: &str,
    files: impl IntoIterator<Item = (String, Vec<u8>)>,
    carry_over: bool,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    let pid = std::process::id();
    let tmp = out.join(format!(".{name}.tmp-{pid}"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp)?;
    let dest = out.join(name);
    let result = (|| {
        let mut written = std::collections::HashSet::new();
        for (file, bytes) in files {
            std::fs::write(tmp.join(&file), bytes)?;
            written.insert(std::ffi::OsString::from(file));
        }
        if carry_over && dest.is_dir() {
            for entry in std::fs::read_dir(&dest)? {
                let entry = entry?;
                if entry.file_type()?.is_file() && !written.contains(&entry.file_name()) {
                    std::fs::copy(entry.path(), tmp.join(entry.file_name()))?;
                }
            }
        }
        if dest.exists() {
            let old = out.join(format!(".{name}.old-{pid}"));
            let _ = std::fs::remove_dir_all(&old);
            std::fs::rename(&dest, &old)?;
            if let Err(e) = std::fs::rename(&tmp, &dest) {
                // Put the previous report back.
                let _ = std::fs::rename(&old, &dest);
                return Err(e);
            }
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&tmp, &dest)?;
        }
        Ok(dest)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// Checks, before anything runs, that reports can be written under `out`: it is (or can be
/// created as) a folder in which a folder can be created and removed.
pub(crate) fn check_out(out: &Path) -> Result<(), String> {
    let shown = crate::scenario::escape(&out.display().to_string()).into_owned();
    if out.exists() && !out.is_dir() {
        return Err(format!("--out {shown}: not a folder"));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("--out {shown}: cannot create it: {e}"))?;
    let probe = out.join(format!(".sim-probe-{}", std::process::id()));
    std::fs::create_dir(&probe)
        .and_then(|()| std::fs::write(probe.join("probe"), b"ok"))
        .map_err(|e| format!("--out {shown}: cannot write in it: {e}"))?;
    let _ = std::fs::remove_dir_all(&probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_folder_is_complete_or_absent() {
        let out = std::env::temp_dir().join(format!("sim-write-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let files = |a: &str| vec![("a.txt".to_string(), a.as_bytes().to_vec())];
        let dir = write_folder(&out, "r", files("1")).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "1");
        // Rewritten files are replaced, others carried over.
        let other = vec![("b.txt".to_string(), b"b".to_vec())];
        write_folder(&out, "r", other).unwrap();
        write_folder(&out, "r", files("2")).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "2");
        assert_eq!(std::fs::read_to_string(dir.join("b.txt")).unwrap(), "b");
        // A file that cannot be written (a name that is a folder path that does not exist): the
        // old report stays, and no temporary folder is left behind.
        let bad = vec![("missing/b.txt".to_string(), b"x".to_vec())];
        assert!(write_folder(&out, "r", bad).is_err());
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "2");
        let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
        assert_eq!(left.len(), 1);
        check_out(&out).unwrap();
        assert!(check_out(&dir.join("a.txt")).is_err());
        std::fs::remove_dir_all(&out).unwrap();
    }
}
