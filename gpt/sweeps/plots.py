"""A sweep's figures: validation-loss curves (seeds as bands) and the capability matrix as a heatmap. Built on
matplotlib's Figure directly (Agg canvas, no pyplot state), so they draw on headless machines and inside long sweeps
without leaking figures."""
from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from gpt.sweeps.stats import percent

LINE_STYLES = ("-", "--", ":", "-.")  # past matplotlib's 10 colours, the next 10 curves are dashed, and so on
LEGEND_INCHES = 2.5  # the legend column at the right of a figure of panels
# A legend label's characters a line: a sweep of one configuration is labelled by all of its overrides, and one line
# of 134 characters took two thirds of loss.png from its panels
LEGEND_CHARS = 40
# inches at matplotlib's default 100 dpi: two panels of 6 x 4.5 and the legend column, loss.png is 1450 x 450 pixels
LOSS_FIGSIZE = (12.0 + LEGEND_INCHES, 4.5)
REFERENCE = "black"  # chance, a whole answer, a trained length: grey is the 8th configuration's colour (C7)
# A chance the configurations differ in (a swept task setting changes it): the span between dashed bounds, lightly
# shaded, where one dashed line at their mean would mark a chance none of them has.
CHANCE_BAND = {"facecolor": (0.0, 0.0, 0.0, 0.08), "edgecolor": REFERENCE, "linestyle": "--", "linewidth": 1.0,
               "label": "chance (differs by configuration)"}
# matrix.png's least width right of its row labels: its title is 3.7 inches wide, centred on the heatmap beside its
# colour bar, so long labels widen the figure rather than narrow the heatmap under it
MATRIX_MIN_INCHES = 4.0


