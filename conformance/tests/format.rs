//! The format's promises: every shipped sequence loads; optional blocks are well-formed or
//! refused with an error naming the problem; an unknown field is refused by name.

use std::path::PathBuf;

/// Writes `policy_extra` (JSON members) into a minimal sequence named `name` in a fresh
/// directory and loads it.
fn load_with(name: &str, policy_extra: &str) -> Result<conformance::Sequence, String> {
    let dir = std::env::temp_dir().join(format!("conformance-format-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let text = format!(
        r#"{{"format": 1, "name": "{name}", "about": "a test",
        "policy": {{"max_attempts": 1, "attempt_timeout_ms": 1000, "deadline_ms": null,
          "backoff": {{"base_ms": 100, "factor": 2.0, "cap_ms": null}}, "throttled_backoff": null,
          "max_server_delay_ms": 0, "retry_timeouts": true, "wait_on_refusal": false,
          "breaker": null, "budget": null{policy_extra}}},
        "calls": [{{"start_ms": 0, "answers": [{{"status": 200}}]}}]}}"#
    );
    let path: PathBuf = dir.join(format!("{name}.json"));
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    conformance::load(&path)
}

#[test]
fn every_shipped_sequence_loads() {
    let all = conformance::sequences().unwrap();
    assert!(all.len() >= 58, "{} sequences", all.len());
}

#[test]
fn a_static_limit_and_a_fixed_hedge_still_load_as_before() {
    let s = load_with(
        "old-fields",
        r#", "idempotent": true, "hedge": {"delay_ms": 50, "max_hedges": 1},
            "limit": {"max_in_flight": 2}"#,
    )
    .unwrap();
    let limit = s.policy.limit().unwrap();
    assert_eq!(limit, reliable_core::limit::LimiterConfig::bulkhead(2));
    let hedge = s.policy.hedge().unwrap();
    assert_eq!(
        hedge.delay,
        reliable_core::hedge::HedgeDelay::Fixed(reliable_core::Duration::from_millis(50))
    );
}

#[test]
fn adaptive_limits_and_a_quantile_delay_become_the_cores_configs() {
    let s = load_with(
        "new-fields",
        r#", "idempotent": true,
            "hedge": {"quantile": {"q": 0.9, "window": 50, "min_samples": 5, "min_ms": 2, "max_ms": 500}, "max_hedges": 2},
            "limit": {"gradient": {"initial": 4, "min": 1, "max": 8, "tolerance": 1.5, "smoothing": 0.2, "long_window": 10, "queue": 2}}"#,
    )
    .unwrap();
    let reliable_core::hedge::HedgeDelay::Quantile(q) = s.policy.hedge().unwrap().delay else {
        panic!("a quantile delay expected");
    };
    assert_eq!((q.quantile, q.window, q.min_samples), (0.9, 50, 5));
    assert_eq!(q.max, reliable_core::Duration::from_millis(500));
    let limit = s.policy.limit().unwrap();
    assert!(matches!(
        limit.rule,
        reliable_core::limit::LimitRule::Gradient { queue: 2, .. }
    ));
    assert_eq!((limit.initial, limit.min, limit.max), (4, 1, 8));
    let s = load_with(
        "aimd",
        r#", "limit": {"aimd": {"initial": 3, "min": 1, "max": 4, "backoff": 0.5, "increase": 1}}"#,
    )
    .unwrap();
    assert!(matches!(
        s.policy.limit().unwrap().rule,
        reliable_core::limit::LimitRule::Aimd { increase: 1, .. }
    ));
}

#[test]
fn ill_formed_optional_blocks_are_refused_by_name() {
    let cases = [
        (
            r#", "hedge": {"delay_ms": 50, "quantile": {"q": 0.95, "window": 20, "min_samples": 3, "min_ms": 1, "max_ms": 9}, "max_hedges": 1}"#,
            "exactly one of delay_ms and quantile",
        ),
        (
            r#", "hedge": {"max_hedges": 1}"#,
            "exactly one of delay_ms and quantile",
        ),
        (
            r#", "limit": {}"#,
            "exactly one of max_in_flight, aimd and gradient",
        ),
        (
            r#", "limit": {"max_in_flight": 1, "aimd": {"initial": 3, "min": 1, "max": 4, "backoff": 0.5, "increase": 1}}"#,
            "exactly one of max_in_flight, aimd and gradient",
        ),
        (
            r#", "limit": {"aimd": {"initial": 3, "min": 1, "max": 4, "backoff": 0.5, "increase": 1, "step": 2}}"#,
            "unknown field `step`",
        ),
        (r#", "limit": {"vegas": {}}"#, "unknown field `vegas`"),
        (r#", "hedges": 1"#, "unknown field `hedges`"),
    ];
    for (i, (extra, want)) in cases.into_iter().enumerate() {
        let e = load_with(&format!("bad-{i}"), extra).unwrap_err();
        assert!(e.contains(want), "case {i}: {e}");
    }
}
