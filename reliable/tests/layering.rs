//! The std crate's layering, read from its source: a module may import (`crate::…`) only itself
//! and the modules before it in [`LAYERS`], the order `src/lib.rs` states. A back-import (the
//! instance's state importing its builder, the answers' meaning importing the HTTP face) fails
//! here with the file and line; the one edge allowed back is listed in [`BACK`] with its reason.
//!
//! And each type's inherent methods are in one file, so that what a type can do is read in one
//! place: an `impl Reliable` (or of any type) in a second file fails here with both files and
//! lines, and the types in [`HOMES`] have theirs where it says. Trait impls are not held to it:
//! one sits in the later of the trait's module and the type's, the one that can name both.

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

/// Types whose inherent methods must all be in one named file (relative to `src/`), with why.
const HOMES: &[(&str, &str, &str)] = &[
    (
        "Reliable",
        "reliable.rs",
        "the handle's one `impl`, after the builder and the faces it delegates to; its state (the \
         struct, `Inner`) is `instance.rs`'s, before them",
    ),
    (
        "Route",
        "policy/mod.rs",
        "beside the type; the fleet methods' work on the stores is `policy/stores.rs`'s functions",
    ),
    ("Plan", "policy/mod.rs", "beside the type, as `Route`'s"),
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

/// An inherent `impl` block: the type's name, the file (relative to `src/`) and line.
#[derive(Debug)]
struct InherentImpl {
    name: String,
    file: String,
    line: usize,
}

/// The self type's name of an `impl` header (`impl<..> Name<..> where .. {`), `None` for a
/// trait impl (`impl<..> Trait for Type`) or a self type that is not a plain path.
fn inherent_name(header: &str) -> Option<String> {
    let mut rest = header.strip_prefix("impl")?;
    if let Some(generics) = rest.strip_prefix('<') {
        // The impl's own parameters, `->` (in an `Fn` bound) not closing them.
        let mut depth = 1;
        let mut end = None;
        let bytes = generics.as_bytes();
        for (i, &c) in bytes.iter().enumerate() {
            match c {
                b'<' => depth += 1,
                b'>' if i > 0 && bytes[i - 1] == b'-' => {}
                b'>' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &generics[end? + 1..];
    } else if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let self_type = rest.split(" where").next()?.split('{').next()?;
    if self_type.split_whitespace().any(|w| w == "for") {
        return None;
    }
    let path = self_type.trim().split('<').next()?;
    let name = path.rsplit("::").next()?.trim();
    let plain = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    plain.then(|| name.to_string())
}

/// Every inherent `impl` of the crate's sources (in test modules too), with its line.
fn inherent_impls(files: &[PathBuf]) -> Vec<InherentImpl> {
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if !(t.starts_with("impl ") || t.starts_with("impl<")) {
                continue;
            }
            // The header may run over lines (a `where` clause): up to its `{`.
            let mut header = String::new();
            for l in &lines[n..] {
                header.push_str(l.trim());
                header.push(' ');
                if l.contains('{') {
                    break;
                }
            }
            if let Some(name) = inherent_name(&header) {
                out.push(InherentImpl {
                    name,
                    file: rel(file),
                    line: n + 1,
                });
            }
        }
    }
    out
}

fn rel(file: &Path) -> String {
    file.strip_prefix(src()).unwrap().display().to_string()
}

/// Name → the files defining a struct, enum, union or (top-level) type alias of that name.
fn definitions(files: &[PathBuf]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for line in text.lines() {
            let mut t = line.trim_start();
            if let Some(r) = t.strip_prefix("pub") {
                // `pub`, `pub(crate)`, `pub(super)`...
                t = match r.strip_prefix('(') {
                    Some(r) => r.split_once(')').map_or("", |(_, r)| r),
                    None => r,
                }
                .trim_start();
            }
            // Structs may sit in a macro call (`pin_project!`); an indented `type` is an
            // associated type, not a definition.
            let kinds: &[&str] = match line.starts_with(char::is_whitespace) {
                true => &["struct ", "enum ", "union "],
                false => &["struct ", "enum ", "union ", "type "],
            };
            let Some(r) = kinds.iter().find_map(|k| t.strip_prefix(k)) else {
                continue;
            };
            let name: String = r
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.entry(name).or_default().push(rel(file));
            }
        }
    }
    out
}

/// Every type whose inherent impls are in more than one file, and every type of [`HOMES`] with
/// one outside its home: `file:line` of each.
fn scattered_impls(files: &[PathBuf]) -> Vec<String> {
    let impls = inherent_impls(files);
    let defined = definitions(files);
    // A type is its name and the file defining it: three `Inner`s are three types. An impl in a
    // file that does not define the name is of the one type of that name defined elsewhere (or,
    // should several be, of one of them: such impls are held together, to be safe).
    let mut by_type: BTreeMap<(String, String), Vec<&InherentImpl>> = BTreeMap::new();
    for i in &impls {
        let homes = defined.get(&i.name).cloned().unwrap_or_default();
        let defined_in = if homes.contains(&i.file) {
            i.file.clone()
        } else {
            homes.join(" or ")
        };
        by_type
            .entry((i.name.clone(), defined_in))
            .or_default()
            .push(i);
    }
    let mut out = Vec::new();
    for ((name, defined_in), impls) in &by_type {
        let mut files: Vec<&str> = impls.iter().map(|i| i.file.as_str()).collect();
        files.sort();
        files.dedup();
        if files.len() > 1 {
            let at: Vec<String> = impls
                .iter()
                .map(|i| format!("{}:{}", i.file, i.line))
                .collect();
            out.push(format!(
                "`impl {name}` (defined in {defined_in}) in {} files: {}; every inherent method of a type goes in one file",
                files.len(),
                at.join(", ")
            ));
        }
    }
    for (name, home, why) in HOMES {
        let of: Vec<&InherentImpl> = impls.iter().filter(|i| i.name == *name).collect();
        if !of.iter().any(|i| i.file == *home) {
            out.push(format!(
                "no `impl {name}` in {home}, its methods' home ({why}): update HOMES"
            ));
        }
        for i in of.iter().filter(|i| i.file != *home) {
            out.push(format!(
                "{}:{}: `impl {name}` outside {home}, where its methods are ({why})",
                i.file, i.line
            ));
        }
    }
    out
}

#[test]
fn each_type_has_its_methods_in_one_file() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let found = scattered_impls(&files);
    assert!(
        found.is_empty(),
        "inherent impls of one type in several files ({}):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn impl_headers_are_read() {
    let name = |h: &str| inherent_name(h);
    assert_eq!(name("impl Reliable {").as_deref(), Some("Reliable"));
    assert_eq!(
        name("impl<'r> FirstAttempt<'r> {").as_deref(),
        Some("FirstAttempt")
    );
    assert_eq!(
        name("impl<'a, Req, T, E> Fallback<'a, Req, T, E> where T: Clone, {").as_deref(),
        Some("Fallback")
    );
    assert_eq!(
        name("impl<F: Fn() -> u32> crate::a::Thing<F> {").as_deref(),
        Some("Thing")
    );
    assert_eq!(
        name("impl<S, C> fmt::Debug for BreakerService<S, C> {"),
        None
    );
    assert_eq!(name("impl std::panic::UnwindSafe for Reliable {}"), None);
    assert_eq!(
        name("impl<S, Req> Service<Req> for X<S> where S: Clone {"),
        None
    );
    assert_eq!(name("implied {"), None);
}
