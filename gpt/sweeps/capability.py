"""The capability matrix of a sweep: held-out exact match per column (a task, a distance bucket, an evaluation
length, an operation) for each configuration, seeds pooled, with the differences from each column's best that
are beyond seed noise marked. Plain data in, markdown lines and a heatmap's numbers out (gpt/sweeps/report.py)."""
from __future__ import annotations

import math
import statistics
from typing import Any

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


def beyond_noise(worse: list[float], best: list[float]) -> bool:
    """Whether `worse` is below `best` by more than two standard errors of the difference of means (Welch);
    needs two seeds or more on both sides. Equal seeds (zero spread) count any gap as beyond noise."""
    if len(worse) < 2 or len(best) < 2:
        return False
    error = math.sqrt(statistics.variance(worse) / len(worse) + statistics.variance(best) / len(best))
    gap = statistics.fmean(best) - statistics.fmean(worse)
    return gap > 2 * error and gap > 0


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
    best = {}
    for c in cols:
        means = {label: statistics.fmean(v[c]) for label, v in pooled.items() if v[c]}
        top = max(means.values(), default=None)
        best[c] = [label for label, m in means.items() if m == top] if len(set(means.values())) > 1 else []
    lines = ["## Capability matrix", "",
             "| configuration | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for label, by_column in pooled.items():
        cells = []
        for c in cols:
            v = by_column[c]
            if not v:
                cells.append("—")
                continue
            text = f"{statistics.fmean(v):.1f}" + (f" ± {statistics.stdev(v):.1f}" if len(v) > 1 else "")
            if label in best[c]:
                text = f"**{text}**"
            elif best[c] and beyond_noise(v, pooled[best[c][0]][c]):
                text += f" {BEYOND_NOISE}"
            cells.append(text)
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    return lines + ["", "Held-out exact match % by greedy generation at the last validation, mean ± sample std "
                    f"over seeds; **bold** is the best of its column; {BEYOND_NOISE} marks a value below the "
                    "column's best by more than seed noise (a gap over 2 standard errors of the difference, "
                    "two seeds or more on each side).", "", "![capability matrix](matrix.png)", ""]
