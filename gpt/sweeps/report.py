"""Sweep report from a multirun's run folders: report.md (one row per configuration, seeds pooled, mean ± std,
best value per column in bold, failed jobs as rows with their reason; then the capability matrix of held-out
accuracy per task, bucket or length, accuracy per level, loss past the trained length) beside its figures
(gpt/sweeps/report_figures.py).
Written when a multirun ends (the `WriteReport` Hydra callback, gpt/sweeps/sweep_end.py), or again by hand,
optionally keeping each configuration's best learning rate:

    python -m gpt report multirun/2026-01-01/12-00-00 [--best-of optim.lr]
"""
from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra.errors import HydraException

from gpt.atomic import atomic_open, atomic_write
from gpt.overrides import override_value, path_argument
from gpt.sweeps import capability, capacity, pareto, scaling
from gpt.sweeps.best_of import best_settings
from gpt.sweeps.parallel import command_line_values
from gpt.sweeps.report_figures import FIGURES, figures
from gpt.sweeps.repeats import recorded_sweep
from gpt.sweeps.runs import Run, find_runs, group, labels, summaries
from gpt.sweeps.stats import behind_best, best_of, formatter, stat_cell
from gpt.training.run_folder import OVERRIDES, REPORT


@dataclass
class Column:
    header: str
    value: Callable[[dict[str, Any]], float | None]
    lower_is_better: bool
    fmt: str | Callable[[float], str]
    spread: bool = False  # show mean ± std over seeds
    per_corpus: bool = False  # only some corpora have it (bpb: text; exact match: right answers to grade)


def four_figures(value: float) -> str:
    """4 significant figures, zeros kept (13.40), without the point "#" leaves on a whole number (1341., not 1341);
    an exponent past them (an untrained run's ppl is ~1e15)."""
    return f"{value:#.4g}".removesuffix(".")


def _get(key: str, scale: float = 1.0) -> Callable[[dict[str, Any]], float | None]:
    return lambda s: None if s.get(key) is None else s[key] * scale


COLUMNS = [
    Column("params", _get("params"), True, "{:,.0f}"),
    Column("val loss", _get("val_loss"), True, "{:.4f}", spread=True),
    Column("ppl", _get("val_ppl"), True, four_figures, spread=True),
    Column("bpb", _get("val_bpb"), True, "{:.4f}", spread=True, per_corpus=True),
    Column("exact match %", lambda s: None if "all" not in s.get("val_acc", {}) else 100 * s["val_acc"]["all"],
           False, "{:.1f}", spread=True, per_corpus=True),
    Column("train tok/s", _get("tokens_per_s"), False, "{:,.0f}"),
    Column("wall s", _get("wall_s"), True, "{:.1f}"),
    Column("peak MiB", _get("peak_memory_bytes", 1 / pareto.MIB), True, "{:,.0f}"),
    Column("KV bytes/token", _get("kv_bytes_per_token"), True, "{:,.0f}"),
]


def column_values(runs: list[Run], column: Column) -> list[float]:
    """A column's finite values over a configuration's successful runs (one per seed)."""
    return [v for r in runs if r.ok and (v := column.value(r.summary)) is not None and math.isfinite(v)]


def status(runs: list[Run]) -> str:
    failed = [r for r in runs if not r.ok]
    if not failed:
        return "ok"
    reasons = "; ".join(dict.fromkeys(r.summary.get("reason", "unknown") for r in failed))
    words = set(r.summary.get("status") for r in failed)  # failed, stopped, refused, ...: one word for them all
    word = words.pop() if len(words) == 1 else "failed"
    head = word if len(failed) == len(runs) else f"{len(failed)} of {len(runs)} {word}"
    return f"{head}: {reasons}".replace("|", "\\|")


def failed_count(runs: list[Run]) -> str:
    """How many runs did not finish, and why: a sweep read while it runs has jobs still running, not failed."""
    whys = {"refused": "refused as configurations that cannot work",
            "stopped": "stopped (Ctrl-C or their sweep's stop; resume=true continues them)",
            "damaged": "finished with a damaged model.pt that cannot be rebuilt (resume=true trains them again)",
            "unfinished": "unfinished: stopped early or still running"}
    count = {word: sum(r.summary.get("status") == word for r in runs) for word in whys}
    notes = [f"{n} {whys[word]}" for word, n in count.items() if n]
    failed = sum(not r.ok for r in runs) - sum(count.values())
    # Apart, not in brackets after the failed count: "failed runs: 1 (1 unfinished)" read as one run, not two.
    return "; ".join([f"failed runs: {failed}", *notes])


