"""The per-step picture: for each rank and GPU, one stacked bar per training step
(compute, communication not under compute, copies, idle), the baseline's bar beside
the current one when a baseline trace is given. PNG and SVG, like the rooflines.

matplotlib is imported inside the function, object-oriented API only (no pyplot).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.metrics.timeline import STEP_PARTS
from perfcheck.report.results import write_atomic

if TYPE_CHECKING:
    import pandas as pd

COLOURS = {"compute": "#2f6fb0", "communication": "#d9822b", "copies": "#7a5cb0", "idle": "#c8c8c8"}
MAX_PANELS = 8  # ranks x GPUs drawn; the rest are named in the title


def _label(rank: object, device: object) -> str:
    import pandas as pd

    parts = [] if pd.isna(rank) else [f"rank {int(rank)}"]  # type: ignore[call-overload]
    return ", ".join(parts + ([] if pd.isna(device) else [f"GPU {int(device)}"]))  # type: ignore[call-overload]


def step_chart(current: "pd.DataFrame", stem: Path, *, baseline: "pd.DataFrame | None" = None,
               title: str = "time per step", formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Draw ``current`` (``metrics.timeline.step_breakdown``), and ``baseline`` beside
    it, to ``stem.png`` / ``stem.svg``; returns the files written."""
    import pandas as pd
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = list(current.groupby(["rank", "device_id"], dropna=False, sort=True))
    shown = panels[:MAX_PANELS]
    fig = Figure(figsize=(11, 2.4 + 2.2 * len(shown)), dpi=110)
    FigureCanvasAgg(fig)
    axes = fig.subplots(max(len(shown), 1), 1, squeeze=False)[:, 0]
    width = 0.42 if baseline is not None else 0.8
    for ax, ((rank, device), steps) in zip(axes, shown):
        series = [("current", steps, 0.0 if baseline is None else width / 2, 1.0)]
        if baseline is not None:
            same = baseline[(baseline["rank"].isna() if pd.isna(rank) else baseline["rank"] == rank)
                            & (baseline["device_id"].isna() if pd.isna(device) else baseline["device_id"] == device)]
            series.insert(0, ("baseline", same, -width / 2, 0.45))
        for which, frame, offset, alpha in series:
            bottom = None
            for part in STEP_PARTS:
                values = frame[part].to_numpy() * 1e3
                ax.bar(frame["step"].to_numpy() + offset, values, width, bottom=bottom, color=COLOURS[part],
                       alpha=alpha, linewidth=0, label=f"{part} ({which})" if ax is axes[0] else None)
                bottom = values if bottom is None else bottom + values
        ax.set_ylabel("ms")
        ax.set_title(_label(rank, device) or "the run", fontsize=10, loc="left")
        ax.margins(x=0.01)
        # steps are whole numbers: a tick at each (at most ~20 labelled), never at -0.25
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=20, integer=True))
    axes[-1].set_xlabel("step")
    if not shown:
        axes[0].text(0.5, 0.5, "no steps in this timeline", ha="center", va="center", transform=axes[0].transAxes)
    else:  # below the panels, never over the bars
        fig.legend(*axes[0].get_legend_handles_labels(), fontsize=8, ncol=4, loc="lower center", frameon=False)
    more = f" (first {MAX_PANELS} of {len(panels)} GPUs)" if len(panels) > MAX_PANELS else ""
    fig.suptitle(title + more + (": baseline (light) beside current" if baseline is not None else ""))
    fig.tight_layout(rect=(0, 0.07 if baseline is not None else 0.05, 1, 1))
    written = []
    for fmt in formats:
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, metadata={"Date": None} if fmt == "svg" else {"Software": None})
        written.append(write_atomic(stem.with_name(f"{stem.name}.{fmt}"), buffer.getvalue()))
    return written
