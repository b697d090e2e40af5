#!/usr/bin/env bash
# The whole suite on SQLite and, side by side with it, on PostgreSQL when a server is reachable.
# CONVOGRAPH_TEST_DATABASE_URL names the PostgreSQL database to work in (tests create
# their own databases beside it); without it, the local server on 127.0.0.1:5432 is tried.
# With CONVOGRAPH_SLOW_TESTS=1 (.ci/run sets it) each backend also runs the long reliability
# variants (`pytest -m slow`), each pass bounded by CONVOGRAPH_SLOW_TIMEOUT seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
SLOW_TIMEOUT="${CONVOGRAPH_SLOW_TIMEOUT:-1500}"
# Python's bytecode cache stays on even where the environment turns it off
# (PYTHONDONTWRITEBYTECODE): otherwise every pytest process rewrites and compiles every test
# module again, and every server, CLI and migration a test starts compiles the package
# again. The caches land in __pycache__, which git ignores.
unset PYTHONDONTWRITEBYTECODE
# Two pytest workers per core (pytest-xdist): every test makes its own database and server,
# and waits on them (and on its subprocesses and browsers) about half the time, so two per
# core keep the cores busy. The long variants load the machine harder: one per core.
# Tests marked `serial` measure how fast the server answers under attack or contention
# (or fill a disk that PostgreSQL's checkpoints then cannot write to),
# so they run afterwards in a pytest of their own, with no other test beside them.
CORES=$(nproc 2>/dev/null || echo 2)
WORKERS="${CONVOGRAPH_TEST_WORKERS:-$((CORES * 2))}"
SLOW_WORKERS="${CONVOGRAPH_TEST_WORKERS:-$CORES}"
# What does not depend on the database runs in the SQLite pass only: the unit layer, SQLite's
# prepared statements, the GraphQL-over-HTTP audit, the per-process rate limits, the pages in
# a browser, the native adapters and the examples (which reach the store only through the API
# that the other files test on both backends), the wheel's install test, SQLite's group
# commit, the CORS headers, the HTTP keep-alive, a body read through a stalled event loop,
# and this script's own test (which runs it against a fake pytest).
SQLITE_ONLY=(
  tests/unit
  tests/test_prepared.py
  tests/test_group_commit.py
  tests/test_graphql_over_http_audit.py
  tests/test_rate_limits.py
  tests/test_cors.py
  tests/test_keep_alive.py
  tests/test_body_stall.py
  tests/test_inspector_browser.py
  tests/test_inspector_figures_browser.py
  tests/test_inspector_recovery_browser.py
  tests/test_graphiql_browser.py
  tests/test_adapter_entropic.py
  tests/test_adapter_manglekit.py
  tests/test_adapter_wordpress.py
  tests/test_examples.py
  tests/test_container.py
  tests/test_test_passes.py
)

# The serial run collects only the files that mark tests `serial`, not the whole suite.
mapfile -t SERIAL_FILES < <(grep -rlE --include='test_*.py' 'pytest\.mark\.serial' tests)

# Tests go to the workers one at a time (--maxschedchunk 1), in the order tests/conftest.py
# puts them in, the longest files first: by default pytest-xdist hands each worker a quarter
# of its share at once, in a row, which gave one worker every long file.
run_parallel() {  # $1: marker expression; $2: pytest workers; then a timeout command, if any
  local marks="$1" workers="$2"; shift 2
  "$@" "$PY" -m pytest -q -m "($marks) and not serial" -n "$workers" --maxschedchunk 1 \
    ${PYTEST_ARGS:-}
  local rc=$?
  [ "$rc" -eq 5 ] && rc=0  # no test of that kind selected
  return "$rc"
}

run_serial() {  # $1: marker expression; then a timeout command, if any
  local marks="$1"; shift
  "$@" "$PY" -m pytest -q -m "($marks) and serial" ${PYTEST_ARGS:-} "${SERIAL_FILES[@]}"
  local rc=$?
  [ "$rc" -eq 5 ] && rc=0
  return "$rc"
}

run_pytest() {  # the parallel part, then the serial one
  run_parallel "$@"
  local parallel_rc=$?
  local marks="$1"; shift 2
  run_serial "$marks" "$@"
  local serial_rc=$?
  [ "$parallel_rc" -eq 0 ] && [ "$serial_rc" -eq 0 ]
}

