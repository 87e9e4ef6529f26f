"""train.py's command line checked before Hydra makes a run folder: the config is composed as Hydra will
compose it and checked, so a typo'd key, an unknown option or a bad value is one line (with a "did you mean"
where a key is close) and exit 2, and no empty outputs/<date>/<time>/ is left behind."""
from __future__ import annotations

import re
import shutil
import sys
from functools import partial
from pathlib import Path

from hydra.core.override_parser.types import ValueType
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from gpt.overrides import override_key, quoted
from gpt.training.command_flags import check_flags
from gpt.training.composition import (compose_train, composed_sweep, groups, not_an_option, parsed,
                                      sweep_overrides)
from gpt.training.config_errors import Check, explain
from gpt.training.recorded import as_typed
from gpt.training.run_folder import SUMMARY, finished
from gpt.training.run_folder_lock import claim as claim_run_folder
from gpt.validate import first_line

MULTIRUN_FLAGS = ("-m", "--multirun")
# Unresolved: a ${ that an odd number of backslashes escapes (backslashes before one pair up)
ESCAPED_INTERPOLATION = re.compile(r"(?<!\\)(?:\\\\)*\\\$\{")


def first_of_each_sweep(overrides: list[str]) -> list[str]:
    """The overrides with each sweep (`pos=rope,alibi`) cut to its first value: keys and options are the same
    in every job of a sweep, so one job's composition finds every typo."""
    return [f"{o.get_key_element()}={next(o.sweep_string_iterator())}" if o.is_sweep_override() else o.input_line
            for o in parsed(overrides)]


def other_options(config_dir: Path, overrides: list[str]) -> list[list[str]]:
    """One job's overrides for each value but the first of every swept group (`attention=mha,sliding_window`), the
    other sweeps at their first values: a job whose options lack a key the command sets (model.window is
    sliding_window's alone) fails Hydra's composition of the whole sweep before any job runs."""
    first = first_of_each_sweep(overrides)
    jobs = []
    for i, override in enumerate(parsed(overrides)):
        if override.is_choice_sweep() and override.value_type != ValueType.GLOB_CHOICE_SWEEP \
                and override.key_or_group in groups(config_dir):
            jobs += [[*first[:i], f"{override.get_key_element()}={value}", *first[i + 1:]]
                     for value in list(override.sweep_string_iterator())[1:]]
    return jobs


def check_swept_options(config_dir: Path, overrides: list[str]) -> None:
    """Every value of a swept group (`attention=mha,gqx`) is one of its options. Only the first value is composed
    before the sweep; Hydra would find a later typo when the sweep starts, in many lines, after making its folder."""
    for override in parsed(overrides):
        group = override.key_or_group
        if override.is_choice_sweep() and override.value_type != ValueType.GLOB_CHOICE_SWEEP \
                and group in groups(config_dir):
            for option in override.sweep_string_iterator():
                if option != "null" and not (config_dir / group / f"{option}.yaml").is_file():
                    raise ValueError(not_an_option(config_dir, group, option))


def preflight(argv: list[str], config_dir: Path, check: Check, claim: bool = False) -> list[str]:
    """Exit 2 with one line on stderr if the command line cannot make a run; return the command line to hand
    Hydra if it can. Hydra's own flags (--help, --cfg, -c, ...) are left to Hydra. A sweep's keys are
    checked here, its values in each job: a job whose values cannot work is a failed row of the sweep report and
    the others still run, unless no job's values can work (refuse_if_every_job_is). With `claim` (train.py's call),
    a single run's folder is made and locked now, before Hydra writes into it, and pinned in the command line
    returned (its ${now:...} resolved once), and a run resumed there with another config than its record's refused;
    a sweep re-run with resume=true is sent into the killed sweep's folder. Any other flag is one line too
    (command_flags)."""
    overrides = [a for a in argv if a not in MULTIRUN_FLAGS]
    # Hydra's parser reads one run of overrides: those after a -m between them were "unrecognized arguments".
    argv = [a for a in argv if a in MULTIRUN_FLAGS] + overrides
    try:
        check_flags(argv, config_dir.parent / "generate.py")  # beside train.py and configs/
        if any(a.startswith("-") for a in overrides):  # --help, --cfg, ...: what they print is Hydra's
            return argv
        check_swept_options(config_dir, overrides)
        first = first_of_each_sweep(overrides)
        try:
            cfg = compose_train(config_dir, first)
        except HydraException as err:
            raise ValueError(explain(err, config_dir, first, overrides, check)) from None
        multirun = any(a in MULTIRUN_FLAGS for a in argv) or cfg.hydra.mode == RunMode.MULTIRUN
        for job in other_options(config_dir, overrides) if multirun else []:
            try:
                compose_train(config_dir, job)
            except HydraException as err:
                raise ValueError(explain(err, config_dir, job, overrides, check)) from None
        if not multirun:
            sweep = next((o.input_line for o in parsed(overrides) if o.is_sweep_override()), None)
            if sweep:  # Hydra's own answer is five lines about an "Ambiguous value"
                raise ValueError(f"{sweep} is a sweep: add -m to run one job per value (python train.py -m "
                                 f"{' '.join(overrides)}), or give one value (quote one that holds a comma: "
                                 "key='a,b')")
            check(cfg)
            check_folder_names(cfg.hydra.run, "hydra.run", ["dir"])
            if not str(cfg.hydra.run.dir).strip():  # Hydra would write into the current folder itself
                raise ValueError("hydra.run.dir is empty: name the run's folder, e.g. hydra.run.dir=outputs/mine")
            run_dir = Path(cfg.hydra.run.dir).resolve()
            own = bool(cfg.ckpt_path) and Path(cfg.ckpt_path).resolve().parent.parent == run_dir  # its last.ckpt
            # Another run's checkpoint continued here writes over a finished run's record and model.pt as a fresh run
            if claim and not (cfg.resume or own):
                refuse_finished(Path(cfg.hydra.run.dir), "run")
            if claim and claim_run_folder(Path(cfg.hydra.run.dir)):
                if cfg.resume or own:  # compared while this run holds the folder: no other run is writing its record
                    from gpt.training.same_run import refuse_another_run  # torch: only to resume

                    refuse_another_run(cfg, Path(cfg.hydra.run.dir), overrides, partial(compose_train, config_dir))
                return [a for a in argv if override_key(a) != "hydra.run.dir"] + \
                    [f"hydra.run.dir={quoted(cfg.hydra.run.dir)}"]
        else:
            check_folder_names(cfg.hydra.sweep, "hydra.sweep", ["dir", "subdir"])
            check_launcher(cfg)
            if claim and not cfg.resume:
                refuse_finished(Path(cfg.hydra.sweep.dir), "sweep")
            refuse_if_every_job_is(config_dir, overrides, check)
        return argv + resumed_sweep(argv, config_dir)
    except ValueError as err:
        print(f"error: {first_line(err)}", file=sys.stderr)
        sys.exit(2)


