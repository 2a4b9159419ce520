"""The response cache rows: the chat rows' request answered by a relayed miss, an exact hit and a semantic hit.

Per profile (instant, 50 ms upstream), JSON and stream:

- ``miss``: ``sim/<profile>``, a name without a cache: every request is relayed to the simulator (the load phase's
  ``gateway`` row, measured again in the same run for the comparison);
- ``hit``: ``cached/<profile>``, the same upstream model under a name with an exact cache: one request fills the
  entry before the run, every request of the run is an exact hit (no upstream call);
- ``semantic hit``: ``semantic/<profile>``, a name with a semantic cache over ``sim/embed``: one request fills the
  entry with the question, the run sends a paraphrase (the question with one more word), which misses the exact
  key, so every request embeds its turn through the gateway's own embeddings route (an upstream embeddings call)
  and is served the filled answer from the nearest vector.

The cache is the in-process one (the gateway's workers each keep their own: the filling request is sent often
enough to reach every worker), as in the other in-process-audit rows.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from harness.configs import PROFILES, QUESTION, chat_body
from harness.loadruns import MIB, Endpoints
from harness.meter import Meter
from harness.wrk import fixed_body_script, run_wrk

PARAPHRASE = "Hi, where is my order 48213 please? It was supposed to arrive on Tuesday."
ROWS = (("miss", "sim/{}", QUESTION), ("hit", "cached/{}", QUESTION), ("semantic hit", "semantic/{}", PARAPHRASE))


def _post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers.get("X-GoModel-Cache", ""), response.read()


def _fill(url: str, model: str, *, stream: bool, question: str, expect: str) -> None:
    """Fill ``model``'s entry with the question in every worker (each fills its own), then check that ``question``
    is answered ``expect`` by all of them: a hit writes nothing, so the check changes no entry."""
    for _ in range(24):
        _post(url, chat_body(model, stream=stream))
    seen = {_post(url, chat_body(model, stream=stream, question=question))[0] for _ in range(12)}
    if seen != {expect}:
        raise RuntimeError(f"{model} answered {sorted(seen)}, not only {expect!r}")


def run_cache(meter: Meter, endpoints: Endpoints, *, concurrencies: list[int], seconds: float,
              progress: Any = print) -> list[dict[str, Any]]:
    rows = []
    url = f"{endpoints.gateway_url}/v1/chat/completions"
    for profile in PROFILES:
        upstream = profile.concrete_model.split("/", 1)[1]
        for stream in (False, True):
            for label, pattern, question in ROWS:
                model = pattern.format(upstream)
                if label != "miss":
                    _fill(url, model, stream=stream, question=question,
                          expect="hit" if label == "hit" else "semantic-hit")
                body = json.dumps(chat_body(model, stream=stream, question=question), separators=(",", ":"))
                for concurrency in concurrencies:
                    running = meter.start()
                    result = run_wrk(url, fixed_body_script(body), connections=concurrency, seconds=seconds)
                    usage = running.stop()
                    done = max(1, result.requests)
                    cpu = {name: round(value / done * 1000, 3) for name, value in usage.cpu_s.items()}
                    rss = {name: round(sum(values) / MIB, 1) for name, values in usage.rss_bytes.items()}
                    rows.append({"profile": profile.name, "stream": stream, "route": label,
                                 "concurrency": concurrency, "wrk": result.as_dict(), "cpu_ms_per_request": cpu,
                                 "rss_mib": rss})
                    kind = "stream" if stream else "json"
                    progress(f"  cache {profile.name:<7} {kind:<6} c={concurrency:<3} {label:<12} "
                             f"{result.rps:8.1f} req/s  p50 {result.p50_ms:7.2f} ms  p99 {result.p99_ms:7.2f} ms  "
                             f"gw CPU {cpu.get('gateway', 0):6.3f} ms/req  sim CPU {cpu.get('simulator', 0):6.3f} "
                             f"ms/req  errors {result.error_count}")
                    time.sleep(0.5)
    return rows
