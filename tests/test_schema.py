"""schema.graphql is what the code serves, and it honours the public contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graph.api.schema import export_sdl

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schema.graphql"
CONTRACT_CHECK = REPO.parent / "shared" / "tools" / "contract_check.py"


def contract_check(schema: Path) -> subprocess.CompletedProcess[str]:
    # Never a skip: a CI checkout without ../shared would pass without checking the contract.
    if not CONTRACT_CHECK.is_file():
        pytest.fail(
            f"the shared contract checker is missing: looked for {CONTRACT_CHECK} "
            f"(../shared/tools/contract_check.py beside the checkout {REPO}); "
            "check out the shared contract files there",
            pytrace=False,
        )
    return subprocess.run(
        [sys.executable, str(CONTRACT_CHECK), str(schema)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_schema_graphql_matches_the_code() -> None:
    assert SCHEMA.read_text() == export_sdl(), (
        "schema.graphql is out of date with graph/schema.py: regenerate it with `make schema`"
    )


def test_schema_graphql_honours_the_contract() -> None:
    result = contract_check(SCHEMA)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_contract_check_catches_a_missing_field(tmp_path: Path) -> None:
    # The control for the test above: a schema without `Query.viewer` must fail the check.
    sdl = SCHEMA.read_text()
    assert "  viewer: Principal!\n" in sdl
    broken = tmp_path / "schema.graphql"
    broken.write_text(sdl.replace("  viewer: Principal!\n", ""))
    result = contract_check(broken)
    assert result.returncode == 1
    assert "viewer" in result.stdout


def test_a_missing_contract_checker_is_a_failure_not_a_skip(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "shared" / "tools" / "contract_check.py"
    monkeypatch.setattr(sys.modules[__name__], "CONTRACT_CHECK", missing)
    with pytest.raises(pytest.fail.Exception, match="contract checker is missing") as info:
        contract_check(SCHEMA)
    assert str(missing) in str(info.value)
