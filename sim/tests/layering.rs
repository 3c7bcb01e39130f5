//! The simulator's layering, read from its source: a module may import (`crate::…`) only itself
//! and the modules before it in [`LAYERS`], the order `src/lib.rs` states. Data flows one way,
//! scenario → compile → run → metrics → report; a back-import (the scenario importing the runner,
//! the runner importing the report) fails here with the file and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The crate's top-level modules, each importing only those before it.
const LAYERS: &[&str] = &[
    "stats",     // means and intervals
    "plot",      // line charts and heatmaps from plain data
    "engine",    // virtual time, event queue, slabs, random streams
    "scenario",  // what a scenario is: types, parsing, positions, errors, sweep axes
    "model",     // downstreams, faults, capacity and offered-load curves
    "client",    // the policy stacks' layers and their state
    "workload",  // arrivals: open loop, closed loop, job set
    "compile",   // a parsed scenario checked and compiled
    "metrics",   // what a run records, its summary, means over seeds
    "run",       // admission, worlds, batches, sweeps, maps, shards
    "load",      // compile + admission: what a user loads
    "report",    // everything rendered from results
    "emulation", // what the real-time emulator drives
    "bench",     // the bench command's workloads
    "cli",       // the command line
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`run/world/stack.rs` → `run`), `None` for the crate
/// root (`lib.rs`, `main.rs`).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(stem) => Some(stem.to_string()),
        None => Some(first),
    }
}

/// Every top-level module named after `crate::` in `line` (`crate::a::b`, `crate::{a, b::c}`).
fn imports(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        // `$crate::` in a macro is the crate root too; a longer identifier ending in `crate` is not.
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group, up to its closing brace.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.push(first_segment(&item));
        } else {
            out.push(first_segment(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Code of a line: empty for comments (docs may link to any module).
fn code(line: &str) -> &str {
    let t = line.trim_start();
    if t.starts_with("//") {
        return "";
    }
    match t.find("//") {
        Some(i) if !t[..i].contains('"') => &t[..i],
        _ => t,
    }
}

/// The constants `lib.rs` defines (plain data such as the default scenario's text, importing
/// nothing): any module may use them.
fn root_constants() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .map(first_segment)
        .collect()
}

/// Every import of a later stage: `file:line: module imports later`.
fn violations(files: &[PathBuf]) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let constants = root_constants();
    let mut out = Vec::new();
    for file in files {
        let Some(module) = module_of(file) else {
            continue;
        };
        let Some(&own) = rank.get(module.as_str()) else {
            out.push(format!(
                "{}: module `{module}` is not in LAYERS (add it where it belongs)",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for target in imports(code(line)) {
                match rank.get(target.as_str()) {
                    _ if constants.contains(&target) => {}
                    Some(&r) if r <= own => {}
                    Some(_) => out.push(format!(
                        "{}:{}: `{module}` imports `{target}`, a later stage: {}",
                        file.strip_prefix(src()).unwrap().display(),
                        n + 1,
                        line.trim()
                    )),
                    None => out.push(format!(
                        "{}:{}: `{module}` imports `crate::{target}`, which is not a module in LAYERS (name the module it is in): {}",
                        file.strip_prefix(src()).unwrap().display(),
                        n + 1,
                        line.trim()
                    )),
                }
            }
        }
    }
    out
}

#[test]
fn no_module_imports_a_later_stage() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    assert!(files.len() > 50, "found only {} files", files.len());
    let found = violations(&files);
    assert!(
        found.is_empty(),
        "imports against the data flow ({}):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn lib_rs_states_the_same_order() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let order = LAYERS.join(" → ");
    assert!(
        lib.lines()
            .any(|l| l.trim_start_matches("//!").trim() == order),
        "src/lib.rs should state the layering as the line `//! {order}`"
    );
}

#[test]
fn every_module_of_lib_rs_is_layered() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    for line in lib.lines() {
        let t = line.trim();
        let Some(rest) = t
            .strip_prefix("pub mod ")
            .or_else(|| t.strip_prefix("mod "))
            .or_else(|| t.strip_prefix("pub(crate) mod "))
        else {
            continue;
        };
        let name = rest.trim_end_matches(';');
        assert!(LAYERS.contains(&name), "`{name}` is not in LAYERS");
    }
}

#[test]
fn the_reader_finds_imports_in_every_form() {
    assert_eq!(imports("use crate::run::World;"), ["run"]);
    assert_eq!(
        imports("use crate::{metrics::Bucket, report::{a, b}};"),
        ["metrics", "report"]
    );
    assert_eq!(
        imports("let x = crate::report::folder_name(n);"),
        ["report"]
    );
    assert_eq!(imports("$crate::stats::mean(&xs)"), ["stats"]);
    assert!(imports("use my_crate::x;").is_empty());
    assert!(code("/// see [`x`](crate::report)").is_empty());
}