slow_pass() {  # $1: backend name; runs in the environment the caller gives it
  [ -n "${CONVOGRAPH_SLOW_TESTS:-}" ] || return 0
  echo "== long reliability variants ($1), at most ${SLOW_TIMEOUT}s"
  run_pytest slow "$SLOW_WORKERS" timeout --kill-after=30 "$SLOW_TIMEOUT"
}

# Toolchains the adapters' and the browser tests need: a pass without one skips those
# tests, and says so here, loudly, before it starts.
missing=()
command -v g++ >/dev/null 2>&1 || missing+=("g++ (the entropic adapter)")
command -v go >/dev/null 2>&1 || missing+=("go (the Manglekit adapter)")
command -v php >/dev/null 2>&1 || missing+=("php (the WordPress adapter)")
command -v chromium >/dev/null 2>&1 || missing+=("chromium (the GraphiQL and inspector pages)")
{ command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; } ||
  missing+=("node and npm (the GraphQL-over-HTTP audit)")
for what in "${missing[@]}"; do echo "!! SKIPPED: no $what: its tests will not run (.ci/run installs it)"; done

took() { echo "== $1 took $((SECONDS - $2)) s"; }

# The two backends' parallel parts run side by side: each test waits on its server,
# subprocesses or browser much of the time, so one pass alone leaves the cores half idle.
# The PostgreSQL part's output is held until the SQLite part has printed its own. The timed
# (serial) tests follow once both are done, each backend's on its own; then the long variants.
pg_url="${CONVOGRAPH_TEST_DATABASE_URL:-postgresql+asyncpg://postgres@127.0.0.1:5432/postgres}"
pg_where=$("$PY" -m tests.pg_probe --describe "$pg_url")
pg_rc=0
pg_slow_rc=0
pg_ready=0
"$PY" -m tests.pg_probe "$pg_url" && pg_ready=1
pg_env() {  # runs "$@" in the PostgreSQL pass's environment
  (export CONVOGRAPH_TEST_DATABASE_URL="$pg_url"
   PYTEST_ARGS="${PYTEST_ARGS:-} ${SQLITE_ONLY[*]/#/--ignore=}"; "$@")
}
sqlite_env() { (unset CONVOGRAPH_TEST_DATABASE_URL; "$@"); }

started=$SECONDS
if [ "$pg_ready" -eq 1 ]; then
  pg_log=$(mktemp)
  trap 'rm -f "$pg_log"' EXIT
  pg_env run_parallel "not slow" "$WORKERS" > "$pg_log" 2>&1 &
  pg_job=$!
  echo "== test passes: SQLite, and PostgreSQL ($pg_where) beside it"
else
  echo "== test pass: SQLite; PostgreSQL SKIPPED: no PostgreSQL server answered at $pg_where."
  echo "   Set CONVOGRAPH_TEST_DATABASE_URL=postgresql+asyncpg://user@host:port/db to run it."
fi
echo "== SQLite"
sqlite_env run_parallel "not slow" "$WORKERS"
sqlite_rc=$?
if [ "$pg_ready" -eq 1 ]; then
  wait "$pg_job"
  pg_rc=$?
  echo "== PostgreSQL"
  cat "$pg_log"
fi
took "parallel parts" "$started"
started=$SECONDS
echo "== timed tests, SQLite"
sqlite_env run_serial "not slow" || sqlite_rc=1
if [ "$pg_ready" -eq 1 ]; then
  echo "== timed tests, PostgreSQL"
  pg_env run_serial "not slow" || pg_rc=1
fi
took "timed tests" "$started"

sqlite_env slow_pass SQLite
sqlite_slow_rc=$?
if [ "$pg_ready" -eq 1 ]; then
  (export CONVOGRAPH_TEST_DATABASE_URL="$pg_url"; slow_pass PostgreSQL)
  pg_slow_rc=$?
fi
[ "$sqlite_rc" -eq 0 ] && [ "$pg_rc" -eq 0 ] && [ "$sqlite_slow_rc" -eq 0 ] && [ "$pg_slow_rc" -eq 0 ]
