"""Capacity against state size, the Zoology/Based figure (Arora et al. 2023, 2024): recall accuracy per pair count
against the bytes each configuration's attention state holds at its trained block (the longest line), one point per
configuration (mean ± std over seeds), one variant's state sizes joined as a line, what guessing scores dashed (a
shaded band between dashed bounds where the configurations differ in it).
Plain summaries in; markdown lines (gpt/sweeps/report.py) and a matplotlib Figure (report_figures.py) out."""
from __future__ import annotations

import statistics
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from gpt.sweeps import capability, pareto
from gpt.sweeps.plots import CHANCE_BAND, REFERENCE, over_seeds, percent_error, styles

RECALL = "recall_"  # the capability columns recall_<pairs>, one per pair count


def recall_columns(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The recall columns the runs graded, by growing pair count."""
    found = [c for c in capability.columns(summaries) if c.startswith(RECALL) and c[len(RECALL):].isdigit()]
    return sorted(found, key=lambda c: int(c[len(RECALL):]))


def state_bytes(model: dict[str, Any]) -> int:
    """Every layer's attention state for one line of block_size tokens, by the variant's own formula (fp32)."""
    return pareto.cache_bytes(model, model["block_size"])


def variant(model: dict[str, Any]) -> str:
    """The attention variant a configuration's points are joined under: linear attention with a short convolution
    apart from linear attention without one, since the convolution, not the state, decides whether it recalls."""
    conv = model.get("linear_conv") if model["attention"] == "linear" else None
    return f"{model['attention']} + conv {conv}" if conv else model["attention"]


def states(summaries: dict[str, list[dict[str, Any]]]) -> dict[str, tuple[str, int]]:
    """label -> (attention variant, state bytes) for the configurations that recorded their model and graded
    recall; empty unless some variant appears at two state sizes or more (the sweep varies state on recall)."""
    columns = recall_columns(summaries)
    found = {label: (variant(model), state_bytes(model)) for label, runs in summaries.items()
             if (model := pareto.model_of(runs)) and any(capability.values(runs, c) for c in columns)}
    sizes: dict[str, set[int]] = {}
    for name, size in found.values():
        sizes.setdefault(name, set()).add(size)
    return found if any(len(s) > 1 for s in sizes.values()) else {}


def guess(summaries: dict[str, list[dict[str, Any]]], column: str) -> tuple[float, float] | None:
    """What guessing scores in a recall column, lowest and highest over the configurations (recall's answers are one
    token: exact match's chance is the per-token one)."""
    return capability.chance(summaries, column, capability.TOKEN)


def banded(summaries: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether the configurations differ in what guessing scores in some recall column (a swept recall.values)."""
    return any((g := guess(summaries, c)) is not None and g[0] != g[1] for c in recall_columns(summaries))


def markdown(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The state each configuration holds and capacity.png; no lines when the sweep does not vary state on recall."""
    found = states(summaries)
    if not found:
        return []
    lines = ["## Capacity against state size", "", "| configuration | attention | state bytes |", "|---|---|---:|"]
    for label, (name, size) in sorted(found.items(), key=lambda item: (item[1][1], item[0])):
        lines.append(f"| `{label}` | {name} | {size:,} |")
    return lines + ["", "Recall exact match per pair count against the attention state of one line at the trained "
                    "block (fp32, every layer, by each variant's formula: keys and values per position, a latent "
                    "per position, or linear attention's fixed features x (head width + 1) per head and its "
                    "convolution's last inputs), mean ± std over seeds; a variant's state sizes are joined; chance "
                    + ("dashed, shaded between dashed bounds where the configurations' lines differ in what guessing "
                       "scores" if banded(summaries) else "dashed") + " (the capability matrix has the numbers).", "",
                    "![recall accuracy against state size](capacity.png)", ""]


def series(found: dict[str, tuple[str, int]], variants: list[str], first: dict[str, str],
           style_of: dict[str, dict[str, str]]) -> list[tuple[str, list[str], str]]:
    """(legend name, configurations by state size, colour) of each line: a variant's configurations joined in the
    colour of its first, unless two share a state size, where they differ in another setting (a swept recall.values)
    and a line through them zig-zagged between tasks: then each configuration is its own point, in its own colour."""
    drawn = []
    for name in variants:
        labels = sorted((label for label, (v, _) in found.items() if v == name), key=lambda lb: found[lb][1])
        if len({found[lb][1] for lb in labels}) == len(labels):
            drawn.append((name, labels, style_of[first[name]]["color"]))
        else:
            drawn += [(label, [label], style_of[label]["color"]) for label in labels]
    return drawn


def figure(summaries: dict[str, list[dict[str, Any]]]) -> Figure | None:
    """capacity.png: a panel per pair count, or None when the sweep does not vary state on recall."""
    found = states(summaries)
    if not found:
        return None
    columns = recall_columns(summaries)
    # A variant in the colour of its first configuration in the report's other figures: numbered by variant, mha
    # after two linear rows was orange here and green in loss.png and pareto.png, where orange is the second row.
    style_of = styles(summaries)
    first = {name: label for label, (name, _) in reversed(found.items())}
    variants = list(dict.fromkeys(name for name, _ in found.values()))
    fig = Figure(figsize=(4.5 * len(columns), 4.2), layout="constrained")
    axes = fig.subplots(1, len(columns), squeeze=False)[0]
    for ax, column in zip(axes, columns):
        spreads: list[float | None] = []
        for name, labels, colour in series(found, variants, first, style_of):
            marks = [(found[lb][1], values) for lb in labels if (values := capability.values(summaries[lb], column))]
            if not marks:
                continue
            x = [size for size, _ in marks]
            y = [statistics.fmean(values) for _, values in marks]
            spread = [statistics.stdev(values) if len(values) > 1 else None for _, values in marks]
            spreads += spread
            ax.errorbar(x, y, yerr=percent_error(y, spread), marker="o", capsize=3,
                        color=colour, label=name, linestyle="-" if len(marks) > 1 else "none")
        low, high = guess(summaries, column) or (None, None)
        if low is not None and low == high:
            ax.axhline(low, color=REFERENCE, linestyle="--", label="chance")
        elif low is not None:
            ax.axhspan(low, high, **CHANCE_BAND)
        ax.set_xscale("log", base=2)
        sizes = sorted({size for _, size in found.values()})
        if sizes[-1] < 4 * sizes[0]:  # between powers of two (linear_2 and linear_4 alone) the axis had no number
            ax.set_xticks(sizes)
            ax.minorticks_off()
        ax.xaxis.set_major_formatter(FuncFormatter(lambda size, _: f"{size:,.0f}"))
        ax.set(xlabel="attention state at the trained block (bytes, fp32)", ylabel="held-out exact match %",
               title=f"{column[len(RECALL):]} pairs ({over_seeds(spreads)})", ylim=(-3, 103))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="x-small")
    return fig
