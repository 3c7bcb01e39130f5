"""The seed's README example, unchanged, and the seed's public names."""

from __future__ import annotations

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "seed_readme.py"


def test_the_seed_readme_example_runs_unchanged() -> None:
    namespace: dict[str, object] = {"__name__": "seed_readme"}
    exec(compile(EXAMPLE.read_text(encoding="utf-8"), str(EXAMPLE), "exec"), namespace)
    call_llm = namespace["call_llm"]
    breaker = namespace["breaker"]
    assert call_llm("hi") is None  # type: ignore[operator]
    assert breaker.state == "closed"  # type: ignore[attr-defined]
    assert breaker.stats["calls"] == 1  # type: ignore[attr-defined]
    # While the breaker is open, the README's on_open answers (cache_fallback is the user's).
    namespace["cache_fallback"] = lambda: "cached"
    breaker.force_open()  # type: ignore[attr-defined]
    assert call_llm("hi") == "cached"  # type: ignore[operator]


def test_the_seed_api_is_importable_by_its_names() -> None:
    from reliable import CircuitBreaker, CircuitOpenError, exp_backoff, reliable

    assert callable(reliable) and callable(exp_backoff)
    assert issubclass(CircuitOpenError, Exception)
    assert CircuitOpenError(retry_after=1.5).retry_after == 1.5
    assert CircuitBreaker().state == "closed"
