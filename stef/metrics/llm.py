"""What the LLM judge costs: latency, tokens, money, repairs of its answers, the cache."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from stef.metrics.families import Counter, Histogram
from stef.metrics.labels import LLM_BUCKETS
from stef.models import REPAIR_KINDS


class LlmMetrics:
    """The families of the LLM judge's cost, registered in exposition order."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._register_llm(registry)
        # A fixed set: at zero from the start, so rate() sees a backend's first repair.
        for kind in (*REPAIR_KINDS, "other"):
            self.judge_repairs.labels(kind=kind)

    def _register_llm(self, r: CollectorRegistry) -> None:
        """What the LLM judge costs: latency, tokens, money, cache."""
        self.llm_duration = Histogram(
            "stef_llm_request_duration_seconds",
            "LLM request latency",
            ["model", "outcome"],
            buckets=LLM_BUCKETS,
            registry=r,
        )
        self.llm_tokens = Counter(
            "stef_llm_tokens_total", "LLM tokens used", ["model", "kind"], registry=r
        )
        self.llm_cost = Counter(
            "stef_llm_cost_usd_total",
            "LLM cost from the configured price table",
            ["model"],
            registry=r,
        )
        self.judge_repairs = Counter(
            "stef_judge_repairs_total",
            "Repairs of a judge's answer (dropped ids, ungrounded filters, overruled matches)",
            ["kind"],
            registry=r,
        )
        self.cache_hits = Counter("stef_cache_hits_total", "Judge cache hits", registry=r)
        self.cache_failures = Counter(
            "stef_cache_failures_total",
            "Judge cache files given up after a failure (a full disk): the run goes on without",
            registry=r,
        )
        self.cache_misses = Counter("stef_cache_misses_total", "Judge cache misses", registry=r)

    def observe_llm_call(
        self,
        model: str,
        outcome: str,
        seconds: float,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float | None = None,
    ) -> None:
        """One HTTP call to the LLM (``outcome``: ok, error or retry)."""
        self.llm_duration.labels(model=model, outcome=outcome).observe(seconds)
        if prompt_tokens:
            self.llm_tokens.labels(model=model, kind="prompt").inc(prompt_tokens)
        if completion_tokens:
            self.llm_tokens.labels(model=model, kind="completion").inc(completion_tokens)
        if cost_usd:
            self.llm_cost.labels(model=model).inc(cost_usd)

    def observe_repairs(self, kinds: list[str]) -> None:
        """Count the repairs of one judged record, by kind (a fixed set chosen by the caller)."""
        for kind in kinds:
            self.judge_repairs.labels(kind=kind).inc()

    def observe_cache(self, hit: bool) -> None:
        (self.cache_hits if hit else self.cache_misses).inc()

    def observe_cache_failure(self) -> None:
        self.cache_failures.inc()
