"""The Grafana dashboard: every panel the issue asks for, and every metric a panel queries is one the gateway
exports (defined with prometheus_client in routing/ or audit/), so a renamed metric fails here and not in
front of an operator."""

from __future__ import annotations

import ast
import json
import re
import warnings
from pathlib import Path
from typing import Any

from tests.gateway_process import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "gomodel.json"
METRIC_CLASSES = {"Counter": ("_total",), "Gauge": ("",), "Histogram": ("_bucket", "_sum", "_count"),
                  "Summary": ("_sum", "_count", "")}


def exported_series() -> set[str]:
    """Every series name the gateway's metric definitions produce (a histogram's _bucket, _sum and _count...)."""
    names: set[str] = set()
    for path in [*(ROOT / "routing").rglob("*.py"), *(ROOT / "audit").rglob("*.py")]:
        if "migrations" in path.parts or "simulator" in path.parts:
            continue
        names |= _series_in(path)
    return names


def _series_in(path: Path) -> set[str]:
    names: set[str] = set()
    with warnings.catch_warnings():  # an odd escape in some module's docstring is not this test's business
        warnings.simplefilter("ignore")
        tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in METRIC_CLASSES):
            continue
        if not (node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            continue
        base = node.args[0].value.removesuffix("_total") if node.func.id == "Counter" else node.args[0].value
        names |= {base + suffix for suffix in METRIC_CLASSES[node.func.id]}
    return names


def panels() -> list[dict[str, Any]]:
    return list(json.loads(DASHBOARD.read_text())["panels"])


def test_the_dashboard_has_every_panel_the_operators_need() -> None:
    titles = " | ".join(p["title"].lower() for p in panels())
    for topic in ("requests", "errors", "latency", "tier mix", "target health", "cooldowns", "spend",
                  "limit rejections", "audit lag", "shared state"):
        assert topic in titles, topic
    assert all(p["datasource"]["uid"] == "prometheus" for p in panels())


def test_every_metric_a_panel_queries_exists() -> None:
    exported = exported_series()
    assert "gomodel_requests_total" in exported  # the scan finds the gateway's own definitions
    assert "gomodel_request_duration_seconds_bucket" in exported
    queried: set[str] = set()
    for panel in panels():
        for target in panel["targets"]:
            names = set(re.findall(r"\b(gomodel_[a-z0-9_]+)\b", target["expr"]))
            assert names, f"{panel['title']}: {target['expr']} queries no gateway metric"
            queried |= names
    unknown = queried - exported
    assert not unknown, f"the dashboard queries metrics the gateway does not export: {sorted(unknown)}"


def test_the_scan_refuses_a_metric_that_does_not_exist(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('from prometheus_client import Counter, Histogram\nA = Counter("x_total", "a")\n'
                      'B = Histogram("y_seconds", "b", ["l"])\n')
    assert _series_in(module) == {"x_total", "y_seconds_bucket", "y_seconds_sum", "y_seconds_count"}
