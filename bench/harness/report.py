"""The printed tables and the verdicts against the targets, from the rows and reports of one run."""

from __future__ import annotations

from typing import Any

from harness.configs import ROUTE_LABELS
from harness.loadruns import LoadRow
from harness.micro import MicroResult
from harness.soak import SoakReport
from harness.streams import StreamReport

CPU_TARGET_MS = 1.5
RPS_TARGET = 1000.0
MAIN_SETUP = "in-process audit"
SOAK_FLAT_KIB_PER_100K = 2048  # both workers together: under 2 MiB per 100k requests counts as no growth


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def load_table(rows: list[LoadRow], all_rows: list[LoadRow]) -> str:
    """One line per run of ``rows``; gateway rows show what they add to the direct row of the same
    combination (found in ``all_rows``: the reference runs have none of their own)."""
    direct = {(r.profile, r.stream, r.concurrency): r for r in all_rows if r.route == "direct"}
    direct.update({(r.profile, r.stream, r.concurrency): r for r in rows if r.route == "direct"})  # same setup first
    worker = any("audit worker" in r.cpu_ms_per_request for r in rows)
    head = (f"{'profile':<8} {'body':<6} {'conc':>4}  {'route':<17} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'+p50 ms':>8} {'err':>4} {'gw CPU':>7} {'sim CPU':>7} {'db CPU':>7} "
            + (f"{'celery':>7} " if worker else "") + f"{'wrk CPU':>7} {'gw RSS':>7} {'others':>6}")
    units = (f"{'':<8} {'':<6} {'':>4}  {'':<17} {'':>8} {'':>8} {'':>8} {'vs dir.':>8} {'':>4} "
             f"{'ms/req':>7} {'ms/req':>7} {'ms/req':>7} " + (f"{'ms/req':>7} " if worker else "")
             + f"{'ms/req':>7} {'MiB':>7} {'cores':>6}")
    lines = [head, units, "-" * len(head)]
    for row in rows:
        base = direct.get((row.profile, row.stream, row.concurrency))
        gateway = row.route != "direct"
        added = row.wrk.p50_ms - base.wrk.p50_ms if gateway and base else None
        cpu = row.cpu_ms_per_request
        lines.append(
            f"{row.profile:<8} {'stream' if row.stream else 'json':<6} {row.concurrency:>4}  "
            f"{ROUTE_LABELS[row.route]:<17} {row.wrk.rps:>8.1f} {row.wrk.p50_ms:>8.2f} {row.wrk.p99_ms:>8.2f} "
            f"{_fmt(added, '+8.2f'):>8} {row.wrk.error_count:>4} "
            f"{_fmt(cpu.get('gateway') if gateway else None, '7.3f'):>7} {cpu.get('simulator', 0):>7.3f} "
            f"{_fmt(cpu.get('database') if gateway else None, '7.3f'):>7} "
            + (f"{_fmt(cpu.get('audit worker') if gateway else None, '7.3f'):>7} " if worker else "")
            + f"{cpu.get('generator', 0):>7.3f} "
            f"{_fmt(row.rss_mib.get('gateway') if gateway else None, '7.1f'):>7} {row.others_cpu_cores:>6.2f}"
        )
        if row.pids_changed:
            lines.append(f"    ! processes changed during the run: {', '.join(row.pids_changed)}")
    return "\n".join(lines)


def streams_text(report: StreamReport, gateway_rss_peak_mib: float | None) -> str:
    errors = ", ".join(f"{k}: {v}" for k, v in report.errors.items()) or "none"
    return (f"{report.streams} streams opened over {report.ramp_s:.1f}s, {report.open_max} open at once; "
            f"{report.ok} complete, errors: {errors}\n"
            f"  first chunk p50 {_fmt(report.ttfb_p50_s, '.3f')}s p99 {_fmt(report.ttfb_p99_s, '.3f')}s "
            f"max {_fmt(report.ttfb_max_s, '.3f')}s; "
            f"stream duration p50 {_fmt(report.duration_p50_s, '.2f')}s max {_fmt(report.duration_max_s, '.2f')}s; "
            f"longest gap between chunks {report.max_gap_s:.2f}s; gateway RSS peak "
            f"{_fmt(gateway_rss_peak_mib, '.1f')} MiB")


