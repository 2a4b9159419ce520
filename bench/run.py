"""The gateway benchmark: one command, direct to the simulator versus through the gateway.

    .venv/bin/python bench/run.py                 # the full run (~17 minutes on 2 cores; ~12 without valgrind)
    .venv/bin/python bench/run.py --quick         # shorter runs, fewer requests (~3 minutes)
    .venv/bin/python bench/run.py --only load,streams --seconds 5

It starts the provider simulator and the gateway the way production runs it (granian, ``--interface asgi``,
2 workers, PostgreSQL, ``PROMETHEUS_MULTIPROC_DIR``), drives load with wrk, and prints requests/s, latency,
the gateway's CPU per request and its memory, next to the same requests sent to the simulator directly.
It also measures ``/v1/embeddings`` and ``/v1/responses`` rows the same way, and counts the instructions a
streamed answer takes over a JSON one (``overhead``: valgrind's callgrind, when valgrind is installed).
Then it holds 1,000 slow streams, checks memory over 100k requests, repeats the main rows with the Celery
broker and Redis, runs the micro-benchmarks, and writes everything as JSON under ``bench/results/``.
See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import overhead, procfs, profiling, report, services
from harness.cache import run_cache
from harness.configs import (
    PROFILES,
    RELAY_CLIENTS,
    ROUTES,
    SIM_KEY_VARIABLE,
    SLOW_STREAM_MODEL,
    chat_body,
    chat_json,
    dump_yaml,
    gateway_config,
    model_for,
    simulator_config,
)
from harness.embeddings import run_embeddings
from harness.loadruns import Endpoints, LoadRow, run_matrix, warm_up
from harness.machine import machine_info, raise_file_limit
from harness.meter import Meter
from harness.micro import run_micro_benchmarks
from harness.reference_runs import run_reference_gateways
from harness.responses import run_responses
from harness.soak import run_soak
from harness.streams import hold_streams
from harness.summary import build_summary, summary_from_file
from harness.tracing import run_tracing
from harness.wrk import INSTALL_HINT, fixed_body_script, run_wrk, wrk_path

PHASES = ("micro", "load", "overhead", "embeddings", "responses", "cache", "reference", "profile", "streams", "soak",
          "broker", "tracing")
# The phases run against the gateway started with in-process audit (the broker phase starts its own).
_GATEWAY_PHASES = {"load", "overhead", "embeddings", "responses", "cache", "reference", "profile", "streams", "soak",
                   "tracing"}
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def log(message: str) -> None:
    print(message, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="short runs: 2 s per load run, 10 s streams, 25 s soak; no profile, broker or overhead "
                             "phase")
    parser.add_argument("--only", help=f"comma-separated phases to run, of: {', '.join(PHASES)}")
    parser.add_argument("--skip", help="comma-separated phases to leave out")
    parser.add_argument("--seconds", type=float, help="duration of each load run (default 8, quick 2)")
    parser.add_argument("--concurrency", default="10,50", help="comma-separated connection counts (default 10,50)")
    parser.add_argument("--requests", type=int, help="requests in the memory soak (default 100000, quick 10000)")
    parser.add_argument("--soak-seconds", type=float, help="time cap of the soak (default 240, quick 25)")
    parser.add_argument("--streams", type=int, default=1000, help="concurrent slow streams (default 1000)")
    parser.add_argument("--stream-seconds", type=int, help="length of each slow stream, one chunk a second "
                                                           "(default 30, quick 10)")
    parser.add_argument("--profile-seconds", type=int, default=15, help="py-spy sampling time (default 15)")
    parser.add_argument("--profile-stats", type=Path, default=None,
                        help="also write the in-process cProfile as a pstats file here (for pstats or snakeviz)")
    parser.add_argument("--profile-route", choices=("alias", "concrete"), default="alias",
                        help="the request the in-process profile sends: through the tier alias and the adaptive pick "
                             "(default) or to the concrete model")
    parser.add_argument("--sim-server", choices=("granian", "uvicorn"), default="granian",
                        help="serve the simulator with granian (default) or its own uvicorn CLI")
    parser.add_argument("--workers", type=int, default=2, help="gateway worker processes (default 2)")
    parser.add_argument("--gateway-app", default="gomodel_site.asgi:application", help="ASGI application to serve")
    parser.add_argument("--gateway-arg", action="append", default=[], help="extra granian argument (repeatable)")
    parser.add_argument("--database", default="gomodel_bench", help="PostgreSQL database, dropped and created")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/14", help="broker for the broker phase")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15", help="REDIS_URL for the broker phase")
    parser.add_argument("--output", type=Path, help="JSON file to write (default bench/results/bench-<time>.json)")
    parser.add_argument("--report", type=Path, help="print the summary of an earlier run's JSON file and exit")
    args = parser.parse_args(argv)
    args.seconds = args.seconds or (2.0 if args.quick else 8.0)
    args.requests = args.requests or (10_000 if args.quick else 100_000)
    args.soak_seconds = args.soak_seconds or (25.0 if args.quick else 240.0)
    args.stream_seconds = args.stream_seconds or (10 if args.quick else 30)
    args.concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    chosen = set(PHASES) if not args.only else {p.strip() for p in args.only.split(",")}
    chosen -= {p.strip() for p in (args.skip or "").split(",")}
    if args.quick and not args.only:
        chosen -= {"broker", "profile", "overhead"}  # more than the quick run can spend
    unknown = chosen - set(PHASES)
    if unknown:
        parser.error(f"unknown phase(s): {', '.join(sorted(unknown))}")
    args.phases = chosen
    return args


class Bench:
    """One benchmark run: the processes it started, the endpoints, and everything measured so far."""

    def __init__(self, args: argparse.Namespace, work_dir: Path) -> None:
        self.args = args
        self.work_dir = work_dir
        self.results: dict[str, Any] = {}
        self.simulator: services.Service | None = None
        self.gateway: services.Service | None = None
        self.worker: services.Service | None = None
        self.rows: list[LoadRow] = []
        self.gateway_requests = 0

    # -- processes ----------------------------------------------------------------------------------

    def start_simulator(self) -> None:
        config = simulator_config(slow_stream_chunks=self.args.stream_seconds)
        path = self.work_dir / "simulator.yaml"
        path.write_text(dump_yaml(config))
        port = services.free_port()
        self.simulator = services.start_simulator(port, path, server=self.args.sim_server, log_dir=self.work_dir)
        self.simulator_url = f"http://127.0.0.1:{port}"
        log(f"simulator ({self.args.sim_server}) on {self.simulator_url}, pid {self.simulator.pid}")

    def prepare_database(self) -> None:
        self.database_url = services.bench_database_url(self.args.database)
        services.recreate_database(self.args.database)
        env = services.gateway_environment(database_url=self.database_url, work_dir=self.work_dir, broker_url=None,
                                           redis_url=None)
        services.manage(["migrate", "--noinput", "-v0"], env)
        path = self.work_dir / "gateway.yaml"
        path.write_text(dump_yaml(gateway_config(self.simulator_url)))
        services.manage(["loadconfig", str(path)], env)
        log(f"database {self.args.database} created, migrated, routing config loaded")

    def start_gateway(self, *, broker: bool) -> None:
        env = services.gateway_environment(
            database_url=self.database_url, work_dir=self.work_dir,
            broker_url=self.args.broker_url if broker else None, redis_url=self.args.redis_url if broker else None)
        self.gateway_env = env
        port = services.free_port()
        if broker:
            self.worker = services.start_celery_worker(env, log_dir=self.work_dir)
        self.gateway = services.start_gateway(port, env, app=self.args.gateway_app, workers=self.args.workers,
                                              extra_args=self.args.gateway_arg, log_dir=self.work_dir,
                                              name="gateway-broker" if broker else "gateway")
        self.gateway_url = f"http://127.0.0.1:{port}"
        log(f"gateway on {self.gateway_url}: granian pid {self.gateway.pid}, workers {self.gateway.children()}"
            f"{', Celery broker ' + self.args.broker_url + ' + REDIS_URL' if broker else ', in-process audit'}")

    def phase_reference(self) -> None:
        """The bare ASGI relay under the same server, workers and load: the floor and the machine's noise.

        Once with the gateway's own HTTP client (``routing.clients.http1``) and once with httpx2, the general-purpose
        client it replaced on the hot path, so the report shows what the client alone costs."""
        for route, client in RELAY_CLIENTS.items():
            env = {**self.gateway_env, "BENCH_RELAY_UPSTREAM": self.simulator_url, "BENCH_RELAY_CLIENT": client,
                   "PYTHONPATH": os.pathsep.join([str(services.BENCH_DIR), str(services.REPO)])}
            port = services.free_port()
            relay = services.start_gateway(port, env, app="harness.relay_app:app", workers=self.args.workers,
                                           extra_args=self.args.gateway_arg, log_dir=self.work_dir, name=route)
            saved = self.gateway, self.gateway_url
            self.gateway, self.gateway_url = relay, f"http://127.0.0.1:{port}"
            try:
                # As the gateway is warmed up before its rows: a relay's first row must not pay for opening its
                # connections (measured cold, its JSON row's p99 held the cold start; bench/README.md).
                for stream in (False, True):
                    script = fixed_body_script(chat_json(model_for(PROFILES[0], route), stream=stream))
                    run_wrk(self.endpoints().url_for(route), script, connections=20, seconds=2.0)
                log(f"\n== reference: bare ASGI relay ({client}, no Django) on {self.gateway_url}, "
                    f"{self.args.seconds:g}s each")
                rows = run_matrix(self.meter(), self.endpoints(), concurrencies=self.args.concurrencies,
                                  streams=[False, True], profiles=[PROFILES[0]], routes=[route],
                                  seconds=self.args.seconds, setup="reference", progress=log)
                self.rows.extend(rows)
            finally:
                relay.stop()
                self.gateway, self.gateway_url = saved
        self.reference_gateways()

    def reference_gateways(self) -> None:
        """TensorZero (Rust) and Portkey (Node) under the same load, each alone, installed when missing
        (harness/reference_runs.py); one that cannot be installed or started is reported without rows."""
        assert self.simulator is not None
        outcomes = run_reference_gateways(simulator=self.simulator, simulator_url=self.simulator_url,
                                          simulator_key=self.gateway_env[SIM_KEY_VARIABLE], work_dir=self.work_dir,
                                          concurrencies=self.args.concurrencies, seconds=self.args.seconds,
                                          progress=log)
        self.results["references"] = [outcome.as_dict() for outcome in outcomes]
        for outcome in outcomes:
            self.rows.extend(outcome.rows)

    def stop_gateway(self) -> None:
        for service in (self.gateway, self.worker):
            if service is not None:
                service.stop()
        self.gateway = self.worker = None

    def stop_all(self) -> None:
        self.stop_gateway()
        if self.simulator is not None:
            self.simulator.stop()
            self.simulator = None

    def meter(self) -> Meter:
        assert self.gateway is not None
        assert self.simulator is not None
        gateway, simulator, worker = self.gateway, self.simulator, self.worker
        groups = {
            "gateway": gateway.children,
            "simulator": simulator.all_pids,
            # The backends serving the benchmark database: the in-process audit writes (or the worker's).
            "database": lambda: procfs.pids_matching(f" {self.args.database} "),
        }
        if worker is not None:
            groups["audit worker"] = worker.all_pids
        return Meter(groups)

    def endpoints(self) -> Endpoints:
        return Endpoints(self.simulator_url, self.gateway_url)

    # -- phases -------------------------------------------------------------------------------------

    def phase_micro(self) -> None:
        log("\n== micro-benchmarks")
        micro = run_micro_benchmarks(quick=self.args.quick, progress=log)
        self.results["micro"] = [vars(m) for m in micro]
        self.micro = micro

    def phase_load(self, *, setup: str, profiles: list[Any], streams: list[bool], routes: list[str]) -> None:
        log(f"\n== load runs ({setup}), {self.args.seconds:g}s each")
        self.gateway_requests += warm_up(self.endpoints(), 1.0 if self.args.quick else 2.0)
        rows = run_matrix(self.meter(), self.endpoints(), concurrencies=self.args.concurrencies, streams=streams,
                          profiles=profiles, routes=routes, seconds=self.args.seconds, setup=setup, progress=log)
        self.rows.extend(rows)
        self.gateway_requests += sum(r.wrk.requests for r in rows if r.route != "direct")

    def phase_overhead(self) -> None:
        log("\n== a stream's extra instructions over a JSON request, whole gateway in one process (callgrind)")
        if overhead.valgrind_path() is None:
            log("  skipped: valgrind is not installed (apt-get install valgrind)")
            self.results["overhead"] = {"skipped": "valgrind is not installed"}
            return
        model = model_for(PROFILES[0], "concrete")
        measured = overhead.measure(self.gateway_env, chat_json(model, stream=False), chat_json(model, stream=True))
        self.gateway_requests += 2 * (overhead.FEW + overhead.MANY + 200)
        self.results["overhead"] = measured.as_dict()
        log("  " + overhead.summary(measured, None))

    def phase_embeddings(self) -> None:
        log(f"\n== embeddings (16 texts x 256 floats a request), {self.args.seconds:g}s each")
        rows = run_embeddings(self.meter(), self.endpoints(), concurrencies=self.args.concurrencies,
                              seconds=self.args.seconds, progress=log)
        self.results["embeddings"] = rows
        self.gateway_requests += sum(r["wrk"]["requests"] for r in rows if r["route"] == "gateway")

    def phase_responses(self) -> None:
        log(f"\n== responses (the chat rows' question on /v1/responses), {self.args.seconds:g}s each")
        rows = run_responses(self.meter(), self.endpoints(), concurrencies=self.args.concurrencies,
                             seconds=self.args.seconds, progress=log)
        self.results["responses"] = rows
        self.gateway_requests += sum(r["wrk"]["requests"] for r in rows if r["route"] != "direct")

    def phase_cache(self) -> None:
        log(f"\n== response cache (a relayed miss, an exact hit, a semantic hit with its embedding), "
            f"{self.args.seconds:g}s each")
        rows = run_cache(self.meter(), self.endpoints(), concurrencies=self.args.concurrencies,
                         seconds=self.args.seconds, progress=log)
        self.results["cache"] = rows
        self.gateway_requests += sum(r["wrk"]["requests"] for r in rows)

    def phase_tracing(self) -> None:
        log(f"\n== tracing: gateway CPU per request with OpenTelemetry export off and on, {self.args.seconds:g}s each")
        self.results["tracing"] = run_tracing(self, progress=log)

    def phase_profile(self) -> None:
        self.profile_with_py_spy()
        self.profile_in_process()

    def profile_in_process(self) -> None:
        requests = 500 if self.args.quick else 1000
        log(f"\n== the request path in one process, no HTTP server (cProfile, {requests} requests, 10 in flight, "
            f"{self.args.profile_route} model)")
        body = chat_json(model_for(PROFILES[0], self.args.profile_route), stream=False)
        completed = subprocess.run(
            [sys.executable, str(Path(__file__).resolve().parent / "harness" / "inprocess.py"), "--body", body,
             "--requests", str(requests), "--warmup", "300",
             *(["--stats-file", str(self.args.profile_stats.resolve())] if self.args.profile_stats else [])],
            cwd=services.REPO, env=self.gateway_env, capture_output=True, text=True, timeout=900, check=False)
        line = next((ln for ln in reversed(completed.stdout.splitlines()) if ln.startswith("{")), None)
        if completed.returncode != 0 or line is None:
            log(f"  failed (exit {completed.returncode}): {completed.stderr.strip()[-800:]}")
            self.results["in_process"] = {"failed": completed.stderr.strip()[-2000:]}
            return
        data = json.loads(line)
        self.gateway_requests += 2 * requests + 300
        self.results["in_process"] = data
        log(f"  CPU per request without the server: {data['process_cpu_ms_per_request']:.2f} ms for the process, "
            f"{data['event_loop_thread_cpu_ms_per_request']:.2f} ms of it on the event loop's thread; "
            f"{data['python_calls_per_request']:,} Python function calls per request")
        log("  own time (share of the event loop thread's profiled CPU; calls per request):")
        for name, calls, share in data["own_time"][:15]:
            log(f"    {share:5.1f}%  {calls:7.2f}  {name}")
        log("  cumulative, the gateway's own code:")
        for name, calls, share in data["project_cumulative"][:15]:
            log(f"    {share:5.1f}%  {calls:7.2f}  {name}")

    def profile_with_py_spy(self) -> None:
        log("\n== profile of one gateway worker (py-spy)")
        py_spy = profiling.find_py_spy()
        if py_spy is None:
            log("  " + profiling.INSTALL_HINT)
            self.results["profile"] = {"skipped": profiling.INSTALL_HINT}
            return
        assert self.gateway is not None
        if "load" not in self.args.phases:
            self.gateway_requests += warm_up(self.endpoints(), 2.0)
        worker = self.gateway.children()[0]
        raw = self.work_dir / "profile.txt"
        profile = PROFILES[0]
        seconds = self.args.profile_seconds
        recorder = profiling.start_recording(py_spy, worker, seconds, raw)
        time.sleep(0.5)
        script = fixed_body_script(chat_json(profile.alias, stream=False))
        result = run_wrk(f"{self.gateway_url}/v1/chat/completions", script, connections=50, seconds=seconds + 1)
        self.gateway_requests += result.requests
        output, _ = recorder.communicate(timeout=seconds + 30)
        if not raw.exists():
            log(f"  py-spy failed: {output.strip()[-500:]}")
            self.results["profile"] = {"skipped": output.strip()[-500:]}
            return
        summary = profiling.summarise(raw)
        summary["load"] = f"{profile.alias} (tier alias -> adaptive), JSON, c=50, {result.rps:.0f} req/s"
        summary["worker_pid"] = worker
        self.results["profile"] = summary
        self.results["profile_raw"] = raw.read_text(errors="replace")
        log(f"  {summary['samples']} samples of worker {worker} (GIL holder only) under {summary['load']}")
        log("  inclusive share of the worker's Python CPU time:")
        for share, frame in summary["inclusive"][:25]:
            log(f"    {share:5.1f}%  {frame}")
        log("  self time:")
        for share, frame in summary["self"][:12]:
            log(f"    {share:5.1f}%  {frame}")

    def phase_streams(self) -> None:
        count, seconds = self.args.streams, self.args.stream_seconds
        log(f"\n== {count} concurrent slow streams through the gateway ({seconds} chunks, 1 s apart)")
        assert self.gateway is not None
        gateway = self.gateway
        body = chat_body(f"sim/{SLOW_STREAM_MODEL}", stream=True)
        peak: dict[str, float] = {"rss": 0.0}

        def sample() -> dict[str, Any]:
            rss = sum(procfs.rss_bytes(p) for p in gateway.children()) / 1024 / 1024
            peak["rss"] = max(peak["rss"], rss)
            return {"gateway_rss_mib": round(rss, 1)}

        running = self.meter().start()
        port = int(self.gateway_url.rsplit(":", 1)[1])
        outcome = asyncio.run(hold_streams("127.0.0.1", port, body, count=count, expected_events=seconds,
                                           stream_seconds=seconds, ramp_seconds=seconds / 3,
                                           sampler=sample))
        usage = running.stop()
        self.gateway_requests += count
        self.results["streams"] = {**vars(outcome), "cpu_s": usage.cpu_s, "gateway_rss_peak_mib": round(peak["rss"], 1)}
        self.streams = outcome
        log("  " + report.streams_text(outcome, peak["rss"]))
        log(f"  CPU while holding them: gateway {usage.cpu_s['gateway']:.1f}s, simulator "
            f"{usage.cpu_s['simulator']:.1f}s over {usage.wall_s:.0f}s")

    def phase_soak(self) -> None:
        log(f"\n== memory soak: {self.args.requests:,} requests (time cap {self.args.soak_seconds:.0f}s)")
        assert self.gateway is not None
        if not self.args.phases & {"load", "profile"}:
            self.gateway_requests += warm_up(self.endpoints(), 2.0)
        soak = run_soak(self.gateway_url, self.gateway.children, total=self.args.requests,
                        cap_seconds=self.args.soak_seconds, concurrency=50, progress=log)
        self.gateway_requests += soak.served
        self.results["soak"] = soak.as_dict()
        self.soak = soak
        log("  " + report.soak_text(soak))

    def audit_rows(self) -> int | None:
        try:
            import psycopg

            with psycopg.connect(f"host=127.0.0.1 port=5432 user=postgres dbname={self.args.database}") as conn:
                row = conn.execute("SELECT count(*) FROM audit_auditrevision").fetchone()
            return int(row[0]) if row else None
        except Exception as exc:  # noqa: BLE001 - informative only
            log(f"  (audit count unavailable: {exc})")
            return None


def run(args: argparse.Namespace) -> int:
    started_at = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    limits = raise_file_limit()
    if wrk_path() is None and args.phases & (_GATEWAY_PHASES - {"streams"} | {"broker"}):
        log(INSTALL_HINT)
        return 2
    work_dir = Path(tempfile.mkdtemp(prefix="gomodel-bench-"))
    bench = Bench(args, work_dir)
    results = bench.results
    results.update({"started_at": started_at, "machine": machine_info(), "open_file_limit": list(limits),
                    "load_average_start": procfs.load_average(), "argv": sys.argv[1:],
                    "phases": sorted(args.phases), "quick": args.quick, "simulator_server": args.sim_server,
                    "gateway_command": f"granian --interface asgi --workers {args.workers} "
                                       f"{' '.join(args.gateway_arg)} {args.gateway_app}".replace("  ", " ")})
    log(f"gomodel gateway benchmark, {started_at}; {results['machine']['cores']} cores "
        f"({results['machine']['cpu']}), load average {results['load_average_start']}; work dir {work_dir}")
    failed = False
    try:
        if "micro" in args.phases:
            bench.phase_micro()
        needs_servers = args.phases & (_GATEWAY_PHASES | {"broker"})
        if needs_servers:
            bench.start_simulator()
            bench.prepare_database()
        if args.phases & _GATEWAY_PHASES:
            bench.start_gateway(broker=False)
            if "reference" in args.phases:
                bench.phase_reference()
                if "load" not in args.phases:  # the gateway's own rows, for the references' ratios
                    bench.phase_load(setup="in-process audit", profiles=[PROFILES[0]], streams=[False, True],
                                     routes=["direct", "concrete", "alias"])
            if "load" in args.phases:
                bench.phase_load(setup="in-process audit", profiles=list(PROFILES), streams=[False, True],
                                 routes=list(ROUTES))
            if "overhead" in args.phases:
                bench.phase_overhead()
            if "embeddings" in args.phases:
                bench.phase_embeddings()
            if "responses" in args.phases:
                bench.phase_responses()
            if "cache" in args.phases:
                bench.phase_cache()
            if "tracing" in args.phases:
                bench.phase_tracing()
            if "profile" in args.phases:
                bench.phase_profile()
            if "streams" in args.phases:
                bench.phase_streams()
            if "soak" in args.phases:
                bench.phase_soak()
            time.sleep(2)  # the publisher flushes every 0.5 s
            results["audit_rows_in_process"] = bench.audit_rows()
            results["gateway_requests_in_process"] = bench.gateway_requests
            bench.stop_gateway()
        if "broker" in args.phases:
            before_rows, before_requests = bench.audit_rows() or 0, bench.gateway_requests
            bench.start_gateway(broker=True)
            bench.phase_load(setup="broker + Redis", profiles=[PROFILES[0]], streams=[False, True],
                             routes=list(ROUTES))
            time.sleep(5)  # publisher batch, broker, worker insert
            after_rows = bench.audit_rows()
            if after_rows is not None:
                results["audit_rows_broker"] = after_rows - before_rows
                results["gateway_requests_broker"] = bench.gateway_requests - before_requests
            bench.stop_gateway()
    except Exception:  # noqa: BLE001 - report what was measured so far, keep the logs
        failed = True
        log("\nthe benchmark stopped with an error:\n" + traceback.format_exc())
    finally:
        bench.stop_all()

    results["load"] = [r.as_dict() for r in bench.rows]
    results["load_average_end"] = procfs.load_average()
    results["finished_at"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results["load_seconds"] = args.seconds
    summary = build_summary(results, bench.rows, seconds=args.seconds, streams=getattr(bench, "streams", None),
                            soak=getattr(bench, "soak", None), micro=getattr(bench, "micro", None))
    results["summary"] = summary
    log("\n" + summary)
    output = args.output or RESULTS_DIR / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1, default=str))
    log(f"\nraw results: {output}")
    if failed:
        log(f"logs kept in {work_dir}")
    else:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.report:
        print(summary_from_file(arguments.report))
        sys.exit(0)
    sys.exit(run(arguments))
