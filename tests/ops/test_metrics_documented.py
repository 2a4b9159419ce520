"""Every Prometheus metric the code defines is in docs/observability.md's metrics tables, with its type and labels,
and every ``gomodel_*`` metric name a document mentions is one the code exports.

The exported metrics are read from prometheus_client's registry after importing every module of the gateway that
constructs one (found by reading the source, so a new metrics module is covered without being listed here).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from prometheus_client import REGISTRY

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("routing", "audit", "gomodel_site")
CONSTRUCTOR = re.compile(r"\b(?:Counter|Gauge|Histogram|Summary|Info|Enum)\(\s*\"gomodel_")
TABLE_ROW = re.compile(r"^\| `(gomodel_[a-z0-9_]+)` \| (counter|gauge|histogram)[^|]* \| ([^|]*) \|", re.M)
NAME = re.compile(r"\bgomodel_[a-z0-9_]+")
# gomodel_* words in the documents that are not metrics: the Django project's package and a tool's name.
NOT_METRICS = frozenset({"gomodel_site", "gomodel_json_output"})


def metric_modules() -> list[str]:
    modules = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if CONSTRUCTOR.search(path.read_text()):
                modules.append(".".join(path.relative_to(REPO).with_suffix("").parts))
    return modules


def exported() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Exposition name -> (type, label names) of every gomodel_* metric the code defines."""
    for module in metric_modules():
        importlib.import_module(module)
    found = {}
    for collector in list(REGISTRY._collector_to_names):  # the registry's own collectors list: no public accessor
        name = getattr(collector, "_name", "")
        if name.startswith("gomodel_"):
            kind = collector._type
            found[name + "_total" if kind == "counter" else name] = (kind, tuple(collector._labelnames))
    return found


def documented(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    rows = {}
    for name, kind, labels in TABLE_ROW.findall(text):
        rows[name] = (kind, tuple(re.findall(r"`([a-z_]+)`", labels)))
    return rows


def test_it_finds_the_metric_modules():
    assert {"routing.ops.metrics", "routing.ops.policy_metrics", "audit.metrics"} <= set(metric_modules())


def test_it_documents_every_exported_metric_with_its_type_and_labels():
    code = exported()
    docs = documented((REPO / "docs" / "observability.md").read_text())
    assert sorted(set(code) - set(docs)) == [], "exported but not in docs/observability.md"
    assert sorted(set(docs) - set(code)) == [], "in docs/observability.md but not exported"
    assert {n: v for n, v in docs.items() if code[n] != v} == {}, "type or labels differ from the code"


def test_it_mentions_no_metric_the_code_does_not_export():
    code = exported()
    unknown = {}
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for name in set(NAME.findall(path.read_text())) - NOT_METRICS:
            # A name ending in "_" is a family's prefix, as in gomodel_pro_routing_*.
            prefix = name.endswith("_")
            if not (any(exposed.startswith(name) for exposed in code) if prefix else name in code):
                unknown.setdefault(path.name, []).append(name)
    assert unknown == {}
