"""Logging's configuration: each record is built without the caller lookup nobody prints."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import orjson
import pytest

from graph.server.logs import configure_logging
from graph.settings import Settings

SWITCHES = ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")


@pytest.fixture
def logging_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """configure_logging changes the process's logging: put it back afterwards."""
    for name in SWITCHES:
        monkeypatch.setattr(logging, name, getattr(logging, name))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.usefixtures("logging_state")
def test_records_skip_the_caller_thread_and_process_lookups(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(Settings(database_url="sqlite+aiosqlite:///unused.db", log_format="json"))
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger = logging.getLogger("convograph.test")
    keep = Keep()
    logger.addHandler(keep)
    try:
        logger.info("hello %s", "world", extra={"request_id": "r1"})
    finally:
        logger.removeHandler(keep)
    (record,) = seen
    # What logging fills in when the switches work (were they ignored, these would be this
    # function's name and line, the thread's and the process's).
    assert (record.funcName, record.lineno) == ("(unknown function)", 0)
    assert record.threadName is None and record.processName is None and record.process is None
    line = orjson.loads(capsys.readouterr().err.splitlines()[-1])
    assert line["message"] == "hello world" and line["request_id"] == "r1"


def test_a_json_line_on_a_whole_second_keeps_its_microseconds() -> None:
    """One shape for every line's time, as for the API's instants (isoformat() drops a
    fraction of zero: a shipper parsing a fixed width read two formats)."""
    from graph.server.logs import JSONFormatter

    record = logging.LogRecord("convograph.test", logging.INFO, __file__, 1, "m", None, None)
    record.created = 1_767_225_600.0  # 2026-01-01T00:00:00 UTC
    line = orjson.loads(JSONFormatter().format(record))
    assert line["time"] == "2026-01-01T00:00:00.000000+00:00"
