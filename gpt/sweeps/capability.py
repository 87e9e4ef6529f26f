"""The capability matrix of a sweep: held-out accuracy per column (a task, a pair count, a distance bucket, a range of
lengths, an operation) for each configuration, seeds pooled, with the differences from each column's best that are
beyond seed noise marked, so are the values still rising when training stopped, and a row of what guessing scores
(a range where the configurations' lines differ in it).
Exact match always; per-token accuracy too where answers have several tokens. Plain data in, markdown lines and a
heatmap's numbers out (gpt/sweeps/report.py, report_figures.py)."""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from gpt.sweeps.stats import behind_best, best_of, percent, stat_cell

BEYOND_NOISE, RISING = "▼", "↑"
EXACT, TOKEN = "val_acc", "val_token_acc"  # summary.json's exact match and per-token accuracy per column
TOKENS = "val_tokens"  # summary.json's mean answer length in tokens per column
CHANCE = {EXACT: "val_exact_chance", TOKEN: "val_chance"}  # what a guess scores on each, per column
BEFORE = "val_acc_before"  # exact match per column at the validation before the last (the report adds it)
MIN_RISE = 1.0  # points: the least rise, and the least room left below 100%, that counts as still learning
AGREE = 1e-9  # relative: runs' chances this close differ by float rounding alone
RANGE = "–"  # between a chance's lowest and highest (an en dash: a column without one reads an em dash, —)
RANGE_NOTE = ("where it reads lowest–highest, the configurations' lines differ in what guessing scores (the sweep "
              "varies a task setting that changes it, such as copy's vocab or recall's values) and each row's own "
              "chance lies in that range")


def columns(summaries: dict[str, list[dict[str, Any]]], key: str = EXACT) -> list[str]:
    """Every accuracy group the runs report ("all" aside), in the order runs first report them."""
    seen: dict[str, None] = {}
    for runs in summaries.values():
        for summary in runs:
            seen.update(dict.fromkeys(k for k in summary.get(key, {}) if k != "all"))
    return list(seen)


def values(runs: list[dict[str, Any]], column: str, key: str = EXACT) -> list[float]:
    """A column's accuracies in percent over a configuration's successful runs (one per seed)."""
    return [100 * s[key][column] for s in runs
            if s.get("status") == "ok" and math.isfinite(s.get(key, {}).get(column, math.nan))]


def rising(runs: list[dict[str, Any]], column: str) -> bool:
    """Whether a column was still climbing when training stopped, with room left: each seed's rise from its
    validation before the last, paired, on average MIN_RISE points or more and over two standard errors (two seeds
    or more), and the mean more than MIN_RISE points below 100%."""
    ok = [s for s in runs if s.get("status") == "ok" and column in s.get(EXACT, {}) and column in s.get(BEFORE, {})]
    if len(ok) < 2 or statistics.fmean(100 * s[EXACT][column] for s in ok) >= 100 - MIN_RISE:
        return False
    rises = [100 * (s[EXACT][column] - s[BEFORE][column]) for s in ok]
    mean = statistics.fmean(rises)
    return mean >= MIN_RISE and mean > 2 * statistics.stdev(rises) / math.sqrt(len(rises))


def marks(summaries: dict[str, list[dict[str, Any]]], cols: list[str]) -> list[list[str]]:
    """RISING or nothing for each configuration (in matrix()'s row order) and column, for the heatmap's cells."""
    return [[RISING * rising(runs, c) for c in cols] for runs in summaries.values()]


