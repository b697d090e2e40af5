"""Run the benchmark suite: one line per figure on stdout, the same in bench/results.json.

    python -m bench            # the full run (3-5 minutes)
    python -m bench --quick    # fewer rounds, shorter wrk runs, a smaller peers workload
    python -m bench --only growth,tree

Every figure is a ratio (or a count) measured side by side in this run, because absolute
times on a shared 2-core machine mean little.  Everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import growth, memory, peers_compare, replace, scaleout, throughput, transcript, tree
from .report import Figure
from .servers import ROOT, Convograph, Floor

# Repetitions per mode: quick must finish in under two minutes, full in about ten.
MODES: dict[str, dict[str, Any]] = {
    "quick": {
        "wrk_rounds": 3,
        "wrk_seconds": 2,
        "growth_pairs": 100,
        "replace_reps": 3,
        "read_reps": 15,
        "peers_n": 200,
    },
    "full": {
        "wrk_rounds": 7,
        "wrk_seconds": 5,
        "growth_pairs": 400,
        "replace_reps": 7,
        "read_reps": 50,
        "peers_n": 1000,
    },
}


@dataclass
class Run:
    """What the figures of one run share: the mode's repetitions, a scratch dir, the servers."""

    mode: dict[str, Any]
    workdir: Path
    server: Convograph | None = None
    floor: Floor | None = None
    served: list[str] = field(default_factory=list)

    @property
    def convograph(self) -> Convograph:
        assert self.server is not None, "the HTTP figures run against a started server"
        return self.server

    @property
    def the_floor(self) -> Floor:
        assert self.floor is not None, "the throughput figure runs against a started floor"
        return self.floor


# Over HTTP, against one convograph process (so that its peak RSS covers them all).
HTTP_FIGURES: dict[str, Callable[[Run], Figure]] = {
    "throughput": lambda r: throughput.run(
        r.convograph, r.the_floor, rounds=r.mode["wrk_rounds"], seconds=r.mode["wrk_seconds"]
    ),
    "growth": lambda r: growth.run(r.convograph, pairs=r.mode["growth_pairs"]),
    "replace": lambda r: replace.run(r.convograph, reps=r.mode["replace_reps"]),
    "memory": lambda r: memory.run(r.convograph, r.served),
}
IN_PROCESS_FIGURES: dict[str, Callable[[Run], Figure]] = {
    "tree": lambda r: asyncio.run(tree.run(r.workdir / "tree")),
    "transcript": lambda r: asyncio.run(
        transcript.run(r.workdir / "transcript", reps=r.mode["read_reps"])
    ),
    "peers": lambda r: peers_compare.run(r.workdir / "peers", n=r.mode["peers_n"]),
    "scaleout": lambda r: scaleout.run(
        r.workdir / "scaleout", rounds=r.mode["wrk_rounds"], seconds=r.mode["wrk_seconds"]
    ),
}
ALL = (*HTTP_FIGURES, *IN_PROCESS_FIGURES)


def _git(*args: str) -> str | None:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def _measure(name: str, work: Callable[[Run], Figure], run: Run, out: dict[str, Any]) -> None:
    """Run one figure; a failure is reported and recorded without losing the others."""
    started = time.monotonic()
    try:
        figure = work(run)
    except Exception as exc:
        traceback.print_exc()
        print(f"{name}: ERROR {type(exc).__name__}: {exc}", flush=True)
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        return
    print(figure.line(), flush=True)
    out[figure.name] = {**figure.as_json(), "seconds": round(time.monotonic() - started, 1)}


def _run_figures(chosen: list[str], run: Run, out: dict[str, Any]) -> None:
    http = [name for name in HTTP_FIGURES if name in chosen]
    if http:
        run.server = Convograph(run.workdir, max_messages_per_call=replace.STORED + 1)
        run.floor = Floor(run.workdir) if "throughput" in http else None
        try:
            for name in http:
                _measure(name, HTTP_FIGURES[name], run, out)
                run.served.append(name)
        finally:
            if run.floor is not None:
                run.floor.stop()
            run.server.stop()
    for name in IN_PROCESS_FIGURES:
        if name in chosen:
            _measure(name, IN_PROCESS_FIGURES[name], run, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short run (< 2 minutes)")
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(ALL)}")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json")
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(ALL)
    unknown = set(chosen) - set(ALL)
    if unknown:
        parser.error(f"unknown figures: {', '.join(sorted(unknown))}")
    mode_name = "quick" if args.quick else "full"
    mode = MODES[mode_name]

    started = time.monotonic()
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": _git("rev-parse", "HEAD"),
        # Uncommitted changes make the commit only an approximation of what was measured.
        "dirty": bool(_git("--no-optional-locks", "status", "--porcelain", "-uno")),
        "mode": mode_name,
        "parameters": mode,
        "python": sys.version.split()[0],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "loadavg_before": os.getloadavg(),
    }
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="convograph-bench-") as tmp:
        _run_figures(chosen, Run(mode=mode, workdir=Path(tmp)), figures)

    results["loadavg_after"] = os.getloadavg()
    results["seconds"] = round(time.monotonic() - started, 1)
    results["figures"] = figures
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    missed = [name for name, f in figures.items() if not f.get("met", False)]
    print(
        f"{len(figures) - len(missed)}/{len(figures)} targets met in {results['seconds']}s; "
        f"results in {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
