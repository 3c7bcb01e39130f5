//! The scenarios shipped in `scenarios/`, compiled into the library so tools (an MCP server, a
//! test harness) can load one by name without a checkout.

use super::{Compiled, ScenarioError, load_all};

/// Every shipped scenario file: (file name, text).
pub const SHIPPED: [(&str, &str); 12] = [
    (
        "backoff-open-vs-closed.ron",
        include_str!("../../../scenarios/backoff-open-vs-closed.ron"),
    ),
    (
        "boundary-map.ron",
        include_str!("../../../scenarios/boundary-map.ron"),
    ),
    (
        "default-scaled.ron",
        include_str!("../../../scenarios/default-scaled.ron"),
    ),
    (
        "default.ron",
        include_str!("../../../scenarios/default.ron"),
    ),
    (
        "emulated-validation.ron",
        include_str!("../../../scenarios/emulated-validation.ron"),
    ),
    (
        "failure-rate-sweep.ron",
        include_str!("../../../scenarios/failure-rate-sweep.ron"),
    ),
    (
        "jitter-contention.ron",
        include_str!("../../../scenarios/jitter-contention.ron"),
    ),
    (
        "layered-stack.ron",
        include_str!("../../../scenarios/layered-stack.ron"),
    ),
    (
        "llm-provider-storm.ron",
        include_str!("../../../scenarios/llm-provider-storm.ron"),
    ),
    (
        "metastable-collapse.ron",
        include_str!("../../../scenarios/metastable-collapse.ron"),
    ),
    (
        "outage-amplification.ron",
        include_str!("../../../scenarios/outage-amplification.ron"),
    ),
    (
        "partition-heal.ron",
        include_str!("../../../scenarios/partition-heal.ron"),
    ),
];

/// The shipped scenario named `name` (a scenario's `name`, not its file's), compiled; `None` if
/// no shipped file holds one of that name.
pub fn shipped(name: &str) -> Option<Result<Compiled, ScenarioError>> {
    for (file, text) in SHIPPED {
        match load_all(text, file) {
            Ok(all) => {
                if let Some(c) = all.into_iter().find(|c| c.scenario.name == name) {
                    return Some(Ok(c));
                }
            }
            Err(e) => {
                if text.contains(&format!("name: \"{name}\"")) {
                    return Some(Err(e));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_loads_by_name() {
        let mut names = 0;
        for (file, text) in SHIPPED {
            for c in load_all(text, file).unwrap() {
                assert!(shipped(&c.scenario.name).unwrap().is_ok());
                names += 1;
            }
        }
        assert!(names >= 7);
        assert!(shipped("no such scenario").is_none());
        // Every file of scenarios/ is listed.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let on_disk = std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "ron")
            })
            .count();
        assert_eq!(on_disk, SHIPPED.len());
    }
}