def curve_style(index: int) -> dict[str, str]:
    """Colour and line style of the index-th curve: no two of the first 40 alike (the 11th of the attention presets
    would otherwise repeat the first's colour)."""
    return {"color": f"C{index % 10}", "linestyle": LINE_STYLES[index // 10 % len(LINE_STYLES)]}


def styles(labels: Iterable[str]) -> dict[str, dict[str, str]]:
    """Each configuration's curve style by its place among all of a report's configurations, so it looks the same in
    every figure though a failed configuration, or one without a task, draws in some and not others (numbered by
    the drawn ones alone, the attention_tasks preset's gqa was brown in levels.png and pink in pareto.png)."""
    return {label: curve_style(index) for index, label in enumerate(labels)}


def legend_beside(fig: Figure, axes: Iterable[Axes]) -> None:
    """One legend at the figure's right naming every labelled line or point of its panels once, in the order drawn:
    inside a panel the attention presets' 11 names covered the curves they name."""
    named: dict[str, Any] = {}
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            named.setdefault(name, handle)
    fig.legend(list(named.values()), [textwrap.fill(name, LEGEND_CHARS) for name in named], loc="outside right upper",
               fontsize="small")


def band(ax: Axes, x: list[float], mean: np.ndarray, std: np.ndarray, label: str, style: dict[str, str],
         bounds: tuple[float, float] = (-np.inf, np.inf)) -> None:
    """A configuration's mean as a line and ± one std as a band in its style, the band kept within what the
    quantity can be (a percentage between 0 and 100: a wide spread near 0 would otherwise draw it below)."""
    ax.plot(x, mean, marker=".", label=label, **style)
    ax.fill_between(x, np.clip(mean - std, *bounds), np.clip(mean + std, *bounds), color=style["color"], alpha=0.2,
                    linewidth=0)


def percent_error(means: Sequence[float], spreads: Sequence[float | None]) -> list[list[float]]:
    """Error bars' lengths below and above each mean percentage (matplotlib's yerr), one std kept within 0-100%: a
    wide spread near 0 would otherwise reach below it. No bar (NaN, which matplotlib leaves undrawn) where a spread
    is None, a point of one seed: a bar of 0, its caps drawn through the point, read as seeds that agree."""
    return [[math.nan if s is None else min(s, m) for m, s in zip(means, spreads)],
            [math.nan if s is None else min(s, 100 - m) for m, s in zip(means, spreads)]]


def over_seeds(spreads: Iterable[float | None]) -> str:
    """What a panel's points and bars are: a title that said "mean ± std over seeds" over points of one seed each
    claimed a spread that no run measured."""
    return "mean ± std over seeds" if any(s is not None for s in spreads) else "one seed each, no spread"


def loss_figure(curves: dict[str, dict[str, list[float]]], style_of: dict[str, dict[str, str]],
                unplotted: dict[str, str] | None = None) -> Figure:
    """Val loss against step and against wall time, one line per configuration in its style, mean ± std over seeds
    as a band. `curves[label]` has lists "step", "wall_s", "mean", "std" (see gpt.sweeps.report_figures.curves);
    `unplotted[label]` says why a configuration has none ("failed", "refused", ...), named in the legend so."""
    fig = Figure(figsize=LOSS_FIGSIZE, layout="constrained")
    by_step, by_time = fig.subplots(1, 2, sharey=True)
    for label, c in curves.items():
        for ax, x in ((by_step, c["step"]), (by_time, c["wall_s"])):
            band(ax, x, np.array(c["mean"]), np.array(c["std"]), label, style_of[label])
    for label, why in (unplotted or {}).items():
        # Left out without a word, a failed configuration's absence read as a plot of the whole sweep.
        by_step.plot([], [], color="none", label=f"{label}: {why}, no curve")
    # validations at steps 20 and 40 were ticked 22.5, 27.5, steps no optimizer takes
    by_step.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
    by_step.set(xlabel="step", ylabel="validation loss", title="val loss vs step")
    by_time.set(xlabel="wall time (s)", title="val loss vs wall time")
    if curves or unplotted:
        legend_beside(fig, (by_step,))
    if not curves:  # an empty plot must say so rather than look like a bug
        fig.suptitle("no run finished with a validation loss: see report.md for why")
    for ax in (by_step, by_time):
        ax.grid(alpha=0.3)
    return fig


def percent_label(value: float) -> str:
    """A cell's percent, whole, except below 10 and where rounding would show a perfect or a null score it is not:
    there as the matrix table writes it (1.5 as 1.5, 99.6 as 99.6, 99.96 as 99.9, 0.3 as 0.3). Whole below 10, a
    table's 1.5 read 2 on its cell and 0.6 read 1 beside a 0.4, near chance where the rows part."""
    return percent(value) if 0 < value < 10 or 99.5 <= value < 100 else f"{value:.0f}"


def matrix_figure(rows: list[str], columns: list[str], means: list[list[float]], marks: list[list[str]],
                  unscored: Sequence[str] = ()) -> Figure:
    """The capability matrix as a heatmap: configurations (rows) x accuracy columns, each cell's mean exact
    match in percent written on it with its mark (↑: still rising); blank where a configuration has no value, and
    across a row with none the word `unscored` gives it (its runs "refused" or "failed"), in grey."""
    data = np.array(means, dtype=float).reshape(len(rows), len(columns))  # (configurations, columns)
    width = 0.08 * max(map(len, rows)) + max(MATRIX_MIN_INCHES, 1.0 + 0.9 * len(columns))
    fig = Figure(figsize=(width, 1.2 + 0.35 * len(rows)), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(data), vmin=0.0, vmax=100.0, cmap="viridis", aspect="auto")
    for (i, j), value in np.ndenumerate(data):
        if np.isfinite(value):
            ax.text(j, i, f"{percent_label(value)}{marks[i][j]}", ha="center", va="center", fontsize="small",
                    color="black" if value > 60 else "white")
    for i, why in enumerate(unscored):
        if why:
            ax.text((len(columns) - 1) / 2, i, why, ha="center", va="center", fontsize="small", color="grey")
    ax.set_xticks(range(len(columns)), columns, rotation=45, ha="right", fontsize="small")
    ax.set_yticks(range(len(rows)), rows, fontsize="small")
    still = "\n↑ still rising when training stopped" if any(map(any, marks)) else ""  # a line of its own: narrow
    ax.set_title(f"held-out exact match % (mean over seeds){still}")
    fig.colorbar(image, ax=ax, label="exact match %")
    return fig
