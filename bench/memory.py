"""Figure 7: the server's peak resident memory over every HTTP figure of the run (VmHWM)."""

from __future__ import annotations

from .report import Figure
from .servers import Convograph

TARGET_MB = 200


def run(server: Convograph, figures_served: list[str]) -> Figure:
    peak = round(server.process.status("VmHWM") / 1024, 1)
    now = round(server.process.status("VmRSS") / 1024, 1)
    return Figure(
        name="peak_rss_mb",
        value=peak,
        target=f"<= {TARGET_MB} MB",
        met=peak <= TARGET_MB,
        detail=f"server VmHWM after {', '.join(figures_served) or 'startup only'}; "
        f"VmRSS now {now} MB",
        data={"vm_rss_mb": now, "figures_served": figures_served},
    )