def never_started(sweep_dir: Path, runs: list[Run]) -> list[str]:
    """The report's lines on the jobs of the sweep recorded in the folder that no run folder holds (a sweep stopped
    before they started leaves none), each named by the swept overrides that set it apart; none where every job
    started or no sweep is recorded (a folder of runs made another way)."""
    try:
        sweep = command_line_values(recorded_sweep(sweep_dir))
    except (yaml.YAMLError, ValueError, TypeError, HydraException):
        # a damaged multirun.yaml (resume=true names it), or a glob() over a group's options, which only a running
        # Hydra lists: the report stands without the count
        return []
    swept = {key: values for key, values in sweep.items() if len(values) > 1}
    ran = {tuple(override_value(r.overrides, key, "") for key in swept) for r in runs}
    jobs = list(itertools.product(*swept.values()))
    unstarted = [" ".join(f"{key}={value}" for key, value in zip(swept, job)) for job in jobs if job not in ran]
    if not unstarted:
        return []
    named = ", ".join(f"`{job}`" for job in unstarted)
    return [f"Never started: {len(unstarted)} of the sweep's {len(jobs)} jobs ({named}): the sweep "
            "stopped before them; the same command plus resume=true runs them.", ""]


def seed_noise(groups: dict[tuple[str, ...], list[Run]], names: dict[tuple[str, ...], str]) -> str | None:
    """Which configurations' final val loss differs from the best one's by more than seed noise: more than
    two standard errors of the difference of means (Welch), which needs two seeds or more on both sides."""
    every = {key: column_values(g, COLUMNS[1]) for key, g in groups.items()}
    loss = {key: v for key, v in every.items() if len(v) > 1}
    if len(loss) < 2:
        return None
    show = formatter(COLUMNS[1].fmt)
    top = show(min(statistics.fmean(v) for v in loss.values()))
    # A configuration with one seed can be the column's bold best, with no spread to compare against: not this one.
    which = " with two seeds or more" if show(min(statistics.fmean(v) for v in every.values() if v)) != top else ""
    # Means that print alike tie, as the table bolds them: 1.00002 was "beyond seed noise" of 1.00001, both 1.0000.
    best = best_of(loss, True, COLUMNS[1].fmt) or list(loss)
    within, beyond = [], []
    for key, values in loss.items():
        if key not in best:
            (beyond if behind_best(values, [loss[b] for b in best], True) else within).append(f"`{names[key]}`")
    return (f"Final val loss against the best{which} ({', '.join(f'`{names[b]}`' for b in best)}), beyond seed noise "
            f"(difference > 2 standard errors): {', '.join(beyond) or 'none'}; "
            f"within it: {', '.join(within) or 'none'}.")


def markdown(sweep_dir: Path, runs: list[Run], best_notes: Sequence[str] = (), unstarted: Sequence[str] = ()) -> str:
    groups = group(runs)
    names, common = labels(list(groups))
    values = {c.header: {k: column_values(g, c) for k, g in groups.items()} for c in COLUMNS}
    columns = [c for c in COLUMNS if any(values[c.header].values())]
    # Bold only what tells rows apart: nothing when one row has a value or all rows tie.
    best = {c.header: best_of(values[c.header], c.lower_is_better, c.fmt) for c in columns}
    counted = [r for g in groups.values() for r in g]
    counted_paths = {r.path for r in counted}
    duplicates = sum(r.duplicate for r in runs if r.path not in counted_paths)
    again = len(runs) - len(counted) - duplicates
    left_out = [*([f"{again} ran a seed of their configuration again, and each seed counts once, its last finished "
                   "run"] if again else []),
                *([f"{duplicates} not trained, as the same run as another job: their model reads none of the ++ "
                   "settings that set them apart"] if duplicates else [])]
    repeats = f" ({len(runs) - len(counted)} more left out: {'; '.join(left_out)})" if left_out else ""
    lines = [f"# Sweep report: {sweep_dir}", "",
             f"Runs: {len(counted)}{repeats}, configurations: {len(groups)}, {failed_count(counted)}."
             + (f" Common to all configurations: `{' '.join(common)}`." if common else ""), "",
             *unstarted,
             *(["Each configuration at its best of the swept settings (mean over seeds; the others are left out):",
                *best_notes, ""] if best_notes else []),
             table_row(["configuration", "seeds", *(c.header for c in columns), "status"]),
             "|---|---:|" + "---:|" * len(columns) + "---|"]
    for key, group_runs in groups.items():
        seeds = sum(r.ok for r in group_runs)
        # A mean of fewer seeds than the row counts says so: it read as the mean of all of them.
        cells = [stat_cell(v, c.fmt, c.spread, key in best[c.header], f"({len(v)} of {seeds})" * (0 < len(v) < seeds))
                 for c in columns for v in [values[c.header][key]]]
        lines.append(table_row([f"`{names[key]}`", str(seeds), *cells, status(group_runs)]))
    noise = seed_noise(groups, names)
    validated = COLUMNS[1] in columns  # then a per-corpus column is absent because the corpus has none
    missing = [c.header for c in COLUMNS if c not in columns and not (c.per_corpus and validated)]
    lines += ["", *([noise, ""] if noise else []), *([empty_note(runs, missing), ""] if missing else []),
              "Mean ± sample std over seeds (over the seeds that recorded a value where a cell ends in \"(k of n)\", "
              "e.g. no tokens/s or peak memory for a run finished from its checkpoint without training); **bold** is "
              "the best value of its column. Val loss, perplexity, "
              "bpb (bits per UTF-8 byte of the text predicted, comparable across tokenizers; text corpora) "
              "and exact match (the held-out answers the corpus grades, calculator problems or task answers, "
              "written whole by greedy decoding) are from the last validation. Train tok/s "
              "excludes validation time; peak memory is allocated tensors on GPU, process RSS on CPU (imported "
              "libraries included; a sweep's worker runs job after job and its RSS creeps up several MiB a job, so "
              "on CPU the later jobs read higher without the variant using more); KV bytes/token is every layer's "
              "cache for a full block divided by block_size.", "",
              "![validation loss](loss.png)", "", *capability.markdown(summaries(runs)),
              *(["## Accuracy per level", "", "![accuracy per level](levels.png)", ""]
                if scaling.levels(summaries(runs)) else []),
              *capacity.markdown(summaries(runs)), *scaling.extrapolation_markdown(summaries(runs)),
              *pareto.card(summaries(runs))]
    return "\n".join(lines)


