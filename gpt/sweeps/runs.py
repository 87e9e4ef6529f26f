"""A sweep's runs, read from its run folders: each job's overrides, summary and history, grouped by configuration
(seeds pooled, each seed once) and labelled by what sets each configuration apart."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpt.overrides import override_key, override_value
from gpt.sweeps import capability
from gpt.training.run_folder import (CHECKPOINT, NOT_IDENTITY, OVERRIDES, SUMMARY, model_rebuildable, read_history,
                                     read_overrides, read_summary)

NOT_CONFIG = ("seed", *NOT_IDENTITY)


@dataclass
class Run:
    path: Path
    overrides: list[str]
    summary: dict[str, Any]
    history: list[dict[str, float]]

    @property
    def ok(self) -> bool:
        return self.summary.get("status") == "ok"

    @property
    def refused(self) -> bool:
        """A configuration the checks refused (heads that do not divide dim): an answer of the sweep, not a fault."""
        return self.summary.get("status") == "refused"

    @property
    def stopped(self) -> bool:
        """A job stopped before its end (Ctrl-C, or its sweep's stop): resume=true continues it."""
        return self.summary.get("status") == "stopped"

    @property
    def duplicate(self) -> bool:
        """A job that would have repeated another job's run (gpt/sweeps/repeats.py), trained there: not a fault."""
        return self.summary.get("status") == "duplicate"

    @property
    def seed(self) -> str:
        """The seed it was given ("" for the config's own)."""
        return override_value(self.overrides, "seed", "")

    @property
    def config(self) -> tuple[str, ...]:
        """The configuration's identity: its overrides without the seed, so seeds pool into one row, without how it
        started (a job continued by a resumed sweep is the job it continues), and without the ++ settings its model
        reads nowhere (`++model.window=4` beside attention=mha: the same run at any window)."""
        ignores = set(self.summary.get("ignores", []))
        return tuple(sorted(o for o in self.overrides if override_key(o) not in NOT_CONFIG and o not in ignores))


def natural_key(path: Path) -> list[Any]:
    """Job folders in job order (2 before 10)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def read_run(path: Path) -> Run:
    overrides = read_overrides(path)
    summary = read_summary(path) or {"status": "unfinished",
                                     "reason": f"no {SUMMARY}: the job stopped early or is still running"}
    # A model.pt that is not there was deleted on purpose (the numbers stand); one there but damaged is not.
    if summary.get("status") == "ok" and (path / "model.pt").exists() and not model_rebuildable(path):
        summary = {"status": "damaged", "reason": f"model.pt is damaged and cannot be rebuilt, its {CHECKPOINT} "
                   "damaged or gone: resume=true trains the job again"}
    return Run(path, overrides, summary, read_history(path))


def find_runs(sweep_dir: Path) -> list[Run]:
    """Every run folder under the sweep folder (any depth, so merged or nested sweeps work), in job order."""
    folders = sorted((p.parent.parent for p in sweep_dir.rglob(str(OVERRIDES))), key=natural_key)
    return [read_run(p) for p in folders]


def labels(configs: list[tuple[str, ...]]) -> tuple[dict[tuple[str, ...], str], list[str]]:
    """A short label per configuration (only the overrides that differ between them) and the common ones."""
    if len(configs) < 2:  # nothing differs: the label is the whole configuration
        return {c: " ".join(c) or "(defaults)" for c in configs}, []
    common = sorted(set.intersection(*map(set, configs)))
    return {c: " ".join(o for o in c if o not in common) or "(defaults)" for c in configs}, common


def group(runs: list[Run]) -> dict[tuple[str, ...], list[Run]]:
    """Runs by configuration, in the order the sweep first ran each configuration, each seed once: sweeps merged
    under one folder that ran a configuration again repeat its seeds, which are not more seeds (on CPU the same
    numbers again), so they would narrow its spread and be counted as seeds. A seed's last finished run stands for
    it (else its last run, but never a duplicate of it: the run it repeats says how that run went)."""
    seeds: dict[tuple[str, ...], dict[str, Run]] = {}
    for run in runs:  # in job order: a later sweep's run after an earlier one's
        earlier = seeds.setdefault(run.config, {}).get(run.seed)
        if earlier is None or run.ok or not (earlier.ok or run.duplicate):
            seeds[run.config][run.seed] = run
    kept = {r.path for by_seed in seeds.values() for r in by_seed.values()}
    return {config: [r for r in runs if r.config == config and r.path in kept] for config in seeds}


def summaries(runs: list[Run]) -> dict[str, list[dict[str, Any]]]:
    """Each configuration's label and its runs' summaries, each with its accuracies at the validation before the
    last (from history.csv), for the capability matrix."""
    groups = group(runs)
    names, _ = labels(list(groups))
    return {names[key]: [{**r.summary, capability.BEFORE: accuracy_before_last(r.history, r.summary)}
                         for r in group_runs]
            for key, group_runs in groups.items()}


def accuracy_before_last(history: list[dict[str, float]], summary: dict[str, Any]) -> dict[str, float]:
    """Exact match per column of summary.json at the validation before the last (history.csv's val_acc_<column>),
    or none."""
    validated = [row for row in history if "val_loss" in row]
    if len(validated) < 2:
        return {}
    # The logger writes a column's spaces as underscores: "divided by" is history's val_acc_divided_by.
    logged = {column: f"{capability.EXACT}_{column.replace(' ', '_')}" for column in summary.get(capability.EXACT, {})
              if column != "all"}
    return {column: validated[-2][key] for column, key in logged.items() if key in validated[-2]}
