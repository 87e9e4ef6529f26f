"""The capability matrix of a sweep: held-out exact match per column (a task, a distance bucket, an evaluation
length, an operation) for each configuration, seeds pooled, with the differences from each column's best that
are beyond seed noise marked. Plain data in, markdown lines and a heatmap's numbers out (gpt/sweeps/report.py)."""
from __future__ import annotations

import math
import statistics
from typing import Any

from gpt.sweeps.stats import beyond_noise, best_of, stat_cell

BEYOND_NOISE = "▼"


def columns(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Every accuracy group the runs report ("all" aside), in the order runs first report them."""
    seen: dict[str, None] = {}
    for runs in summaries.values():
        for summary in runs:
            seen.update(dict.fromkeys(k for k in summary.get("val_acc", {}) if k != "all"))
    return list(seen)


def values(runs: list[dict[str, Any]], column: str) -> list[float]:
    """A column's accuracies in percent over a configuration's successful runs (one per seed)."""
    return [100 * s["val_acc"][column] for s in runs
            if s.get("status") == "ok" and math.isfinite(s.get("val_acc", {}).get(column, math.nan))]


def matrix(summaries: dict[str, list[dict[str, Any]]]) -> tuple[list[str], list[str], list[list[float]]]:
    """(row labels, columns, mean accuracy in percent per row and column, NaN where a row has none)."""
    cols = columns(summaries)
    means = [[statistics.fmean(v) if (v := values(runs, c)) else math.nan for c in cols] for runs in summaries.values()]
    return list(summaries), cols, means


def markdown(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The matrix as a markdown table with its legend; no lines when no run reported accuracy per group."""
    cols = columns(summaries)
    if not cols:
        return []
    pooled = {label: {c: values(runs, c) for c in cols} for label, runs in summaries.items()}
    best = {c: best_of({label: v[c] for label, v in pooled.items()}, lower_is_better=False) for c in cols}
    lines = ["## Capability matrix", "",
             "| configuration | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for label, by_column in pooled.items():
        cells = [stat_cell(by_column[c], "{:.1f}", bold=label in best[c],
                           mark=BEYOND_NOISE if best[c] and beyond_noise(by_column[c], pooled[best[c][0]][c], False)
                           else "") for c in cols]
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    return lines + ["", "Held-out exact match % by greedy generation at the last validation, mean ± sample std "
                    f"over seeds; **bold** is the best of its column; {BEYOND_NOISE} marks a value below the "
                    "column's best by more than seed noise (a gap over 2 standard errors of the difference, "
                    "two seeds or more on each side).", "", "![capability matrix](matrix.png)", ""]