def refuse_if_every_job_is(config_dir: Path, overrides: list[str], check: Check) -> None:
    """Refuse a sweep whose every job its checks refuse (data.seed=x beside attention=mha,gqa): each job was refused
    in its own process, after Hydra made the sweep's folder, and the sweep ended in a report of refusals. Each job is
    checked as train.py checks it, in job order until one passes: a sweep that can run pays for one job's composition
    and check here."""
    from gpt.training.sweep_resume import job_configs  # torch: only for a sweep, whose process imports it anyway

    reasons = []
    with composed_sweep(config_dir, overrides) as cfg:
        # what a job's check is given in train.py (recorded_sweep: the multirun.yaml Hydra writes from this config)
        sweep = sweep_overrides(cfg.hydra.sweeper.get("params") or {}, as_typed(cfg.hydra.overrides.task))
        try:
            for job in job_configs(cfg):
                try:
                    check(job, sweep=sweep)
                    return
                except ValueError as err:
                    reasons.append(first_line(err))
        except HydraException:  # a job that cannot be composed fails as Hydra says when the sweep starts
            return
    every = "has it" if len(set(reasons)) == 1 else "is refused (this is the first one's reason)"
    raise ValueError(f"{reasons[0]}; every job of the sweep {every}, so none was started")


def check_folder_names(section: DictConfig, where: str, keys: list[str]) -> None:
    """Refuse a run or sweep folder whose name holds a ${ (written escaped, 'a\\${b}', or from a value holding one):
    Hydra resolves its job log's file name, inside that folder, a second time, reads the ${ as an interpolation and
    fails with a traceback, after the folder is made."""
    for key in keys:
        written = str(OmegaConf.to_container(section, resolve=False)[key])
        try:
            holds = "${" in str(section[key])
        except InterpolationResolutionError:  # a sweep's subdir of ${hydra.job.num}, known in each job only
            holds = ESCAPED_INTERPOLATION.search(written) is not None
        if holds:
            raise ValueError(f"{where}.{key}={written}: Hydra cannot use a folder whose name holds ${{ (its job "
                             f"logging reads it as an interpolation); pick another {where}.{key}= without one")


def check_launcher(cfg: DictConfig) -> None:
    """A sweep sent to SLURM (hydra/launcher=slurm) from a machine without it: submitit's answer is thirty lines of
    traceback, after the sweep's folder is made."""
    target = str(OmegaConf.select(cfg, "hydra.launcher._target_") or "")
    if "submitit" in target and "Slurm" in target and not all(shutil.which(tool) for tool in ("sbatch", "srun")):
        raise ValueError("hydra/launcher=slurm sends each job to SLURM, and this machine has no sbatch or srun: run "
                         "the command on the cluster's login node, or drop hydra/launcher=slurm to run the sweep here")


def refuse_finished(folder: Path, kind: str) -> None:
    """Refuse a run or sweep started afresh in a folder that holds finished results: Hydra would write the new
    config over the one they were made with, so the report would read them as the new run's, and the new run's
    model.pt and record would replace them."""
    done = sum(finished(p.parent) for p in folder.glob(f"**/{SUMMARY}")) if folder.is_dir() else 0
    if done:
        what = "a finished run" if kind == "run" else f"a sweep with {done} finished job{'s' * (done > 1)}: add " \
            "resume=true to run only the jobs left (the finished ones are kept)"
        raise ValueError(f"{folder} holds {what}; pass another hydra.{kind}.dir=, or delete the folder to "
                         f"start it again")


def resumed_sweep(argv: list[str], config_dir: Path) -> list[str]:
    """For a sweep re-run with resume=true: the override that sends it into the killed sweep's folder, where
    finished jobs are kept and the others continue (nothing when hydra.sweep.dir names that folder already)."""
    overrides = [a for a in argv if a not in MULTIRUN_FLAGS]
    if not any(override_key(o) == "resume" for o in overrides):
        return []
    with composed_sweep(config_dir, overrides) as cfg:
        if not cfg.resume or not (any(a in MULTIRUN_FLAGS for a in argv) or cfg.hydra.mode == RunMode.MULTIRUN):
            return []
        from gpt.training.sweep_resume import sweep_to_resume  # torch: only for a command that resumes

        folder = sweep_to_resume(cfg)  # inside: a sweep folder told by its jobs has them composed
    print(f"resuming the sweep in {folder}")
    return [] if any(o.startswith("hydra.sweep.dir=") for o in overrides) else [f"hydra.sweep.dir={folder}"]
