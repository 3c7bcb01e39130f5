"""The seed's README example, unchanged, and the seed's public names."""

from __future__ import annotations

SEED_README_EXAMPLE = '''
from reliable import CircuitBreaker, reliable

breaker = CircuitBreaker(
    failure_rate=0.5,   # 滑动窗口失败率 >= 50% 即熔断
    window=20,          # 窗口 20 次调用
    cooldown=30.0,      # 熔断后冷却 30 秒
    probe=3,            # 半开后连续成功 3 次才闭合
)

@reliable(
    breaker=breaker,
    timeout=8.0,        # 单次调用超时
    max_attempts=5,     # 含首次共 5 次尝试
    base_delay=0.2,     # 退避基数，factor=2 指数增长
    jitter=0.1,         # ±10% 抖动，防重试同步化
    on_open=lambda *a, **k: cache_fallback(),  # 熔断期间的降级
)
def call_llm(prompt: str) -> str:
    ...
'''


def test_the_seed_readme_example_runs_unchanged() -> None:
    namespace: dict[str, object] = {}
    exec(compile(SEED_README_EXAMPLE, "seed-readme", "exec"), namespace)
    call_llm = namespace["call_llm"]
    breaker = namespace["breaker"]
    assert call_llm("hi") is None  # type: ignore[operator]
    assert breaker.state == "closed"  # type: ignore[attr-defined]
    assert breaker.stats["calls"] == 1  # type: ignore[attr-defined]


def test_the_seed_api_is_importable_by_its_names() -> None:
    from reliable import CircuitBreaker, CircuitOpenError, exp_backoff, reliable

    assert callable(reliable) and callable(exp_backoff)
    assert issubclass(CircuitOpenError, Exception)
    assert CircuitOpenError(retry_after=1.5).retry_after == 1.5
    assert CircuitBreaker().state == "closed"
