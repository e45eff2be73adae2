"""Churn traces: a CSV of absences ``peer,down_s,up_s``, read and validated with pandas.

Each row says that ``peer`` (an integer in 0 … N−1) is absent from ``down_s`` (seconds,
finite, ≥ 0) until ``up_s`` (> ``down_s``; ``inf``: it never comes back). Rows may come
in any order. Two intervals of one peer that touch (one's ``up_s`` equals the next's
``down_s``) merge into one; intervals that overlap are an error, as are unknown peers,
non-integer peers, NaN or negative times and ``down_s >= up_s``. Every error is one line
naming ``churn.file``, the file, its line number (the header is line 1) and the value.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sim.core.errors import ScenarioError

COLUMNS = ("peer", "down_s", "up_s")


class TraceError(ScenarioError):
    """A churn trace that cannot be replayed: names ``churn.file``, the line and the value."""

    def __init__(self, path: Path, line: int | None, expected: str, got: str) -> None:
        super().__init__("churn.file", got, expected)
        where = str(path) if line is None else f"{path} line {line}"
        self.args = (f"churn.file: {where}: expected {expected}, got {got}",)


@dataclass(frozen=True)
class Trace:
    """Absence intervals, sorted by peer then ``down_s``, disjoint and not touching.

    Attributes
    ----------
    peer
        (K,) intp, the absent peer of each interval.
    down_s, up_s
        (K,) float64, seconds: the peer is absent on ``[down_s, up_s)``; ``up_s`` may be inf.
    """

    peer: np.ndarray
    down_s: np.ndarray
    up_s: np.ndarray


def load_trace(path: str | Path, n_peers: int) -> Trace:
    """Read, validate and normalize the trace CSV at ``path`` for ``n_peers`` peers.

    Raises
    ------
    TraceError
        A :class:`ScenarioError` on ``churn.file``: missing or malformed file, bad row.
    """
    path = Path(path)
    frame = _read(path)
    lines = np.arange(len(frame)) + 2
    peer = _peers(path, frame["peer"], lines, n_peers)
    down_s, up_s = _times(path, frame, lines)
    return _merge(path, peer, down_s, up_s, lines)


def _read(path: Path) -> pd.DataFrame:
    try:
        with warnings.catch_warnings():
            # a first row longer than the header is a warning (and dropped data): an error
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                path,
                dtype=str,
                keep_default_na=False,
                skip_blank_lines=False,
                skipinitialspace=True,
                index_col=False,
            )
    except OSError as exc:
        raise TraceError(path, None, "a readable CSV file", exc.strerror or repr(exc)) from None
    except pd.errors.EmptyDataError:
        raise TraceError(path, None, "a header peer,down_s,up_s", "an empty file") from None
    except pd.errors.ParserWarning:
        raise TraceError(
            path, None, "rows peer,down_s,up_s", "a row longer than the header"
        ) from None
    except UnicodeDecodeError as exc:
        got = f"a byte 0x{exc.object[exc.start]:02x} that is not UTF-8"
        raise TraceError(path, None, "UTF-8 text", got) from None
    except (pd.errors.ParserError, ValueError) as exc:
        message = " ".join(str(exc).split())
        raise TraceError(path, None, "rows peer,down_s,up_s", message) from None
    header = tuple(str(column).strip() for column in frame.columns)
    if header != COLUMNS:
        raise TraceError(path, 1, "the header peer,down_s,up_s", ",".join(header))
    frame.columns = pd.Index(COLUMNS)
    return frame.fillna("")


def _first(
    path: Path, bad: np.ndarray, lines: np.ndarray, expected: str, shown: pd.Series, quote: bool
) -> None:
    """Raise on the first row flagged ``bad``, showing its ``shown`` text (quoted or not)."""
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        text = str(shown.iloc[row])
        raise TraceError(path, int(lines[row]), expected, repr(text) if quote else text)


def _peers(path: Path, column: pd.Series, lines: np.ndarray, n_peers: int) -> np.ndarray:
    expected = f"peer an integer in 0..{n_peers - 1}"
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(values) & (values == np.floor(values))
    _first(path, ~integral, lines, expected, column, quote=True)
    _first(path, (values < 0) | (values >= n_peers), lines, expected, column, quote=True)
    return values.astype(np.intp)


def _times(path: Path, frame: pd.DataFrame, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    down_s = pd.to_numeric(frame["down_s"], errors="coerce").to_numpy(dtype=np.float64)
    up_s = pd.to_numeric(frame["up_s"], errors="coerce").to_numpy(dtype=np.float64)
    finite_nonneg = "down_s a finite number of seconds >= 0"
    bad_down = ~(np.isfinite(down_s) & (down_s >= 0))
    _first(path, bad_down, lines, finite_nonneg, frame["down_s"], quote=True)
    bad_up = np.isnan(up_s)
    _first(path, bad_up, lines, "up_s a number of seconds (or inf)", frame["up_s"], quote=True)
    shown = "down_s=" + frame["down_s"] + ", up_s=" + frame["up_s"]
    _first(path, ~(down_s < up_s), lines, "down_s < up_s", shown, quote=False)
    return down_s, up_s


def _merge(
    path: Path, peer: np.ndarray, down_s: np.ndarray, up_s: np.ndarray, lines: np.ndarray
) -> Trace:
    if peer.size == 0:
        return Trace(peer, down_s, up_s)
    order = np.lexsort((down_s, peer))
    peer, down_s, up_s, lines = peer[order], down_s[order], up_s[order], lines[order]
    same_peer = peer[1:] == peer[:-1]
    overlap = same_peer & (down_s[1:] < up_s[:-1])
    if overlap.any():
        k = int(np.flatnonzero(overlap)[0])
        raise TraceError(
            path,
            int(lines[k + 1]),
            f"intervals of peer {peer[k]} that do not overlap line {lines[k]}",
            f"down_s={down_s[k + 1]:g} before up_s={up_s[k]:g}",
        )
    starts = np.flatnonzero(np.concatenate(([True], ~(same_peer & (down_s[1:] == up_s[:-1])))))
    ends = np.concatenate((starts[1:], [peer.size])) - 1
    return Trace(peer[starts], down_s[starts], up_s[ends])


__all__ = ["COLUMNS", "Trace", "TraceError", "load_trace"]
