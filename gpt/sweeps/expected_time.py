"""A Hydra callback that prints a multirun's expected wall time before its first job starts: the jobs the
sweep will run (its parameters and any comma lists on the command line) times the seconds per job measured
for the preset (in the precision the jobs will train in, where the preset measured more than one), its training
part scaled by the steps the jobs train against the steps it was measured at (a job's setup does not scale),
divided among the jobs that run at once (gpt/sweeps/parallel.py). A sweep resumed with resume=true counts only the
jobs it has left: those that finished before are kept, not run again. A job that repeats another job's run
(gpt/sweeps/repeats.py) is recorded without training, and counts as none, as does one its own checks will refuse for
its model before it trains (attention=torch_mha with pos=rope)."""
from __future__ import annotations

import math
from pathlib import Path
from statistics import mean
from typing import Any

from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from gpt.machine import cpu_info
from gpt.overrides import override_key
from gpt.sweeps.parallel import command_line_values, job_count, running_at_once
from gpt.sweeps.repeats import repeated
from gpt.training.composition import sweep_overrides
from gpt.training.model_settings import forced_unread, model_accepts, model_refused
from gpt.training.precision import resolve_precision
from gpt.training.recorded import as_typed
from gpt.training.run_folder import kept_on_resume
from gpt.training.sweep_resume import job_overrides

# A job's seconds outside its training steps (building data and model, the last grading, its record), which do not
# scale with the steps. attention_tasks on a 2-core AMD EPYC, two at a time: 10, 40, 200 and 1,200 steps a job took
# 2.4, 3.6, 7.5 and 30.7 s of the sweep's wall time, a line of 2.6 s plus 0.023 s a step; a job of 10 steps of each
# other preset took 1.4-2.9 s.
JOB_SETUP_S = 2.5


def roughly(seconds: float) -> str:
    """A time still to come, as a sweep's estimates write it: ~40 s, ~11 min."""
    return f"~{seconds:.0f} s" if seconds < 90 else f"~{seconds / 60:.0f} min"


def job_steps(config: DictConfig) -> list[int]:
    """trainer.max_steps of the sweep's jobs: the command line's values (a comma list sweeps them), else the
    config's (which a trainer=... group on the command line has already set); none when they are not integers."""
    values = command_line_values(as_typed(config.hydra.overrides.task)).get("trainer.max_steps")
    values = [str(v).strip() for v in values or [config.trainer.max_steps]]
    return [int(v) for v in values] if all(v.isdigit() for v in values) else []


def finished_jobs(config: DictConfig) -> int:
    """Jobs of a resumed sweep whose runs finished before (kept, not run again: kept_on_resume); 0 for a sweep that
    starts."""
    if not config.get("resume"):
        return 0
    folder = Path(config.hydra.sweep.dir)
    return sum(kept_on_resume(run) for run in folder.iterdir() if run.is_dir()) if folder.is_dir() else 0


class SweepJobs:
    """The sweep's jobs, each as the overrides its sweeper gives it, and each one's model as the job composes it."""

    def __init__(self, config: DictConfig) -> None:
        self.config = config
        self.sweep = sweep_overrides(dict(config.hydra.sweeper.get("params") or {}),
                                     as_typed(config.hydra.overrides.task))
        self.values = command_line_values(self.sweep)
        self.loader = GlobalHydra.instance().config_loader()
        self.each = job_overrides(config)
        # A job's model is made of its model settings and the groups it picks (a group may set model keys).
        self.shaping = {key for key in self.values
                        if key.startswith("model.") or key == "init_from" or self.loader.get_group_options(key)}
        self.composed: dict[tuple[str, ...], DictConfig] = {}

    def shaped_by(self, job: list[str]) -> tuple[str, ...]:
        """The job's overrides that shape its model: jobs alike in these have one model."""
        return tuple(o for o in job if override_key(o) in self.shaping)

    def config_of(self, job: list[str]) -> DictConfig:
        """The job's config as the job composes it, for its model: composed once for each combination of the settings
        that shape it, not for each seed too, as composing takes a good part of a second."""
        which = self.shaped_by(job)
        if which not in self.composed:
            self.composed[which] = self.loader.load_sweep_config(self.config, job)
        return self.composed[which]


