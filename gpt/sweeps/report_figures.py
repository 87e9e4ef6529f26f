"""The sweep report's figures: loss.png (val loss curves, seeds as bands), matrix.png (the capability matrix as a
heatmap), levels.png, extrapolation.png, capacity.png and pareto.png where runs recorded them."""
from __future__ import annotations

import statistics

from matplotlib.figure import Figure

from gpt.sweeps import capability, capacity, pareto, scaling
from gpt.sweeps.plots import loss_figure, matrix_figure, styles
from gpt.sweeps.runs import Run, group, labels, summaries


def curves(runs: list[Run]) -> dict[str, dict[str, list[float]]]:
    """Per configuration: steps every successful seed validated at, mean wall time there, loss mean and std."""
    groups = group(runs)
    names, _ = labels(list(groups))
    result = {}
    for key, group_runs in groups.items():
        histories = [{row["step"]: row for row in r.history if "val_loss" in row} for r in group_runs if r.ok]
        histories = [h for h in histories if h]  # a run that never validated has no curve to draw
        if not histories:
            continue
        steps = sorted(set.intersection(*(set(h) for h in histories)))
        losses = [[h[s]["val_loss"] for h in histories] for s in steps]
        result[names[key]] = {
            "step": steps,
            "wall_s": [statistics.fmean(h[s]["wall_s"] for h in histories) for s in steps],
            "mean": [statistics.fmean(v) for v in losses],
            "std": [statistics.stdev(v) if len(v) > 1 else 0.0 for v in losses],
        }
    return result


FIGURES = ("loss.png", "matrix.png", "levels.png", "extrapolation.png", "capacity.png", "pareto.png")  # figures()'s


def figures(runs: list[Run]) -> dict[str, Figure]:
    """The report's figures by file name: loss.png, and where runs recorded them matrix.png, levels.png,
    extrapolation.png, capacity.png and pareto.png, each configuration in one style throughout."""
    by_label = summaries(runs)
    unplotted = {label: why for label, why in zip(by_label, capability.unscored(by_label)) if why}
    found = {"loss.png": loss_figure(curves(runs), styles(by_label), unplotted)}
    rows, columns, means = capability.matrix(by_label)
    if columns:
        guesses = [capability.chance(by_label, c) for c in columns]
        # One decimal below 10%: a whole-answer guess of 0.4% read "chance 0" beside cells of 0 (a 1e-20 stays 0.0)
        named = [c if g is None else f"{c}\n(chance {capability.written(g, lambda x: f'{x:.{1 if x < 10 else 0}f}')})"
                 for c, g in zip(columns, guesses)]
        found["matrix.png"] = matrix_figure(rows, named, means, capability.marks(by_label, columns),
                                            capability.unscored(by_label))
    for name, figure in (("levels.png", scaling.levels_figure(by_label)),
                         ("extrapolation.png", scaling.extrapolation_figure(by_label)),
                         ("capacity.png", capacity.figure(by_label)),
                         ("pareto.png", pareto.figure(by_label))):
        if figure is not None:
            found[name] = figure
    return found
