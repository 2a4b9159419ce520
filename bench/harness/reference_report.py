"""The gateway's CPU per request against the references of the same run: the bare relays, TensorZero, Portkey.

Ratios are only ever taken between rows of one run (the same machine, minutes apart), never against figures
from another run: on a shared machine CPU per request moves by 0.1-0.2 ms from one run to the next.
"""

from __future__ import annotations

from typing import Any

from harness.configs import PROFILES, ROUTE_LABELS
from harness.loadruns import LoadRow

MAIN_SETUP = "in-process audit"
OURS = "concrete"


def ratios_text(rows: list[LoadRow], references: list[dict[str, Any]]) -> str | None:
    """One line per reference with its CPU per request and ours over it, by body and concurrency; the
    references that have no rows, with the reason. None when the run has no gateway rows to compare."""
    profile = PROFILES[0].name
    ours = {(r.stream, r.concurrency): r for r in rows
            if r.setup == MAIN_SETUP and r.route == OURS and r.profile == profile}
    if not ours:
        return None
    columns = sorted(ours, key=lambda key: (key[0], key[1]))
    theirs: dict[str, dict[tuple[bool, int], LoadRow]] = {}
    for row in rows:
        if row.setup == "reference" and row.profile == profile:
            theirs.setdefault(row.route, {})[(row.stream, row.concurrency)] = row
    names = {ref["route"]: f"{ref['name']} {ref['version']}" for ref in references}
    head = f"{'':<22}" + "".join(f"{('stream' if s else 'json') + f' c={c}':>17}" for s, c in columns)
    lines = [f"gateway CPU per request against the references of this run ({profile} profile, ms; "
             f"'x' = ours / theirs, over 1 means we spend more):", head]
    lines.append(f"{'gateway (ours)':<22}" + "".join(f"{_cpu(ours[key]):>17.3f}" for key in columns))
    for route, measured in theirs.items():
        cells = []
        for key in columns:
            row = measured.get(key)
            if row is None or not _cpu(row):
                cells.append(f"{'-':>17}")
            else:
                cells.append(f"{_cpu(row):>9.3f} {_cpu(ours[key]) / _cpu(row):>5.2f}x ")
        lines.append(f"{ROUTE_LABELS.get(route, route):<22}" + "".join(cells))
    for ref in references:
        if ref.get("missing"):
            lines.append(f"  {ref['name']} {ref['version']}: no rows in this run: {ref['missing']}")
    versions = [names[route] for route in theirs if route in names]
    if versions:
        lines.append(f"  ({', '.join(versions)})")
    return "\n".join(lines)


def _cpu(row: LoadRow) -> float:
    return float(row.cpu_ms_per_request.get("gateway", 0.0))
