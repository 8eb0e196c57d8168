"""The contract pages in docs/ say what the code does: every metric (name, type, labels, buckets),
every result field and outcome, every dead-letter reason; and no user page cites a SPEC that is not
in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from stef.metrics import DEAD_LETTER_REASONS, RECORD_OUTCOMES, BackfillMetrics, Metrics
from stef.models import ISSUE_LABELS, Outcome, Result
from tests.conftest import ROOT

DOCS = ROOT / "docs"
_ROW = re.compile(r"^\| `([a-z_:]+)` \| (counter|gauge|histogram) \|([^|]*)\|([^|]*)\|", re.M)


def _documented() -> dict[str, tuple[str, set[str], tuple[float, ...]]]:
    text = (DOCS / "metrics.md").read_text(encoding="utf-8")
    out = {}
    for name, kind, labels, buckets in _ROW.findall(text):
        assert name not in out, f"{name} documented twice"
        out[name] = (
            kind,
            set(re.findall(r"`([a-z_]+)`", labels)),
            tuple(float(b) for b in buckets.replace(" ", "").split(",") if b),
        )
    return out


def _registered() -> dict[str, tuple[str, set[str], tuple[float, ...]]]:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    out: dict[str, tuple[str, set[str], tuple[float, ...]]] = {}
    # Each concern (quality, llm, service, ...) holds its own families.
    concerns = [part for part in vars(metrics).values() if hasattr(part, "__dict__")]
    for wrapper in [w for part in concerns for w in vars(part).values()]:
        if not isinstance(wrapper, MetricWrapperBase):
            continue
        kind = wrapper._type
        name = wrapper._name + ("_total" if kind == "counter" else "")
        buckets = tuple(getattr(wrapper, "_upper_bounds", ())[:-1])  # +Inf is implied
        out[name] = (kind, set(wrapper._labelnames), buckets)
    # What the process collector exports (nothing where /proc is missing), and the other
    # collectors' families (the log lines dropped, read from stef.logs at each scrape).
    for family in registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        if family.name.startswith("process_") or name not in out:
            out[name] = (family.type, {k for s in family.samples for k in s.labels}, ())
    # What `stef backfill` serves in place of the live families.
    served = CollectorRegistry()
    BackfillMetrics(served, metrics)
    for family in served.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        out[name] = (family.type, {k for s in family.samples for k in s.labels}, ())
    return out


def test_every_registered_metric_is_documented_and_vice_versa() -> None:
    documented, registered = _documented(), _registered()
    process = {n for n in documented if n.startswith("process_")}
    if not Path("/proc/self/stat").exists():
        documented = {k: v for k, v in documented.items() if k not in process}
    assert set(registered) - set(documented) == set(), "registered, not in docs/metrics.md"
    assert set(documented) - set(registered) == set(), "in docs/metrics.md, not registered"
    for name, (kind, labels, buckets) in registered.items():
        assert documented[name] == (kind, labels, buckets), name


def test_documented_label_values_match_the_code() -> None:
    text = (DOCS / "metrics.md").read_text(encoding="utf-8")
    records_row = next(x for x in text.splitlines() if x.startswith("| `stef_records_total`"))
    for outcome in RECORD_OUTCOMES:
        assert f"`{outcome}`" in records_row
    letters_row = next(x for x in text.splitlines() if x.startswith("| `stef_dead_letters_total`"))
    for reason in DEAD_LETTER_REASONS:
        assert reason in letters_row


def test_dead_letter_reasons_are_the_ones_the_code_writes() -> None:
    text = (DOCS / "dead-letters.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z0-9_]+)` \| (?!yes|when)", text, re.M))
    assert documented == set(DEAD_LETTER_REASONS)
    # Every reason validation raises, read from the source, is one of them.
    source = (ROOT / "stef" / "stages" / "validate.py").read_text(encoding="utf-8")
    raised = set(re.findall(r'InvalidInput\(\s*"([a-z_]+)"', source))
    raised |= {"limits_exceeded"}  # built by _exceeded()
    assert raised <= documented


def test_every_result_field_and_outcome_is_documented() -> None:
    text = (DOCS / "results.md").read_text(encoding="utf-8")
    rows = "\n".join(line for line in text.splitlines() if line.startswith("| `"))
    for field in Result.model_fields:
        assert f"`{field}`" in rows, field
    for outcome in Outcome.__args__:
        assert f"| `{outcome}` |" in text, outcome
    for issue in ISSUE_LABELS:
        assert f"`{issue}`" in text, issue
    assert "safety_override" in text and "Φ =" in text


def _user_pages() -> list[Path]:
    pages = [ROOT / "README.md", ROOT / "deploy" / "README.md", ROOT / "examples" / "README.md"]
    return pages + sorted(DOCS.glob("*.md"))


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_user_page_cites_a_spec_that_is_not_shipped(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert re.search(r"\bSPEC\b", text) is None


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_readme_links_every_contract_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("input-record.md", "results.md", "dead-letters.md", "metrics.md"):
        assert f"](docs/{page}" in readme, page
