//! Every public name of the crate says one thing: no two public items of `src/` share a name
//! (two `Classify` or two `ResponseFuture` in different modules read the same in a `use` list
//! and in the docs), and none takes a name of `reliable-core`'s that a user of this crate also
//! imports, except the few listed below with the reason they stay.
//!
//! The items are read from the sources: `pub` structs, enums, unions, traits, type aliases,
//! functions, consts and statics at the top level of a file, or inside a top-level macro call
//! (`pin_project!`). Methods, fields and modules are not items here (modules live in a namespace of
//! their own).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Names this crate shares with the core on purpose: the core's type is one a user of this crate
/// does not import (the std crate wraps or replaces it).
const SAME_NAME_AS_CORE: &[(&str, &str)] = &[
    (
        "OnStoreFailure",
        "the core's policy::OnStoreFailure is how a policy file writes it (feature `policy`, \
         serde); this one (fleet) is the fleet runtime's, built without the policy format: the \
         same two choices, Local and Refuse, one for one",
    ),
    (
        "Plan",
        "the core's engine::Plan is what a policy says about one call as a whole, as the engine \
         reads it; this one (policy) is a loaded policy file, its routes in fallback order",
    ),
    (
        "Policy",
        "the core's policy::Policy is a policy file's entry, which this crate names \
         policy::PolicyEntry; tower::Policy is how a tower layer copies a request and tells it \
         its deadline",
    ),
    (
        "Observer",
        "the core's breaker::Observer is the core breaker's transition hook, which this crate \
         implements itself and hands on to this Observer",
    ),
    (
        "Registry",
        "the core's registry::Registry is a fixed-capacity map for no_std faces; std users use \
         this one",
    ),
    (
        "Snapshot",
        "the core's breaker::Snapshot is a bare breaker's; this one is an instance's and carries \
         the breaker's state and counts itself",
    ),
    (
        "Quota",
        "the core's budget::Quota is a kind of retry budget, configured through BudgetConfig; \
         this one (llm) is a rate limit a provider reported",
    ),
];

/// Name → where it is defined (`file:line kind`).
type Items = BTreeMap<String, Vec<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The kind and name of a `pub` item declared on `line` (already without its indentation).
fn item(line: &str) -> Option<(&str, &str)> {
    let mut words = line.strip_prefix("pub ")?.split_whitespace().peekable();
    let kind = loop {
        let word = words.next()?;
        match word {
            "async" | "unsafe" | "extern" | "\"C\"" => continue,
            "const" if words.peek() == Some(&"fn") => continue,
            "struct" | "enum" | "union" | "trait" | "type" | "fn" | "const" | "static" => {
                break word;
            }
            _ => return None,
        }
    };
    let rest = words.next()?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some((kind, &rest[..end])).filter(|(_, name)| !name.is_empty())
}

fn public_items(root: &Path) -> Items {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    let mut items = Items::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut in_macro = false;
        for (n, line) in text.lines().enumerate() {
            let body = line.trim_start();
            let indent = line.len() - body.len();
            if indent == 0 && body.ends_with("! {") {
                in_macro = true;
            } else if indent == 0 && body.starts_with('}') {
                in_macro = false;
            }
            if indent != 0 && !(in_macro && indent == 4) {
                continue;
            }
            if let Some((kind, name)) = item(body) {
                let at = file.strip_prefix(root).unwrap_or(&file).display();
                items
                    .entry(name.to_string())
                    .or_default()
                    .push(format!("{at}:{} {kind}", n + 1));
            }
        }
    }
    items
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_two_public_items_share_a_name() {
    let items = public_items(&crate_dir().join("src"));
    assert!(
        items.len() > 50,
        "the scan found only {} public names: is the parser still reading the sources?",
        items.len()
    );
    let twice: Vec<String> = items
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(name, at)| format!("{name}: {}", at.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "public names defined more than once (give each a name that says what it is):\n{}",
        twice.join("\n")
    );
}

#[test]
fn no_public_item_takes_a_core_name() {
    let core_src = crate_dir().join("../core/src");
    assert!(
        core_src.is_dir(),
        "reliable-core's sources are expected at {}",
        core_src.display()
    );
    let ours = public_items(&crate_dir().join("src"));
    let core = public_items(&core_src);
    assert!(core.contains_key("BreakerConfig") && core.contains_key("Rejection"));
    let allowed = |name: &str| SAME_NAME_AS_CORE.iter().any(|(n, _)| *n == name);
    let shared: Vec<String> = ours
        .iter()
        .filter(|(name, _)| core.contains_key(*name) && !allowed(name))
        .map(|(name, at)| {
            format!(
                "{name}: here {}, core {}",
                at.join(", "),
                core[name].join(", ")
            )
        })
        .collect();
    assert!(
        shared.is_empty(),
        "public names that are also the core's (rename, or list in SAME_NAME_AS_CORE with why):\n{}",
        shared.join("\n")
    );
    let stale: Vec<&str> = SAME_NAME_AS_CORE
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !(ours.contains_key(*n) && core.contains_key(*n)))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer shared, drop from SAME_NAME_AS_CORE: {stale:?}"
    );
}

#[test]
fn the_scanner_reads_items_and_skips_the_rest() {
    assert_eq!(
        item("pub struct BreakerService<S, C> {"),
        Some(("struct", "BreakerService"))
    );
    assert_eq!(
        item("pub const fn accepted(class: ErrorClass)"),
        Some(("fn", "accepted"))
    );
    assert_eq!(item("pub const GRACE: u32 = 1;"), Some(("const", "GRACE")));
    assert_eq!(
        item("pub type RetryFuture<Res> = X;"),
        Some(("type", "RetryFuture"))
    );
    assert_eq!(item("pub trait Classify {"), Some(("trait", "Classify")));
    assert_eq!(item("pub mod tower;"), None);
    assert_eq!(item("pub use error::Error;"), None);
    assert_eq!(item("pub(crate) struct Inner {"), None);
}
