"""One measured figure: its value, its target, whether it was met, and the raw samples."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Figure:
    name: str
    value: float
    target: str
    met: bool
    # Human-readable context for the printed line (what was compared, the side figures).
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        verdict = "met" if self.met else "MISSED"
        detail = f" — {self.detail}" if self.detail else ""
        return f"{self.name}: {self.value:g}{detail} (target {self.target}: {verdict})"

    def as_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "target": self.target,
            "met": self.met,
            "detail": self.detail,
            **self.data,
        }


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def p99(samples: list[float]) -> float:
    return sorted(samples)[max(0, round(0.99 * len(samples)) - 1)]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def ms_list(samples: list[float]) -> list[float]:
    return [ms(s) for s in samples]
