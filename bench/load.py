"""Drive a POST endpoint with wrk and return its figures as a dict.

wrk (not a Python client) generates the load so that the generator's own cost stays small and
constant on this 2-core machine; a Python load generator would compete with the server for CPU
and measure itself.

    from bench.load import run_wrk
    run_wrk(url="http://127.0.0.1:8011/append", body=b'{...}',
            headers={"Authorization": "Bearer t"}, seconds=5)

Or from a shell:  python -m bench.load URL BODY_JSON [SECONDS]
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Marker for the one machine-readable line the Lua done() hook prints after wrk's own report.
_MARKER = "WRK_JSON "

# Lua for wrk: POST the given body and headers; count every response outside 2xx (wrk's own
# "Non-2xx or 3xx" counter only counts >= 400) and report exact latency percentiles in
# microseconds so nothing has to be re-parsed from wrk's rounded, unit-suffixed text.
_LUA = """
wrk.method = "POST"
wrk.body = %(body)s
%(headers)s
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) non2xx = 0 end
function response(status, headers, body)
  if status < 200 or status > 299 then non2xx = non2xx + 1 end
end
function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + t:get("non2xx") end
  local e = summary.errors
  io.write(string.format(
    '%(marker)s{"requests":%%d,"duration_us":%%d,"non_2xx":%%d,' ..
    '"errors":{"connect":%%d,"read":%%d,"write":%%d,"timeout":%%d},' ..
    '"lat_us":{"p50":%%d,"p75":%%d,"p90":%%d,"p99":%%d,"p99_9":%%d,"max":%%d,' ..
    '"mean":%%f,"stdev":%%f}}\\n',
    summary.requests, summary.duration, bad, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(75), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean,
    latency.stdev))
end
"""


def _lua_str(value: bytes | str) -> str:
    # Escape every byte as \\ddd: safe for any body (quotes, "]]", newlines, UTF-8).
    raw = value.encode() if isinstance(value, str) else value
    return '"' + "".join(f"\\{b:03d}" for b in raw) + '"'


def _lua_script(body: bytes, headers: dict[str, str]) -> str:
    lines = [f"wrk.headers[{_lua_str(k)}] = {_lua_str(v)}" for k, v in headers.items()]
    return _LUA % {"body": _lua_str(body), "headers": "\n".join(lines), "marker": _MARKER}


def ensure_wrk() -> str:
    """Path of wrk, installing the Debian package first if it is missing."""
    path = shutil.which("wrk")
    if path:
        return path
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "wrk"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        # A fresh machine may have no package lists yet: refresh once, then retry.
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(install, env=env, check=True, capture_output=True)
    path = shutil.which("wrk")
    if not path:
        raise RuntimeError("wrk is still missing after apt-get install wrk")
    return path


def _requests_per_sec(text: str) -> float | None:
    match = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.MULTILINE)
    return float(match.group(1)) if match else None


def run_wrk(
    *,
    url: str,
    body: bytes,
    headers: dict[str, str],
    seconds: float,
    connections: int = 16,
    threads: int = 2,
) -> dict:
    """Load `url` with POSTs of `body` for `seconds`; return throughput and latency figures.

    Latencies are in milliseconds.  `non_2xx` counts every response outside 200-299;
    `socket_errors` are wrk's connect/read/write/timeout counts.
    """
    wrk = ensure_wrk()
    # wrk only takes whole seconds for -d.
    duration = max(1, math.ceil(seconds))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", prefix="wrk-") as script:
        script.write(_lua_script(body, headers))
        script.flush()
        cmd = [wrk, f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency"]
        # A generous timeout so slow commits show up as latency, not as dropped requests.
        cmd += ["--timeout", "30s", "-s", script.name, url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr or proc.stdout}")

    stats_line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(_MARKER)), None)
    if stats_line is None:
        raise RuntimeError(f"wrk printed no stats line:\n{proc.stdout}\n{proc.stderr}")
    stats = json.loads(stats_line[len(_MARKER) :])
    duration_s = stats["duration_us"] / 1e6
    report = proc.stdout.split(_MARKER, 1)[0]
    return {
        "url": url,
        "threads": threads,
        "connections": connections,
        "duration_s": round(duration_s, 3),
        "requests": stats["requests"],
        # wrk's own figure (requests / elapsed), recomputed if its text format ever changes.
        "requests_per_sec": _requests_per_sec(report) or stats["requests"] / duration_s,
        "latency_ms": {k: round(v / 1000, 3) for k, v in stats["lat_us"].items()},
        "non_2xx": stats["non_2xx"],
        "socket_errors": stats["errors"],
        "report": report,
    }


def main(argv: list[str]) -> None:
    url, body = argv[0], argv[1].encode()
    seconds = float(argv[2]) if len(argv) > 2 else 5.0
    result = run_wrk(
        url=url, body=body, headers={"Content-Type": "application/json"}, seconds=seconds
    )
    result.pop("report")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
