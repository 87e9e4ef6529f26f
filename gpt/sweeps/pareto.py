"""Quality and cost in one view: a cost card per configuration of a sweep (parameters, cache bytes per token, cache
MiB at 4k and 16k tokens by each attention variant's own formula) and pareto.png, each capability column's mean ±
std over seeds against cache MiB at one depth, one point per configuration, the best trade-offs joined."""
from __future__ import annotations

import math
import statistics
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from gpt.model.attention import ATTENTION
from gpt.model.config import ModelConfig
from gpt.model.positional import POSITIONAL
from gpt.sweeps import capability
from gpt.sweeps.plots import LEGEND_INCHES, REFERENCE, legend_beside, over_seeds, percent_error, styles

CARD_DEPTHS = (4096, 16384)  # tokens of context the card prices the cache at
PARETO_DEPTH = 16384  # the depth pareto.png's x axis prices the cache at
ELEMENT_SIZE = 4  # bytes per cached number: fp32, the dtype a model.pt is saved and decoded in
MIB = 2 ** 20
PANELS_PER_ROW = 3  # more to a row shrinks each panel to unreadable on a report page
PANEL_INCHES = (5.0, 4.5)  # one panel, at matplotlib's 100 dpi
MARKER_SIZE = 6.0  # matplotlib's default, in points
RING = 3.0  # points a marker grows for each drawn over it at the same spot, so it shows as a ring around them
TICK_GAP = 0.12  # of the x axis's width: two tick labels closer than this overlap
OVERLAP = 2.0  # percentage points of accuracy within which two markers at one cache size cover each other


def cache_bytes(model: dict[str, Any], positions: int) -> int:
    """Bytes every layer's cache holds for `positions` tokens of one sequence, by the variant's formula."""
    cfg = ModelConfig.from_dict(model)
    return cfg.layers * ATTENTION[cfg.attention].from_config(cfg).cache_bytes(1, positions, ELEMENT_SIZE)


def mib(size: int) -> str:
    """Bytes as MiB to two decimals, or to two figures below 0.01: linear attention's fixed state of 2,624 bytes read
    0.00, a cache of nothing beside mha's 16.00."""
    value = size / MIB
    return f"{value:,.2f}" if value >= 0.01 or value == 0 else f"{value:.2g}"


