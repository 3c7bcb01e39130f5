//! The scenarios shipped in `scenarios/`, compiled into the library so tools (an MCP server, a
//! test harness) can load one by name without a checkout ([`crate::load::shipped`]).

/// Every shipped scenario file: (file name, text).
pub const SHIPPED: [(&str, &str); 13] = [
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
    (
        "shadow-rollout.ron",
        include_str!("../../../scenarios/shadow-rollout.ron"),
    ),
];
