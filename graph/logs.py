"""Logging: JSON lines for machines, a plain format for people (`make serve`)."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

import orjson

from .settings import Settings

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
    "duration_ms",
)
FORMATS = ("json", "text")
LEVELS = ("debug", "info", "warning", "error", "critical")


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
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


def _level(name: str, setting: str) -> int:
    value = name.strip().lower()
    if value not in LEVELS:
        raise ValueError(f"{setting} must be one of {', '.join(LEVELS)}, not {name!r}")
    return logging.getLevelNamesMapping()[value.upper()]


def logger_levels(spec: str) -> dict[str, int]:
    """`"convograph.access=warning, sqlalchemy.engine=info"` -> {logger name: level}."""
    levels: dict[str, int] = {}
    for item in spec.split(","):
        if not item.strip():
            continue
        name, sep, level = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"CONVOGRAPH_LOG_LEVELS takes LOGGER=LEVEL pairs, not {item!r}")
        levels[name.strip()] = _level(level, f"the level of {name.strip()}")
    return levels


def configure_logging(settings: Settings) -> None:
    """One handler on stderr for every logger, formatted and filtered as the settings say."""
    log_format = settings.log_format.strip().lower()
    if log_format not in FORMATS:
        raise ValueError(f"CONVOGRAPH_LOG_FORMAT must be json or text, not {settings.log_format!r}")
    root_level = _level(settings.log_level, "CONVOGRAPH_LOG_LEVEL")
    per_logger = logger_levels(settings.log_levels)
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(root_level)
    for name, level in per_logger.items():
        logging.getLogger(name).setLevel(level)
