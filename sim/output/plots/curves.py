"""Drawing one family of convergence curves: a line per seed, or the median and a band.

A family is the rows of one metrics table (several seeds or runs, told apart by a
``by`` column) drawn against one x column. Runs that stopped early keep their last
value (carried forward), so a median covers every run at every x.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

#: Up to this many seeds a line is drawn per seed; beyond, the median and a band.
MAX_SEED_LINES = 4
#: Quantiles of the band drawn around the median.
BAND = (0.1, 0.9)
#: Line style of each metric: ``var`` solid, ``var_alive`` dashed.
STYLES = {"var": "-", "var_alive": "--"}
#: Curves with fewer points than this get markers (a run that ended at once stays visible).
FEW_POINTS = 6


def band_text() -> str:
    """``10–90 %``: the band's quantiles as a legend reads them."""
    return f"{BAND[0] * 100:.0f}–{BAND[1] * 100:.0f} %"


def has_values(frame: pd.DataFrame, x: str, y: str) -> bool:
    """True when ``frame`` has both columns and some finite positive ``y``."""
    if x not in frame.columns or y not in frame.columns:
        return False
    values = pd.to_numeric(frame[y], errors="coerce").to_numpy(dtype=float)
    return bool(np.any(np.isfinite(values) & (values > 0)))


def wide(frame: pd.DataFrame, x: str, y: str, by: str = "seed") -> pd.DataFrame:
    """``y`` with one column per ``by`` value, indexed by ``x``, last value carried forward."""
    keys = frame[by] if by in frame.columns else pd.Series(0, index=frame.index)
    table = frame.assign(_by=keys).pivot_table(index=x, columns="_by", values=y, aggfunc="last")
    return table.sort_index().ffill()


def draw_family(
    ax: Axes,
    frame: pd.DataFrame,
    x: str,
    y: str,
    color: str,
    by: str = "seed",
    band: bool | None = None,
) -> bool:
    """Draw ``y`` against ``x``: lines per ``by`` value, or (``band`` or many) a median
    and the :data:`BAND` quantiles. Returns True when a band was drawn."""
    if not has_values(frame, x, y):
        return False
    table = wide(frame, x, y, by)
    if band is None:
        band = table.shape[1] > MAX_SEED_LINES
    style = STYLES.get(y, "-")
    if band:
        _draw_band(ax, table, color, style)
    else:
        _draw_lines(ax, frame, x, y, color, style, by)
    return band


def _draw_lines(
    ax: Axes, frame: pd.DataFrame, x: str, y: str, color: str, style: str, by: str
) -> None:
    groups = frame.groupby(by, sort=True) if by in frame.columns else [(0, frame)]
    for _, rows in groups:
        ordered = rows.sort_values(x, kind="stable")
        ax.plot(ordered[x], ordered[y], color=color, ls=style, lw=1.2, alpha=0.8,
                marker="o" if len(ordered) < FEW_POINTS else None, ms=3)  # fmt: skip


def _draw_band(ax: Axes, table: pd.DataFrame, color: str, style: str) -> None:
    low, high = (table.quantile(q, axis=1) for q in BAND)
    if style == "-":  # one band per family: around var, not around var_alive
        ax.fill_between(table.index, low, high, color=color, alpha=0.2, lw=0)
    marker = "o" if len(table) < FEW_POINTS else None
    ax.plot(table.index, table.median(axis=1), color=color, ls=style, lw=1.6, marker=marker, ms=3)
