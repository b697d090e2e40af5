"""Running a program from a test: its exit code and output, or a failure when it overruns."""

from __future__ import annotations

import asyncio
from pathlib import Path


async def run_command(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    limit: float,
    merge_stderr: bool = False,
) -> tuple[int, str, str]:
    """Run `args`; (exit code, stdout, stderr). A program still running after `limit`
    seconds is killed and the test fails saying so. With `merge_stderr`, stderr goes into
    stdout and the third item is empty."""
    process = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), limit)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"`{' '.join(args)}` did not finish in {limit:.0f} s") from None
    return (
        process.returncode or 0,
        out.decode(errors="replace"),
        (err or b"").decode(errors="replace"),
    )
