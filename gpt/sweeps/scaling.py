"""How a sweep's findings change with scale: accuracy per level (per length copied, per distance, per pair count;
Kazemnejad et al. 2023, Ruoss et al. 2023) with what guessing scores, and loss against evaluation length and position
past the trained block (Press et al. 2022) with a table marking losses behind the best by more than seed noise.
Plain summaries in; markdown lines and matplotlib Figures out (Agg canvas, no pyplot state)."""
from __future__ import annotations

import statistics
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from gpt.sweeps import capability
from gpt.sweeps.plots import CHANCE_BAND, LEGEND_INCHES, REFERENCE, band, legend_beside, styles
from gpt.sweeps.stats import behind_best, best_of, stat_cell

BEYOND_NOISE = "▼"
PANELS = {"exact": "exact match %", "token": "per-token accuracy %", "prefix": "longest right prefix (tokens)"}


def ok(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in runs if s.get("status") == "ok"]


def levels(summaries: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[int, list[dict[str, float]]]]]:
    """task -> configuration -> level -> each seed's scores there, for the tasks graded at two levels or more."""
    result: dict[str, dict[str, dict[int, list[dict[str, float]]]]] = {}
    for label, runs in summaries.items():
        for summary in ok(runs):
            for task, by_level in summary.get("val_levels", {}).items():
                for level, scores in by_level.items():
                    result.setdefault(task, {}).setdefault(label, {}).setdefault(int(level), []).append(scores)
    return {task: by_label for task, by_label in result.items()
            if len({lv for by_level in by_label.values() for lv in by_level}) > 1}