def model_of(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The model config a configuration's runs recorded (seeds share it), or None before any run recorded one."""
    return next((s["model"] for s in runs if s.get("status") == "ok" and "model" in s), None)


def card(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The cost card as markdown lines, linking pareto.png where figure() draws one; none when no run recorded its
    model."""
    priced = {label: model for label, runs in summaries.items() if (model := model_of(runs))}
    if not priced:
        return []
    depths = " | ".join(f"cache MiB at {d // 1024}k" for d in CARD_DEPTHS)
    lines = ["## Cost card", "", f"| configuration | params | cache bytes/token | {depths} |",
             "|---|" + "---:|" * (2 + len(CARD_DEPTHS))]
    short: set[str] = set()  # how far the models whose positions end before a priced depth reach
    for label, model in priced.items():
        params = next(s["params"] for s in summaries[label] if s.get("status") == "ok")
        per_token = cache_bytes(model, model["block_size"]) / model["block_size"]
        reach = positions(model)
        cells = [f"{params:,}", f"{per_token:,.0f}",
                 *(mib(cache_bytes(model, d)) + "*" * (reach is not None and d > reach) for d in CARD_DEPTHS)]
        if reach is not None and max(CARD_DEPTHS) > reach:
            short.add(f"pos={model['pos']} places {reach:,}")
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    # Priced anyway: the card compares the variants' formulas, which hold at any depth.
    drawn = bool(points(summaries))
    # Any priced model's sizes tell them apart: an encoding either ends with a table or places every position.
    sizes = ModelConfig.from_dict(next(iter(priced.values())))
    unbounded = " or ".join(name for name, encoding in POSITIONAL.items() if encoding.longest(sizes) is None)
    beyond = [f"\\* past the positions the model places ({', '.join(sorted(short))}): the variant's formula at a "
              f"depth this model cannot decode{', as pareto.png prices it' * drawn}. A model with pos={unbounded}, or "
              "model.random_positions, reaches it.", ""] if short else []
    return lines + ["", "The cache of one sequence by each attention variant's formula (fp32): bytes per token at the "
                    "trained block, and the whole cache at longer contexts, where a window stops growing and linear "
                    "attention's state never grows; `python -m gpt cost` measures what decoding there takes.", "",
                    *beyond, *(["![capability against cache MiB](pareto.png)", ""] if drawn else [])]


def positions(model: dict[str, Any]) -> int | None:
    """How many positions a recorded model places (None: any number): learned positions end with their table."""
    cfg = ModelConfig.from_dict(model)
    return POSITIONAL[cfg.pos].longest(cfg)


def points(summaries: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, tuple[float, float, float | None]]]:
    """Per capability column: label -> (cache bytes at PARETO_DEPTH, mean %, sample std %, or None for one seed)."""
    columns = capability.columns(summaries) or ["all"]
    result: dict[str, dict[str, tuple[float, float, float | None]]] = {}
    for column in columns:
        for label, runs in summaries.items():
            model, values = model_of(runs), capability.values(runs, column)
            if model and values:
                spread = statistics.stdev(values) if len(values) > 1 else None
                result.setdefault(column, {})[label] = (cache_bytes(model, PARETO_DEPTH), statistics.fmean(values),
                                                        spread)
    return result


def frontier(by_label: dict[str, tuple[float, float, float | None]]) -> list[tuple[float, float]]:
    """The points no other beats on both counts (less cache and more accuracy), by growing cache."""
    best, line = -math.inf, []
    for x, y, _ in sorted(by_label.values(), key=lambda p: (p[0], -p[1])):
        if y > best:
            best = y
            line.append((x, y))
    return line


def marker_sizes(by_label: dict[str, tuple[float, float, float | None]]) -> dict[str, float]:
    """Each point's marker size: RING larger for every point drawn after it at the same cache size and within OVERLAP
    of its accuracy, so a stack shows as rings (the attention presets' four full-head rows share one spot)."""
    placed = list(by_label.items())
    return {label: MARKER_SIZE + RING * sum(x == x2 and abs(y - y2) <= OVERLAP for _, (x2, y2, _) in placed[i + 1:])
            for i, (label, (x, y, _)) in enumerate(placed)}


def label_points(ax: Axes, xs: list[float]) -> None:
    """Tick the log x axis at the points' own values, as numbers (4, 16 MiB), where matplotlib's ticks within a decade
    read 2×10¹ and 3×10¹ beside points at 16 and 32; a value closer to the last one ticked than TICK_GAP of the axis
    is left unticked, as its label would overlap."""
    low, high = ax.get_xlim()
    span = math.log(high / low)
    ticks: list[float] = []
    for x in sorted(set(xs)):
        if not ticks or math.log(x / ticks[-1]) >= TICK_GAP * span:
            ticks.append(x)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(ticks, [f"{x:.2g}" for x in ticks])


def figure(summaries: dict[str, list[dict[str, Any]]]) -> Figure | None:
    """pareto.png: one panel per capability column, PANELS_PER_ROW to a row, the configurations named once in a legend
    beside them; None when no run recorded both its model and accuracy."""
    data = points(summaries)
    if not data:
        return None
    rows, columns = math.ceil(len(data) / PANELS_PER_ROW), min(len(data), PANELS_PER_ROW)
    fig = Figure(figsize=(PANEL_INCHES[0] * columns + LEGEND_INCHES, PANEL_INCHES[1] * rows), layout="constrained")
    style_of = styles(summaries)  # a configuration's colour in the report's other figures
    markers = {label: "osD^v<>p*h"[i // 10 % 10] for i, label in enumerate(summaries)}  # as their line styles change
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes[len(data):]:  # the last row's empty places
        fig.delaxes(ax)
    for ax, (column, by_label) in zip(axes, data.items()):
        sizes = marker_sizes(by_label)
        for label, (x, y, spread) in by_label.items():
            look = {"marker": markers[label], "color": style_of[label]["color"], "linestyle": "none"}
            if sizes[label] > MARKER_SIZE:  # a ring around the points drawn over it; the legend keeps one size
                ax.plot(x / MIB, y, markersize=sizes[label], **look)
            ax.errorbar(x / MIB, y, yerr=percent_error([y], [spread]), capsize=3, label=label, **look)
        ax.plot(*zip(*((x / MIB, y) for x, y in frontier(by_label))), color=REFERENCE, linestyle=":", linewidth=1)
        ax.set_xscale("log")
        label_points(ax, [x / MIB for x, _, _ in by_label.values()])
        ax.set(xlabel=f"cache MiB at {PARETO_DEPTH:,} tokens (formula, fp32)", ylabel="held-out exact match %",
               title=f"{column} ({over_seeds(spread for _, _, spread in by_label.values())})", ylim=(-3, 103))
        ax.grid(alpha=0.3)
    legend_beside(fig, fig.axes)
    return fig
