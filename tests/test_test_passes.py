"""tools/test_passes.sh (make test), run against a fake pytest and PostgreSQL probe: its exit
code in each combination of passes that fail, and what it runs when."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Stands in for `python -m pytest` (found first, in the script's working directory): logs
# what it was asked to run, and exits as FAKE_RC says for that part (0 otherwise).
FAKE_PYTEST = """\
import os, sys, time
backend = "pg" if os.environ.get("CONVOGRAPH_TEST_DATABASE_URL") else "sqlite"
marks = sys.argv[sys.argv.index("-m") + 1]
kind = ("slow-" if "(slow)" in marks else "") + ("serial" if "and serial" in marks else "parallel")
part = f"{backend}-{kind}"
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(f"start {part}\\n")
time.sleep(0.3)
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(f"end {part}\\n")
print(f"output of {part}")
codes = dict(item.split("=") for item in os.environ.get("FAKE_RC", "").split() if item)
sys.exit(int(codes.get(part, 0)))
"""

FAKE_PROBE = """\
import os, sys
if sys.argv[1] == "--describe":
    print("fake:5432/postgres")
    sys.exit(0)
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write("probe\\n")
sys.exit(0 if os.environ.get("FAKE_PG") == "up" else 1)
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "test_passes.sh", tmp_path / "tools")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    python = venv / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (tmp_path / "pytest.py").write_text(FAKE_PYTEST)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "pg_probe.py").write_text(FAKE_PROBE)
    # A file that marks tests serial, for the script's grep (spelled apart: not this one).
    (tmp_path / "tests" / "test_timed.py").write_text("import pytest\npytest.mark." + "serial\n")
    return tmp_path


def outside_environment() -> dict[str, str]:
    """This process's environment without the settings of the run it is part of."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("CONVOGRAPH_", "PYTEST"))}


def passes(tree: Path, *, pg: bool, rc: str = "", slow: bool = False) -> tuple[int, str, list[str]]:
    log = tree / "log"
    log.write_text("")
    env = outside_environment()
    env.update(FAKE_LOG=str(log), FAKE_PG="up" if pg else "down", FAKE_RC=rc, TMPDIR=str(tree))
    env["CONVOGRAPH_TEST_WORKERS"] = "1"
    if slow:
        env["CONVOGRAPH_SLOW_TESTS"] = "1"
    done = subprocess.run(
        ["bash", str(tree / "tools" / "test_passes.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, log.read_text().splitlines()


def test_postgresql_is_probed_once(tree: Path) -> None:
    """The probe ran twice (a block left over in the script): a server that does not answer
    cost its 5 s connect timeout twice before any test ran."""
    for pg in (True, False):
        rc, _, log = passes(tree, pg=pg)
        assert rc == 0
        assert log.count("probe") == 1, log


def test_the_serial_parts_run_alone_after_both_parallel_parts(tree: Path) -> None:
    rc, out, log = passes(tree, pg=True)
    assert rc == 0, out
    parallel = {
        "start sqlite-parallel",
        "start pg-parallel",
        "end sqlite-parallel",
        "end pg-parallel",
    }
    assert set(log[1:5]) == parallel, log
    assert log[5:] == [
        "start sqlite-serial",
        "end sqlite-serial",
        "start pg-serial",
        "end pg-serial",
    ]
    # Nothing of either backend's output lost, and the held log removed.
    for part in ("sqlite-parallel", "pg-parallel", "sqlite-serial", "pg-serial"):
        assert f"output of {part}" in out
    assert out.index("output of sqlite-parallel") < out.index("== PostgreSQL")
    assert out.index("output of pg-parallel") < out.index("== timed tests")
    assert sorted(p.name for p in tree.iterdir() if p.name.startswith("tmp")) == []


@pytest.mark.parametrize(
    ("pg", "rc", "expected"),
    [
        (True, "", 0),
        (False, "", 0),
        # No test of that kind selected (pytest's 5) is no failure.
        (True, "sqlite-parallel=5 pg-parallel=5 sqlite-serial=5 pg-serial=5", 0),
        (True, "sqlite-parallel=1", 1),
        (True, "pg-parallel=1", 1),
        (True, "sqlite-serial=1", 1),
        (True, "pg-serial=1", 1),
        (True, "pg-parallel=2", 1),
        (False, "sqlite-serial=1", 1),
        (False, "pg-parallel=1", 0),  # no PostgreSQL pass at all
    ],
)
def test_the_exit_code_says_whether_any_part_failed(
    tree: Path, pg: bool, rc: str, expected: int
) -> None:
    code, out, _ = passes(tree, pg=pg, rc=rc)
    assert code == expected, out


def test_a_failed_long_variant_fails_the_run(tree: Path) -> None:
    for rc in ("sqlite-slow-parallel=1", "pg-slow-serial=1"):
        code, out, log = passes(tree, pg=True, rc=rc, slow=True)
        assert code == 1, out
        assert log[-4:] == [
            "start pg-slow-parallel",
            "end pg-slow-parallel",
            "start pg-slow-serial",
            "end pg-slow-serial",
        ]


HANGING = """\
import asyncio
import pytest

@pytest.fixture
async def never_stops():
    yield
    await asyncio.Event().wait()  # as a server whose shutdown waits on a task that goes on

async def test_whose_teardown_hangs(never_stops):
    pass

async def test_after_it():
    pass
"""


def test_a_hanging_test_fails_by_name_and_the_run_goes_on(tmp_path: Path) -> None:
    """A PostgreSQL pass once hung for good in a teardown (the event listener's stop), and
    make test with it, until CI's own limit said nothing of where: with this project's pytest
    settings a hang is an error of that test after the timeout (shortened here), and the
    next test runs."""
    (tmp_path / "test_hanging.py").write_text(HANGING)
    env = outside_environment()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            "-p",
            "no:cacheprovider",
            "-o",
            "timeout=2",
            "-rA",
            str(tmp_path / "test_hanging.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1, out
    assert "ERROR test_hanging.py::test_whose_teardown_hangs - Failed: Timeout (>2.0s)" in out
    assert "PASSED test_hanging.py::test_after_it" in out