def repeating_jobs(jobs: SweepJobs) -> int:
    """Jobs of the sweep that repeat another job's run, which train.py records without training: each job composed
    and asked as train.py asks it (gpt/sweeps/repeats.py), where the sweep sweeps a `++` setting, the only kind of
    setting a job may leave unread."""
    values = jobs.values
    forced = {override_key(o) for o in jobs.sweep if o.startswith("++") and len(values.get(override_key(o), [])) > 1}
    if not forced:
        return 0
    count = 0
    for job in jobs.each:
        # A job at the first value of every swept ++ setting is the one of its kind that runs.
        if all(o.split("=", 1)[1] == values[override_key(o)][0] for o in job if override_key(o) in forced):
            continue
        cfg = jobs.config_of(job)
        try:
            ignores = [] if cfg.init_from else forced_unread(cfg, job)
        except (TypeError, ValueError):  # a model its job refuses in one line: not a repeat
            continue
        count += bool(repeated(ignores, jobs.sweep, lambda override: model_accepts(cfg, override)))
    return count


def refused_jobs(jobs: SweepJobs) -> int:
    """Jobs of the sweep that its own checks will refuse for their model before they train (attention=torch_mha with
    pos=rope in the attention presets), each model checked once as its job checks it. A sweep that sets no model
    setting gives every job the config's model; one from init_from= is checked once loaded, by its job alone."""
    if not jobs.shaping:
        return len(jobs.each) * (not jobs.config.init_from and model_refused(jobs.config, jobs.sweep))
    verdicts: dict[tuple[str, ...], bool] = {}
    for job in jobs.each:
        which = jobs.shaped_by(job)
        if which not in verdicts:
            try:
                cfg = jobs.config_of(job)
            except HydraException:  # a job that cannot be composed fails as Hydra says when it starts: counted in full
                verdicts[which] = False
                continue
            verdicts[which] = not cfg.init_from and model_refused(cfg, job)
    return sum(verdicts[jobs.shaped_by(job)] for job in jobs.each)


class ExpectedTime(Callback):
    """seconds_per_job and measured: one figure and where it was measured, or one of each per precision
    ({32-true: ..., bf16-mixed: ...}) for a preset that trains in trainer.precision=auto, whose jobs take the
    precision this machine trains faster in; a precision timed on more than one maker's CPU holds one of each by
    /proc/cpuinfo's vendor_id ({AuthenticAMD: ..., GenuineIntel: ...}), the first where this CPU's is not among them."""

    def __init__(self, seconds_per_job: float | DictConfig, steps: int, measured: str | DictConfig) -> None:
        # seconds_per_job was measured with jobs of `steps` training steps (the preset's trainer.max_steps)
        self.seconds_per_job, self.steps, self.measured = seconds_per_job, steps, measured

    def figures(self, config: DictConfig) -> tuple[float, str]:
        """The seconds per job and where they were measured, for the precision the sweep's jobs train in."""
        if isinstance(self.measured, str):
            return float(self.seconds_per_job), self.measured
        kind = str(resolve_precision(config.trainer.precision, config.trainer.accelerator)).split("-")[0]  # 32, bf16
        key = next((k for k in self.seconds_per_job if k.split("-")[0] == kind), next(iter(self.seconds_per_job)))
        seconds, measured = self.seconds_per_job[key], self.measured[key]
        if isinstance(seconds, DictConfig):  # timed on more than one maker's CPU
            maker = cpu_info("vendor_id")
            which = maker if maker in seconds else next(iter(seconds))
            seconds, measured = seconds[which], measured[which]
        return float(seconds), measured

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        jobs, counts = job_count(config), job_steps(config)
        if not counts:  # no estimate for a mistyped trainer.max_steps: each job refuses it in one line
            return
        seconds_per_job, measured = self.figures(config)
        each = SweepJobs(config)
        kept, repeating, refused = min(finished_jobs(config), jobs), repeating_jobs(each), refused_jobs(each)
        left = max(0, jobs - kept - repeating - refused)  # a kept job finished, which the others never do
        aside = [f"{kept} finished before, kept"] * bool(kept) + \
            [f"{repeating} more repeating another job's run, not trained"] * bool(repeating) + \
            [f"{refused} more refused for their model before training, ~0 s"] * bool(refused)
        if not left:
            print(f"expected wall time: none, all {jobs} jobs finished before and are kept" if kept == jobs else
                  f"expected wall time: none, of {jobs} jobs {'; '.join(aside)}", flush=True)
            return
        at_once = running_at_once(config, left)
        steps = mean(counts)
        setup = min(JOB_SETUP_S, seconds_per_job)
        per_job = setup + (seconds_per_job - setup) * steps / self.steps
        scaled = "" if steps == self.steps else f" ({steps:,.0f} steps a job; measured at {self.steps:,})"
        seconds = math.ceil(left / at_once) * per_job
        counted = f"{left} job{'s' * (left != 1)}" + " left" * bool(kept) + (f" ({'; '.join(aside)})" if aside else "")
        print(f"expected wall time: {counted} x ~{per_job:.0f} s{scaled}, {at_once} at a time = {roughly(seconds)} "
              f"({measured})", flush=True)
