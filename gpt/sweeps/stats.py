"""Seed statistics the sweep report and the capability matrix share: a configuration's values pooled over seeds as a
table cell, which configurations are a column's best, and whether one is behind the best by more than seed noise
(Welch: a gap over two standard errors of the difference of means, which needs two seeds or more on both sides)."""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def percent(value: float) -> str:
    """A percent to one decimal, except where rounding would show a perfect or a null score it is not: 99.96 as
    99.9 (rounded down), 0.04 as 0.1 (rounded up)."""
    if 0 < value < 0.05:
        return "0.1"
    if 99.95 <= value < 100:
        return "99.9"
    return f"{value:.1f}"


def formatter(fmt: str | Callable[[float], str]) -> Callable[[float], str]:
    """A column's format as a function: a format string's format, or the function given."""
    return fmt.format if isinstance(fmt, str) else fmt


def stat_cell(values: Sequence[float], fmt: str | Callable[[float], str], spread: bool = True, bold: bool = False,
              mark: str = "") -> str:
    """`mean ± std` (std only with two seeds or more and `spread`), `—` with no value; **bold** for a best; then
    the marks the caller gives. `fmt`: a format string, or a function from a value to its text."""
    if not values:
        return "—"
    show = formatter(fmt)
    text = show(statistics.fmean(values))
    if spread and len(values) > 1:
        text += " ± " + spread_text(text, statistics.stdev(values), show)
    return (f"**{text}**" if bold else text) + (f" {mark}" if mark else "")


def spread_text(mean_text: str, std: float, show: Callable[[float], str]) -> str:
    """A std to no more decimals than its mean shows: in significant figures a small std read 3.993 ± 0.02552,
    more digits of the spread than of the value."""
    text = show(std)
    if "e" in mean_text + text:  # exponents: each in its own figures
        return text
    decimals = len(mean_text.partition(".")[2])
    return f"{std:.{decimals}f}" if len(text.partition(".")[2]) > decimals else text


def best_of(values: Mapping[K, Sequence[float]], lower_is_better: bool,
            fmt: str | Callable[[float], str] | None = None) -> list[K]:
    """The keys whose mean is the best, as `fmt` shows it (stat_cell's) where given: two cells that read alike are
    both the best, not one bold beside its equal; none when fewer than two distinct means would tell rows apart."""
    show = formatter(fmt) if fmt else (lambda mean: mean)
    means = {key: statistics.fmean(v) for key, v in values.items() if v}
    if len({show(mean) for mean in means.values()}) < 2:
        return []
    top = show((min if lower_is_better else max)(means.values()))
    return [key for key, mean in means.items() if show(mean) == top]


def beyond_noise(values: Sequence[float], best: Sequence[float], lower_is_better: bool) -> bool:
    """Whether `values` are worse than `best` by more than two standard errors of the difference of means. Equal
    seeds (zero spread) count any gap as beyond noise; one seed on either side makes no claim."""
    if len(values) < 2 or len(best) < 2:
        return False
    error = math.sqrt(statistics.variance(values) / len(values) + statistics.variance(best) / len(best))
    gap = statistics.fmean(values) - statistics.fmean(best)
    gap = gap if lower_is_better else -gap
    return gap > 2 * error and gap > 0


def behind_best(values: Sequence[float], bests: Sequence[Sequence[float]], lower_is_better: bool) -> bool:
    """Whether `values` are behind a column's best by more than seed noise, `bests` being the seeds of every
    configuration tied for it: tied means, so behind any one of them is behind the best, and which of them comes
    first in the table (one with a single seed, which makes no claim) must not decide the mark."""
    return any(beyond_noise(values, best, lower_is_better) for best in bests)