def table_row(cells: Sequence[str]) -> str:
    """A markdown table row (with no columns of numbers left, as when every run failed, no empty cell)."""
    return "| " + " | ".join(cells) + " |"


def empty_note(runs: list[Run], missing: list[str]) -> str:
    """Why columns are left out: a report never goes empty without saying so."""
    ok = [r for r in runs if r.ok]
    if not ok:
        why = "no run finished (see the status column)"
    elif COLUMNS[1].header in missing:
        named = dict.fromkeys(off for r in ok if (off := r.summary.get("validation_off")))
        # A summary.json from before it named the setting says nothing of it: the setting is then only likely.
        why = f"validation was off ({', '.join(named)})" if named else "no run validated (trainer.limit_val_batches=0?)"
        # A run resumed with validation off keeps its earlier validations' rows, which loss.png draws.
        why += ", so there is no val loss" if any(r.history for r in ok) else \
            ", so there is no val loss and loss.png is empty"
    else:
        why = "no finished run recorded them (exact match needs a corpus with right answers, such as the calculator)"
    return f"Left out, with no value in any run: {', '.join(missing)}: {why}."


def write_report(sweep_dir: str | Path, best_of: Sequence[str] = ()) -> Path:
    """Write report.md and its figures into the sweep folder, each configuration at its best value of the `best_of`
    overrides; return the report's path."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        what = "is a file" if sweep_dir.exists() else "does not exist"
        raise ValueError(f"{sweep_dir} {what}: pass the folder of a sweep made by `python train.py -m ...`")
    if (sweep_dir / OVERRIDES).is_file():  # a job's folder: its report and figures would land among its files
        # "." and ".." have no parent to name but their resolved one
        above = sweep_dir.parent if sweep_dir.name not in ("", "..") else sweep_dir.resolve().parent
        raise ValueError(f"{sweep_dir} is the folder of one run, not of a sweep: pass the folder above it, "
                         f"python -m gpt report {path_argument(above)}")
    runs = find_runs(sweep_dir)
    if not runs:
        raise ValueError(f"no run folders (with {OVERRIDES}) under {sweep_dir}: pass the folder of a sweep "
                         "made by `python train.py -m ...`")
    unstarted = never_started(sweep_dir, runs)  # before --best-of leaves runs out: they started
    kept, notes = best_settings({key: [r.summary for r in g] for key, g in group(runs).items()}, best_of)
    runs = [r for r in runs if r.config in kept]
    drawn = figures(runs)
    for name, figure in drawn.items():
        with atomic_open(sweep_dir / name) as f:
            figure.savefig(f, format=Path(name).suffix[1:])
    for name in set(FIGURES) - drawn.keys():  # an earlier report's (other runs, other --best-of), not this one's
        (sweep_dir / name).unlink(missing_ok=True)
    path = sweep_dir / REPORT
    # Whole or not at all: a report.md there says the sweep ended. A reason may hold a file name that is not UTF-8
    # (Python reads its bytes as lone surrogates), written as the escape that names them.
    atomic_write(path, markdown(sweep_dir, runs, notes, unstarted).encode("utf-8", "backslashreplace"))
    return path