def mean_std(seeds: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per point: the mean over its seeds' values and their sample std (0 with one seed)."""
    return (np.array([statistics.fmean(v) for v in seeds]),
            np.array([statistics.stdev(v) if len(v) > 1 else 0.0 for v in seeds]))


def level_name(summaries: dict[str, list[dict[str, Any]]], task: str) -> str:
    return next((s["val_level_names"][task] for runs in summaries.values() for s in runs
                 if task in s.get("val_level_names", {})), "level")


def guess_at_each_level(by_level_of: dict[str, dict[int, list[dict[str, float]]]],
                        whole_answer: bool) -> tuple[list[int], list[float], list[float]]:
    """What guessing scores at each level, in %, lowest and highest over the configurations (capability.spread):
    per token (the graded chance), or for a whole answer of n tokens, each guessed alike, chance ** n. Guessing
    among the values a line holds changes with the level (8 pairs: 1 in ~3, 16 pairs: 1 in ~5), so one line for
    all levels would sit far from chance at each; a swept task setting (recall's values) changes it at one level."""
    graded: dict[int, list[dict[str, float]]] = {}
    for by_level in by_level_of.values():
        for level, seeds in by_level.items():
            graded.setdefault(level, []).extend(s for s in seeds if "chance" in s)
    x = sorted(level for level, seeds in graded.items() if seeds)
    spreads = [capability.spread([100 * s["chance"] ** (s["tokens"] if whole_answer else 1) for s in graded[level]])
               for level in x]
    return x, [low for low, _ in spreads], [high for _, high in spreads]


def levels_figure(summaries: dict[str, list[dict[str, Any]]]) -> Figure | None:
    """levels.png: a row per task with levels, exact match against the level (a guess's score at each level
    dashed), and where answers have several tokens per-token accuracy and the longest right prefix (a whole answer
    dotted)."""
    data = levels(summaries)
    if not data:
        return None
    several = {task: any(s["tokens"] > 1 for c in by_label.values() for seeds in c.values() for s in seeds)
               for task, by_label in data.items()}
    width = max(1 + 2 * several[task] for task in data)
    style_of = styles(summaries)
    fig = Figure(figsize=(5 * width + LEGEND_INCHES, 3.8 * len(data)), layout="constrained")
    axes = fig.subplots(len(data), width, squeeze=False)
    for row, (task, by_label) in zip(axes, data.items()):
        panels = list(PANELS) if several[task] else ["exact"]  # one-token answers: the three agree
        answers = [s for by_level in by_label.values() for seeds in by_level.values() for s in seeds]
        for ax, panel in zip(row, panels):
            scale, bounds = (1, (0, np.inf)) if panel == "prefix" else (100, (0, 100))
            for label, by_level in by_label.items():
                x = sorted(by_level)
                band(ax, x, *mean_std([[scale * s[panel] for s in by_level[lv]] for lv in x]), label, style_of[label],
                     bounds)
            if panel == "prefix":  # a whole answer: where a copy that never slips would be
                x = sorted({lv for by_level in by_label.values() for lv in by_level})
                first = next(iter(by_label.values()))
                ax.plot(x, [statistics.fmean(s["tokens"] for s in first[lv]) if lv in first else np.nan for lv in x],
                        color=REFERENCE, linestyle=":", label="whole answer")
            elif any("chance" in s for s in answers):
                x, low, high = guess_at_each_level(by_label, whole_answer=panel == "exact")
                if low == high:
                    ax.plot(x, low, color=REFERENCE, linestyle="--", label="chance")
                else:
                    ax.fill_between(x, low, high, **CHANCE_BAND)
            ax.set(xlabel=f"{task}: {level_name(summaries, task)}", ylabel=PANELS[panel],
                   title=f"{task}: {PANELS[panel]}")
            # A level is a count (pairs, tokens back, tokens copied): levels 4 and 8 were ticked 4.5, 5.0, 5.5, ...
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        for ax in row[len(panels):]:
            ax.set_visible(False)
    legend_beside(fig, fig.axes)
    return fig


def extrapolations(summaries: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Each configuration's val_extrapolation records (one per seed), for those that have them."""
    found = {label: [s["val_extrapolation"] for s in ok(runs) if "val_extrapolation" in s]
             for label, runs in summaries.items()}
    return {label: records for label, records in found.items() if records}


def loss_at(records: list[dict[str, Any]], length: str) -> list[float]:
    return [r["lengths"][length]["loss"] for r in records if length in r["lengths"]]


def extrapolation_markdown(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Loss at each evaluation length per configuration, the best bold, ▼ behind it beyond seed noise."""
    data = extrapolations(summaries)
    if not data:
        return []
    lengths = sorted({n for records in data.values() for r in records for n in r["lengths"]}, key=int)
    pooled = {label: {n: loss_at(records, n) for n in lengths} for label, records in data.items()}
    best = {n: best_of({label: v[n] for label, v in pooled.items()}, True, "{:.3f}") for n in lengths}
    trained = ", ".join(map(str, sorted({r["trained"] for records in data.values() for r in records})))
    lines = ["## Loss past the trained length", "",
             "| configuration | " + " | ".join(f"{n} tokens" for n in lengths) + " | refused |",
             "|---|" + "---:|" * len(lengths) + "---|"]
    for label, by_length in pooled.items():
        cells = [stat_cell(by_length[n], "{:.3f}", bold=label in best[n],
                           mark=BEYOND_NOISE * behind_best(by_length[n], [pooled[b][n] for b in best[n]], True))
                 for n in lengths]
        refused = next((r["refused"] for r in data[label] if "refused" in r), "")
        lines.append(f"| `{label}` | " + " | ".join(cells) + f" | {refused} |")
    return lines + ["", f"Validation loss (nats per token) on windows of each length, trained at {trained} tokens; "
                    "mean ± sample std over seeds; **bold** is the best of its column; ▼ marks a loss above the "
                    "column's best by more than seed noise. Learned positions refuse lengths past their table.", "",
                    "![loss against evaluation length and position](extrapolation.png)", ""]


def extrapolation_figure(summaries: dict[str, list[dict[str, Any]]]) -> Figure | None:
    """extrapolation.png: loss against evaluation length (seeds as bands), and loss against position at the
    longest length each configuration reached; the trained length dotted."""
    data = extrapolations(summaries)
    if not data:
        return None
    fig = Figure(figsize=(12.0 + LEGEND_INCHES, 4.5), layout="constrained")
    by_length, by_position = fig.subplots(1, 2)
    style_of = styles(summaries)
    for label, records in data.items():
        lengths = sorted({n for r in records for n in r["lengths"]}, key=int)
        if not lengths:  # every length was past its learned positions: the table's refused column says so
            continue
        band(by_length, [int(n) for n in lengths], *mean_std([loss_at(records, n) for n in lengths]), label,
             style_of[label])
        longest = lengths[-1]
        curves = [r["lengths"][longest] for r in records if longest in r["lengths"]]
        x = [curves[0]["bin"] * (i + 0.5) for i in range(len(curves[0]["by_position"]))]
        band(by_position, x, *mean_std([list(v) for v in zip(*(c["by_position"] for c in curves))]), label,
             style_of[label])
    trained = next(r["trained"] for records in data.values() for r in records)
    for ax in (by_length, by_position):
        ax.axvline(trained, color=REFERENCE, linestyle=":", label=f"trained length {trained}")
        ax.grid(alpha=0.3)
    lengths = sorted({int(n) for records in data.values() for r in records for n in r["lengths"]})
    by_length.set_xscale("log", base=2)
    by_length.set_xticks(lengths, [str(n) for n in lengths])
    by_length.set(xlabel="evaluation length (tokens)", ylabel="validation loss", title="loss against evaluation length")
    by_position.set(xlabel="position in the window", ylabel="validation loss",
                    title="loss by position, at the longest length each reached")
    # Beside the panels: inside, the legend hid sinusoidal positions' jump past the trained length, the figure's point.
    legend_beside(fig, (by_length, by_position))
    return fig
