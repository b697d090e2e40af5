"""The outage log: one warning line per interval, saying how many failures it stood for."""

from __future__ import annotations

import logging

import pytest

from graph.api.execution import outage_log


def test_one_line_per_interval_counting_the_failures_between(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr("graph.api.execution.outage_log.time.monotonic", lambda: now[0])
    outage = outage_log._Outage()
    logger = logging.getLogger("convograph.test_outage")
    with caplog.at_level(logging.WARNING, logger="convograph.test_outage"):
        outage.note(logger, "r1", ConnectionRefusedError(111, "Connect call failed"))
        for i in range(5):
            now[0] += 1
            outage.note(logger, f"q{i}", ConnectionRefusedError(111, "Connect call failed"))
        now[0] += outage_log.INTERVAL
        outage.note(logger, "r2", TimeoutError())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("request r1: the database is unavailable (")
    assert "Connect call failed" in lines[0] and "more" not in lines[0]
    assert lines[1] == (
        "request r2: the database is unavailable (TimeoutError); "
        "5 more such failures since the last line"
    )
    assert all(r.levelno == logging.WARNING and not r.exc_info for r in caplog.records)
