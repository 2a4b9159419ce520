"""``python -m routing.simulator``: serve the provider simulator in the foreground."""

from __future__ import annotations

import argparse
import sys

from routing.simulator.config import ConfigError, load_config
from routing.simulator.server import serve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m routing.simulator",
        description="Serve simulated OpenAI, Azure OpenAI, Anthropic and Gemini endpoints.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=18001, help="port to listen on; 0 picks a free one")
    parser.add_argument("--config", help="YAML or JSON file with models, defaults and faults")
    parser.add_argument("--latency-ms", type=float, help="latency of every model whose config sets none")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, latency_ms=args.latency_ms)
    except ConfigError as exc:
        print(f"simulator: {exc}", file=sys.stderr)
        return 2
    try:
        serve(config, args.host, args.port)
    except OSError as exc:
        print(f"simulator: cannot listen on {args.host}:{args.port} ({exc.strerror})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
