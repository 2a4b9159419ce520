"""The run's printed summary, from the measured objects or rebuilt from a results file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from harness import overhead, procfs, reference_report, report
from harness.loadruns import LoadRow
from harness.micro import MicroResult
from harness.soak import SoakReport, SoakSample
from harness.streams import StreamReport
from harness.wrk import WrkResult


def build_summary(r: dict[str, Any], rows: list[LoadRow], *, seconds: float, streams: StreamReport | None,
                  soak: SoakReport | None, micro: list[MicroResult] | None) -> str:
    """The printed summary: the tables, the slow streams, the soak, the audit count, the micro-benchmarks and
    the verdicts (also stored in ``r["verdicts"]``)."""
    parts = [f"== summary ({r['started_at']}; load average at start {tuple(r['load_average_start'])}, "
             f"at end {tuple(r.get('load_average_end') or procfs.load_average())}; {r['machine']['cores']} cores)"]
    setups = list(dict.fromkeys(row.setup for row in rows))
    setups.sort(key=lambda name: name == "reference")  # the gateway's own tables first
    for setup in setups:
        parts.append(f"\nload runs, {setup} ({seconds:g}s each; CPU columns are CPU time per request; "
                     "'others' = cores used by other programs meanwhile):")
        parts.append(report.load_table([row for row in rows if row.setup == setup], rows))
    ratios = reference_report.ratios_text(rows, r.get("references") or [])
    if ratios is not None:
        parts.append("\n" + ratios)
    if streams is not None:
        parts.append("\nslow streams: " + report.streams_text(streams, r["streams"]["gateway_rss_peak_mib"]))
    if soak is not None:
        parts.append("\nmemory soak: " + report.soak_text(soak))
    if r.get("audit_rows_in_process") is not None:
        parts.append(f"\naudit, in process: {r['audit_rows_in_process']:,} revisions stored for "
                     f"{r['gateway_requests_in_process']:,} gateway requests answered")
    if r.get("audit_rows_broker") is not None:
        parts.append(f"audit, through the broker: {r['audit_rows_broker']:,} revisions stored for "
                     f"{r['gateway_requests_broker']:,} gateway requests answered")
    measured = r.get("overhead") or {}
    if "json_loop_instructions" in measured:  # (results files from before threads were counted apart lack it)
        parts.append("\nstream overhead, counted: " + overhead.summary(
            overhead.Overhead(measured["json_instructions"], measured["stream_instructions"],
                              measured["json_loop_instructions"], measured["stream_loop_instructions"],
                              measured["requests"]),
            _json_cpu_ms(rows)))
    if micro:
        parts.append("\nmicro-benchmarks:\n" + report.micro_text(micro))
    items = report.verdicts(rows, streams, soak)
    r["verdicts"] = items
    if items:
        parts.append("\ntargets:\n" + report.verdicts_text(items))
    return "\n".join(parts)


def _json_cpu_ms(rows: list[LoadRow]) -> float | None:
    """Gateway CPU per request of the instant JSON row to a concrete model at the highest concurrency (the
    request ``overhead`` counts), in the in-process audit setup; None without load rows."""
    candidates = [row for row in rows if row.setup == "in-process audit" and row.profile == "instant"
                  and row.route == "concrete" and not row.stream]
    if not candidates:
        return None
    return max(candidates, key=lambda row: row.concurrency).cpu_ms_per_request.get("gateway")


def summary_from_file(path: Path) -> str:
    """The summary of an earlier run, rebuilt from its JSON (``--report FILE``)."""
    r = json.loads(path.read_text())
    rows = [LoadRow(**{**d, "wrk": WrkResult(**d["wrk"]), "load_average": tuple(d["load_average"])})
            for d in r.get("load", [])]
    streams = None
    if "streams" in r:
        names = {f.name for f in dataclasses.fields(StreamReport)}
        streams = StreamReport(**{k: v for k, v in r["streams"].items() if k in names})
    soak = None
    if "soak" in r:
        data = dict(r["soak"])
        data["samples"] = [SoakSample(**sample) for sample in data["samples"]]
        soak = SoakReport(**data)
    micro = [MicroResult(**m) for m in r.get("micro", [])]
    seconds = r.get("load_seconds") or (round(rows[0].wrk.seconds) if rows else 0.0)
    return build_summary(r, rows, seconds=seconds, streams=streams, soak=soak, micro=micro)
