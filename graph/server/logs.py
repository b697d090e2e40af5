"""Logging: JSON lines for machines, a plain format for people (`make serve`)."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

import orjson

from graph.settings import Settings, logger_levels

# Structured fields a record may carry (passed as `extra=`); JSON lines include those present.
FIELDS = (
    "request_id",
    "method",
    "path",
    "status",
    "operation",
    "operation_type",
    "outcome",
    "user_errors",
    "workspace",
    "owner_type",
    "service_token",
    "duration_ms",
)


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="microseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in FIELDS:
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def _level(name: str) -> int:
    return logging.getLevelNamesMapping()[name.upper()]


def configure_logging(settings: Settings) -> None:
    """One handler on stderr for every logger, formatted and filtered as the settings say."""
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_level(settings.log_level))
    # Neither format prints where a record was logged from, nor its thread or process: the
    # logging docs' "Optimization" switches spare every record (an access line per request)
    # the frame walk and the lookups. tests/unit/test_logs.py fails if they stop working.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    for name, level in logger_levels(settings.log_levels).items():
        logging.getLogger(name).setLevel(_level(level))