def soak_text(report: SoakReport) -> str:
    errors = ", ".join(f"{k}: {v}" for k, v in report.errors.items()) or "none"
    first, last = report.samples[0], report.samples[-1]
    after = [s for s in report.samples if s.requests >= report.warmup_requests and s.requests > 0]
    text = (f"{report.served:,} of {report.requested:,} requests in {report.seconds:.0f}s"
            f"{' (stopped by the time cap)' if report.capped_by_time else ''}, errors: {errors}\n"
            f"  workers RSS {first.total_kib / 1024:.1f} MiB at start, "
            f"{after[0].total_kib / 1024 if after else 0:.1f} MiB after warm-up ({report.warmup_requests:,} requests), "
            f"{last.total_kib / 1024:.1f} MiB at the end; slope after warm-up "
            f"{_fmt(report.slope_kib_per_10k, '+.1f')} KiB per 10k requests")
    if report.worker_restarts:
        text += "\n  ! a worker process was replaced during the soak: the slope is not meaningful"
    return text


def micro_text(results: list[MicroResult]) -> str:
    lines = []
    for result in results:
        lines.append(f"{result.script} (exit {result.exit_code}, {result.seconds:.0f}s)")
        for name, value in result.figures.items():
            budget = result.budgets.get(name)
            verdict = "" if budget is None else f"   budget {budget:g}: {'met' if value <= budget else 'MISSED'}"
            lines.append(f"  {name:<36} {value:>9.2f}{verdict}")
    return "\n".join(lines)


def verdicts(rows: list[LoadRow], streams: StreamReport | None, soak: SoakReport | None) -> list[dict[str, Any]]:
    """Each target with the measured figure and whether it is met."""
    out: list[dict[str, Any]] = []
    main = [r for r in rows if r.setup == MAIN_SETUP]
    json_gw = [r for r in main if r.route != "direct" and not r.stream and r.profile == "instant"
               and r.concurrency == max(x.concurrency for x in main)]
    if json_gw:
        cpu = max(r.cpu_ms_per_request["gateway"] for r in json_gw)
        out.append({"target": f"gateway CPU <= {CPU_TARGET_MS} ms per non-streaming request",
                    "measured": " / ".join(f"{ROUTE_LABELS[r.route]} {r.cpu_ms_per_request['gateway']:.2f} ms"
                                           for r in json_gw),
                    "met": cpu <= CPU_TARGET_MS})
        rps = min(r.wrk.rps for r in json_gw)
        out.append({"target": f">= {RPS_TARGET:,.0f} requests/s at concurrency {json_gw[0].concurrency}",
                    "measured": " / ".join(f"{ROUTE_LABELS[r.route]} {r.wrk.rps:,.0f} req/s" for r in json_gw),
                    "met": rps >= RPS_TARGET})
    if streams is not None:
        out.append({"target": f"{streams.streams:,} concurrent slow streams without an error",
                    "measured": f"{streams.ok:,} complete, {streams.open_max:,} open at once, "
                                f"{streams.streams - streams.ok} errors, slowest first chunk "
                                f"{_fmt(streams.ttfb_max_s, '.1f')}s",
                    "met": streams.ok == streams.streams and streams.open_max >= streams.streams})
    if soak is not None and soak.slope_kib_per_10k is not None:
        per_100k = soak.slope_kib_per_10k * 10
        flat = per_100k < SOAK_FLAT_KIB_PER_100K and not soak.errors and not soak.worker_restarts
        item = {"target": f"no memory growth over {soak.requested:,} requests",
                "measured": f"{soak.served:,} requests served, {per_100k:+.0f} KiB per 100k after warm-up "
                            f"(flat: under {SOAK_FLAT_KIB_PER_100K:,})",
                "met": flat}
        if flat and soak.served < soak.requested:
            item["met"] = None  # no growth seen, but over fewer requests than the target names
            item["measured"] += f"; only {soak.served:,} of {soak.requested:,} requests fit in the time cap"
        out.append(item)
    return out


def verdicts_text(items: list[dict[str, Any]]) -> str:
    labels = {True: "met", False: "MISSED", None: "not reached"}
    return "\n".join(f"  [{labels[i['met']]}] {i['target']}: {i['measured']}" for i in items)
