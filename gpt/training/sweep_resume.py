"""Resuming a killed sweep: the sweep folder a sweep run again with resume=true continues, told by its multirun.yaml
or, where that is damaged, by its jobs' own records; and each job's overrides and config as Hydra's sweeper composes
them."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict

from gpt.inference.checkpoint import CheckpointError
from gpt.overrides import override_key
from gpt.training.composition import sweep_overrides
from gpt.training.recorded import as_typed
from gpt.training.run_folder import NOT_IDENTITY, OVERRIDES, REPORT, read_overrides, read_summary
from gpt.training.run_folder_lock import holds_work
from gpt.training.saved_config import run_identity, saved_config, swept


def sweep_identity(cfg: DictConfig) -> dict[str, Any]:
    """What makes a sweep the same sweep: the config every job starts from, the preset's swept values and the
    command line's overrides (sweeps included), less those that only say how to start; the swept ones in their order,
    which numbers the jobs (their folders): reordered, job 1 would be kept or continued from another job's folder."""
    overrides = [o for o in as_typed(cfg.hydra.overrides.task) if override_key(o) not in NOT_IDENTITY]
    params = cfg.hydra.sweeper.get("params")
    return {"config": run_identity(cfg), "overrides": sorted(overrides), "axes": swept(overrides),
            "params": OmegaConf.to_container(params) if params else {}}


def sweep_ended(folder: Path) -> bool:
    """Whether the sweep in `folder` ran to its end: its report is written (the last thing a sweep does) and every
    job's record says it finished, was refused or repeats another job's run. A killed sweep has no report; a stopped
    one has failed jobs."""
    if not (folder / REPORT).is_file():
        return False
    try:
        return all((read_summary(job.parent.parent) or {}).get("status") in ("ok", "refused", "duplicate")
                   for job in folder.glob("*/.hydra/config.yaml"))
    except ValueError:  # a damaged record: that job has not ended well
        return False


def sweep_to_resume(cfg: DictConfig) -> Path:
    """The folder of the sweep made with this sweep's identity (its multirun.yaml) where a sweep re-run with
    resume=true continues: hydra.sweep.dir as given, else searched under the folder its ${now:...} pattern starts
    in, the newest that has not ended first (the same sweep run again to its end must not hide a killed one), a
    killed one (no report yet) before one that ended with failed jobs. A folder whose multirun.yaml is damaged is
    told by its jobs' own records (jobs_differ): deleting it would throw away its finished jobs."""
    pattern = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)["dir"]
    fixed = pattern.split("${", 1)[0]  # "multirun/" of multirun/${now:%Y-%m-%d}/..., all of a fixed folder
    root = Path(fixed) if fixed == pattern or fixed.endswith("/") else Path(fixed).parent
    mine = sweep_identity(cfg)
    found = []
    for saved in root.rglob("multirun.yaml"):
        try:
            same = sweep_identity(saved_config(saved, sweep=True)) == mine
        except CheckpointError as damaged:  # its jobs' own records tell whether it is this sweep
            differ = jobs_differ(saved.parent, cfg)
            if differ and saved.parent == root and fixed == pattern:  # the folder named: why not this sweep
                raise (damaged if differ == NO_JOB else ValueError(
                    f"resume=true: {saved} is damaged, and the sweep in {root} has {differ}; resume it with the "
                    "overrides it was made with (its jobs' .hydra/overrides.yaml), or drop resume=true and pass "
                    "another hydra.sweep.dir= to start a new sweep")) from None
            same = not differ
        if same:
            found.append(saved.parent)
    if not found and fixed == pattern and (root / "multirun.yaml").is_file():  # the folder named: why not this sweep
        theirs = sweep_identity(saved_config(root / "multirun.yaml", sweep=True))
        there, here = set(theirs["overrides"]), set(mine["overrides"])
        what = f"{' '.join(sorted(there - here)) or 'nothing'} where this command has " \
            f"{' '.join(sorted(here - there)) or 'nothing'}" if there != here else \
            f"its swept overrides in the order {' '.join(theirs['axes'])} (the order that numbers its jobs) where " \
            f"this command has {' '.join(mine['axes'])}" if theirs["axes"] != mine["axes"] else \
            "these overrides on another config (configs/ or the preset changed since)"
        raise ValueError(f"resume=true: the sweep in {root} was made with {what}; resume it with the overrides it was "
                         "made with, or drop resume=true and pass another hydra.sweep.dir= to start a new sweep")
    if not found:
        raise ValueError(f"resume=true found no sweep made with this config under {root}/ (a multirun.yaml): drop "
                         "resume=true to start the sweep, or pass the killed sweep's folder as hydra.sweep.dir=")
    # A killed sweep (no report) before one that ran to its end with failed jobs, before one that ended well.
    return max(found, key=lambda folder: (not (folder / REPORT).is_file(), not sweep_ended(folder),
                                          (folder / "multirun.yaml").stat().st_mtime))


NO_JOB = "no job to compare"


def job_overrides(cfg: DictConfig) -> list[list[str]]:
    """Each job's overrides of this sweep, in job order: the preset's sweeper params, then the command line's. Hydra's
    own split: which value each key takes in each numbered job is the sweeper's, not a copy of its rules. Needs Hydra
    initialized with the configs (preflight's, or the sweep's own)."""
    overrides = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader()).parse_overrides(
        sweep_overrides(cfg.hydra.sweeper.get("params") or {}, as_typed(cfg.hydra.overrides.task)))
    return [list(job) for job in BasicSweeper.split_arguments(overrides, None)[0]]


def job_configs(cfg: DictConfig) -> Iterator[DictConfig]:
    """The config of each job of this sweep, in job order (its number set, so its folder's name resolves), composed as
    Hydra's sweeper and launcher compose them; each when it is asked for, as composing takes a good part of a second
    and a caller may stop at the first that does."""
    loader = GlobalHydra.instance().config_loader()
    for num, overrides in enumerate(job_overrides(cfg)):
        job = loader.load_sweep_config(cfg, overrides)
        with open_dict(job):
            job.hydra.job.num = num
        yield job


def jobs_differ(folder: Path, cfg: DictConfig) -> str | None:
    """For a sweep folder whose multirun.yaml is damaged: where its jobs differ from this sweep's, as words, or None
    when every job folder holding a run's work was made as this sweep's job of its number (the overrides and composed
    config its .hydra records): its finished jobs are then this sweep's to keep, and the others continue or run.
    NO_JOB when no job holds work to compare; a job record that cannot be read is refused naming it."""
    worked = sorted((record.parent.parent for record in folder.glob(f"*/{OVERRIDES}")
                     if holds_work(record.parent.parent)), key=lambda job: (len(job.name), job.name))
    if not worked:
        return NO_JOB
    jobs = {folder / str(job.hydra.sweep.subdir): job for job in job_configs(cfg)}
    for path in worked:
        if path not in jobs:
            return f"a job in {path}, which this command's sweep of {len(jobs)} job{'s' * (len(jobs) != 1)} has none of"
        job = jobs[path]
        there = {o for o in read_overrides(path) if override_key(o) not in NOT_IDENTITY}
        here = {o for o in as_typed(job.hydra.overrides.task) if override_key(o) not in NOT_IDENTITY}
        if there != here:
            return f"its job {path} made with {' '.join(sorted(there - here)) or 'nothing'} where this command's " \
                f"job {job.hydra.job.num} has {' '.join(sorted(here - there)) or 'nothing'}"
        if run_identity(saved_config(path / ".hydra" / "config.yaml", job=True)) != run_identity(job):
            return f"its job {path} made with these overrides on another config (configs/ or the preset changed since)"
    return None
