//! The std crate's layering, read from its source: a module may import (`crate::…`) only itself
//! and the modules before it in [`LAYERS`], the order `src/lib.rs` states. A back-import (the
//! instance's state importing its builder, the answers' meaning importing the HTTP face) fails
//! here with the file and line; the one edge allowed back is listed in [`BACK`] with its reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The crate's top-level modules, each importing only those before it.
const LAYERS: &[&str] = &[
    "clock",      // injectable clocks
    "rng",        // seeded randomness
    "stats",      // an instance's counts
    "error",      // what a call returns, and build errors
    "sleep",      // injectable timers
    "cancel",     // a blocking attempt's cancel token
    "http",       // HTTP signals: statuses and headers into the core's answers
    "classify",   // what an error means (the `Classify` trait and its impls)
    "observer",   // what observers hear
    "breaker",    // the instance's breaker storage and its transitions outlet
    "metrics",    // observers: the `metrics` facade
    "traces",     // observers: `tracing` spans and events
    "fleet",      // fleet-wide state through a store (an instance's breaker and budget may be)
    "instance",   // one instance's state, shared by its clones: `Inner`, the `Reliable` struct
    "attempt",    // the fast path's first attempt
    "drive",      // the engine's shared state and the driver every face uses
    "builder",    // the builder and its presets
    "call",       // the async face: what `Reliable::call` runs
    "blocking",   // the blocking face: what `Reliable::call_blocking` and its variants run
    "reliable",   // the handle's methods: the one `impl Reliable`, delegating to the modules above
    "fallback",   // providers in order
    "registry",   // named instances
    "middleware", // the reqwest-middleware face
    "llm",        // LLM provider signals
    "tower",      // the tower faces
    "chaos",      // chaos layers
    "policy",     // policy files into builders and layers
];

/// Imports that run back, each with its reason: (module, imported module).
const BACK: &[(&str, &str, &str)] = &[
    (
        "observer",
        "chaos",
        "the observer trait's `on_chaos` names the event a chaos layer above reports",
    ),
    ("metrics", "chaos", "an observer: implements `on_chaos`"),
    ("traces", "chaos", "an observer: implements `on_chaos`"),
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

/// The top-level module a file belongs to (`tower/retry.rs` → `tower`), `None` for `lib.rs`.
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    match first.strip_suffix(".rs") {
        Some("lib") => None,
        Some(stem) => Some(stem.to_string()),
        None => Some(first),
    }
}

/// Every top-level name after `crate::` in `line` (`crate::a::b`, `crate::{a, b::c}`).
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

/// The names `lib.rs` re-exports from a module of the crate (`crate::Error` is `error`'s).
fn root_names() -> BTreeMap<String, String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut out = BTreeMap::new();
    for line in lib.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = first_segment(path);
        if !LAYERS.contains(&module.as_str()) {
            continue;
        }
        let names = path[module.len()..].trim_start_matches("::");
        let names = names
            .trim_end_matches(';')
            .trim_matches(|c| c == '{' || c == '}');
        for name in names.split(',') {
            out.insert(first_segment(name), module.clone());
        }
    }
    out
}

/// Every import of a later module: `file:line: module imports later`.
fn violations(files: &[PathBuf]) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let roots = root_names();
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
            for name in imports(code(line)) {
                let target = roots.get(&name).cloned().unwrap_or(name);
                let back = BACK.iter().any(|(m, t, _)| *m == module && *t == target);
                match rank.get(target.as_str()) {
                    Some(&r) if r <= own || back => {}
                    Some(_) => out.push(format!(
                        "{}:{}: `{module}` imports `{target}`, a later module: {}",
                        file.strip_prefix(src()).unwrap().display(),
                        n + 1,
                        line.trim()
                    )),
                    None => out.push(format!(
                        "{}:{}: `{module}` imports `crate::{target}`, which is not a module in LAYERS nor re-exported from one in lib.rs: {}",
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
fn no_module_imports_a_later_one() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    assert!(files.len() > 40, "found only {} files", files.len());
    let found = violations(&files);
    assert!(
        found.is_empty(),
        "imports against the layering ({}):\n{}",
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
        assert!(
            LAYERS.contains(&name),
            "src/lib.rs declares `{name}`, which LAYERS does not place"
        );
    }
}

#[test]
fn each_back_edge_is_still_needed() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    for (module, target, why) in BACK {
        let used = files.iter().any(|f| {
            module_of(f).as_deref() == Some(*module)
                && std::fs::read_to_string(f)
                    .unwrap()
                    .lines()
                    .any(|l| imports(code(l)).iter().any(|i| i == target))
        });
        assert!(
            used,
            "`{module}` → `{target}` ({why}) is not used: remove it from BACK"
        );
    }
}