def unscored(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Why each configuration (in matrix()'s row order) has no value in any column, as its report.md status reads
    (refused, failed, stopped, damaged, unfinished: "failed" for a mix), or "" where a run finished: a blank row in
    the heatmap read as a configuration never swept."""
    def why(runs: list[dict[str, Any]]) -> str:
        if not runs or any(s.get("status") == "ok" for s in runs):
            return ""
        words = {s.get("status", "failed") for s in runs}
        return words.pop() if len(words) == 1 else "failed"

    return [why(runs) for runs in summaries.values()]


def chance(summaries: dict[str, list[dict[str, Any]]], column: str, key: str = EXACT) -> tuple[float, float] | None:
    """What a guess scores in a column on exact match (every token of an answer guessed) or per token (`key`), in
    percent, as (lowest, highest) over the runs: one value twice where they agree, or None. A task setting can
    change it and keep the column's name (copy's vocab, recall's values: the values a guess picks from), so a sweep
    of it grades each configuration against its own chance, and their mean is the chance of none of them."""
    found = [100 * s[CHANCE[key]][column] for runs in summaries.values() for s in runs
             if column in s.get(CHANCE[key], {})]
    return spread(found) if found else None


def spread(found: list[float]) -> tuple[float, float]:
    """(lowest, highest) of the runs' chances, their mean twice where they differ by float rounding alone."""
    low, high = min(found), max(found)
    if math.isclose(low, high, rel_tol=AGREE):
        mean = statistics.fmean(found)
        return mean, mean
    return low, high


def written(guess: tuple[float, float], number: Callable[[float], str]) -> str:
    """A chance as a cell or a label writes it: one number, or "lowest–highest" where they differ as written (a
    whole copy of 16 tokens guessed from 8 or from 16 reads 0.0 either way)."""
    low, high = (number(g) for g in guess)
    return low if low == high else f"{low}{RANGE}{high}"


def multi_token(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The columns where per-token accuracy tells more than exact match: their answers have several tokens on
    average (summary.json's val_tokens; for a run recorded before it, where its two accuracies differ, which exact
    match's need of the line's end also makes happen on a one-token column)."""
    def several(summary: dict[str, Any], column: str) -> bool:
        if column in summary.get(TOKENS, {}):
            return summary[TOKENS][column] > 1
        return summary[TOKEN][column] != summary.get(EXACT, {}).get(column)

    return [c for c in columns(summaries, TOKEN)
            if any(several(s, c) for runs in summaries.values() for s in runs if c in s.get(TOKEN, {}))]


def matrix(summaries: dict[str, list[dict[str, Any]]]) -> tuple[list[str], list[str], list[list[float]]]:
    """(row labels, columns, mean exact match in percent per row and column, NaN where a row has none)."""
    cols = columns(summaries)
    means = [[statistics.fmean(v) if (v := values(runs, c)) else math.nan for c in cols] for runs in summaries.values()]
    return list(summaries), cols, means


def table(summaries: dict[str, list[dict[str, Any]]], cols: list[str], key: str) -> list[str]:
    """One metric's matrix as markdown rows: configurations, then what a guess scores."""
    pooled = {label: {c: values(runs, c, key) for c in cols} for label, runs in summaries.items()}
    best = {c: best_of({label: v[c] for label, v in pooled.items()}, False, percent) for c in cols}
    lines = ["| configuration | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for label, by_column in pooled.items():
        # A best, tied as printed, is behind none: 50.011% read **50.0 ± 0.0** ▼ beside its tie at 50.022%.
        behind = {c: label not in best[c] and behind_best(by_column[c], [pooled[b][c] for b in best[c]], False)
                  for c in cols}
        climbs = {c: key == EXACT and rising(summaries[label], c) for c in cols}
        cells = [stat_cell(by_column[c], percent, bold=label in best[c],
                           mark=BEYOND_NOISE * behind[c] + RISING * climbs[c]) for c in cols]
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    guesses = chance_cells(summaries, cols, key)
    if any(guesses):
        lines.append("| *chance* | " + " | ".join(f"*{g}*" if g else "—" for g in guesses) + " |")
    return lines


def chance_cells(summaries: dict[str, list[dict[str, Any]]], cols: list[str], key: str) -> list[str]:
    """table()'s chance row: each column's chance as written, "" where no run recorded one."""
    return ["" if (g := chance(summaries, c, key)) is None else written(g, "{:.1f}".format) for c in cols]


def note(summaries: dict[str, list[dict[str, Any]]], cols: list[str], key: str) -> str:
    """The end of a matrix's caption after its chance is described: what a range in its chance row means, if any."""
    return f"; {RANGE_NOTE}." if any(RANGE in g for g in chance_cells(summaries, cols, key)) else "."


def markdown(summaries: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The matrix (and the per-token one, where answers have several tokens) with its legend; no lines when no
    run reported accuracy per group."""
    cols = columns(summaries)
    if not cols:
        return []
    climbing = any(rising(runs, c) for runs in summaries.values() for c in cols)
    # Only where the table has a chance row: a calculator sweep's caption explained one it does not have.
    guessed = any(chance_cells(summaries, cols, EXACT))
    lines = ["## Capability matrix", "", *table(summaries, cols, EXACT), "",
             "Held-out exact match % at the last validation (every answer of the graded lines; an answer is exact "
             "when greedy decoding writes it whole), mean ± sample std over seeds; **bold** is the best of its column; "
             f"{BEYOND_NOISE} marks a value below the column's best by more than seed noise (a gap over 2 standard "
             "errors of the difference, two seeds or more on each side)"
             + ("; *chance* is what guessing scores, each token of an answer picked at random among those its "
                "task's line leaves possible there and the whole answer right" + note(summaries, cols, EXACT)
                if guessed else "."), "",
             *([f"{RISING} marks a value still rising when training stopped: the seeds' rises since their own "
                f"validation before the last, {MIN_RISE:.0f} point or more on average and over 2 standard errors of "
                f"the rises (two seeds or more), with more than {MIN_RISE:.0f} point left below 100%. More steps "
                "may raise it: it measures how fast the variant learns the task as much as what it can do.", ""]
               if climbing else []),
             "![capability matrix](matrix.png)", ""]
    several = multi_token(summaries)
    if several:
        lines += ["### Per-token accuracy", "", *table(summaries, several, TOKEN), "",
                  "Each answer token predicted from the true tokens before it, % (the columns whose answers have "
                  "several tokens): one early slip does not hide the rest of an answer"
                  + ("; *chance* here is per token" + note(summaries, several, TOKEN)
                     if any(chance_cells(summaries, several, TOKEN)) else "."), ""]
    return lines
