"""CPU instructions per append in the real server, counted by valgrind's callgrind.

    python -m bench.instructions                  # this tree, the default settings
    python -m bench.instructions --tree ../old    # another checkout's code, same harness
    python -m bench.instructions --log-level warning   # the access log off

Timings on a shared 2-core machine move by ±10-20% between runs; an instruction count does
not. `convograph serve` (uvicorn, the settings an operator gets) runs under callgrind and
takes N sequential appends of one message to one conversation, for two N; the difference
of the totals divided by the difference of N is what one append costs, with the start-up
and the shutdown taken out. One change from the defaults, so that the count does not depend
on how fast requests arrive under valgrind: the search index indexes its batch at every
256th write only, not also 0.2 s after a write (store/search_index.py); every append still
pays its share of the batches. Needs valgrind (Debian: apt-get install valgrind).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# Run inside the server's process (the tree's own `graph` package first on the path).
_SERVE = """
import os, sys
sys.path.insert(0, os.getcwd())
try:
    import graph.store.search_index as index
except ImportError:  # a tree from before the layered package
    import graph.search_index as index
index.DELAY = 1e9
from graph.__main__ import main
sys.exit(main(sys.argv[1:]))
"""

_DRIVE = """
import signal, sys, tempfile
from pathlib import Path
sys.path.insert(0, ".")
import bench.servers as servers
from bench.peers.run_peers import make_messages

count, out, script = int(sys.argv[1]), sys.argv[2], sys.argv[3]
Process = servers.Process

class UnderCallgrind(Process):
    def __init__(self, argv, env, log, port):
        if "serve" in argv:
            argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    argv[0], script, *argv[3:]]
        super().__init__(argv, env, log, port)

    def wait_listening(self, timeout=900):
        super().wait_listening(timeout)

servers.Process = UnderCallgrind
with tempfile.TemporaryDirectory() as workdir:
    server = servers.Convograph(Path(workdir), max_messages_per_call=100)
    conversation = servers.create_conversation(server, "instructions")
    body = servers.append_body(conversation, [make_messages(1)[0]])
    for _ in range(count):
        server.timed(body)
    server.client.close()
    server.process.proc.send_signal(signal.SIGINT)
    server.process.proc.wait(600)
"""


def callgrind_total(callgrind_out: Path) -> int:
    """The instructions a callgrind output file counted in all."""
    for line in callgrind_out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {callgrind_out}")


def count(tree: Path, appends: int, env: dict[str, str], scratch: Path) -> int:
    """Instructions of a server of `tree` that took `appends` appends, start to exit."""
    script, out = scratch / "serve.py", scratch / f"callgrind.{appends}"
    script.write_text(_SERVE)
    subprocess.run(
        [sys.executable, "-c", _DRIVE, str(appends), str(out), str(script)],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return callgrind_total(out)


def per_append(tree: Path, *, low: int, high: int, env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        a = count(tree, low, env, Path(scratch))
        b = count(tree, high, env, Path(scratch))
    return (b - a) / (high - low)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--low", type=int, default=100)
    parser.add_argument("--high", type=int, default=400)
    parser.add_argument("--log-level", help="CONVOGRAPH_LOG_LEVEL for the server")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is needed: apt-get install valgrind", file=sys.stderr)
        return 2
    env = dict(os.environ)
    if args.log_level:
        env["CONVOGRAPH_LOG_LEVEL"] = args.log_level
    signal.signal(signal.SIGINT, signal.default_int_handler)
    value = per_append(args.tree.resolve(), low=args.low, high=args.high, env=env)
    print(f"{args.tree}: {value:,.0f} instructions per append")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
