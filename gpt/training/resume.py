"""Resuming one run: the newest run with the same config (resume=true), a run folder's record compared with the
command that continues it, and the checkpoint to continue from, checked against the run it continues."""
from __future__ import annotations

import contextlib
import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra.errors import HydraException
from lightning.pytorch.callbacks import Timer
from omegaconf import DictConfig, OmegaConf

from gpt.inference.checkpoint import CheckpointError
from gpt.overrides import override_key, pasted, quoted
from gpt.training.checkpoint_io import load_resume_checkpoint
from gpt.training.lit import OPTIM_NAME, LitGPT
from gpt.training.model_settings import group_setting
from gpt.training.optim import OPTIMIZERS, SCHEDULES, OptimConfig
from gpt.training.run_folder import (CHECKPOINT, NOT_IDENTITY, OVERRIDES, finished, model_rebuildable, read_overrides,
                                     read_summary, whole_model)
from gpt.training.saved_config import DamagedRecord, run_identity, saved_config
from gpt.validate import first_line

# What a run continued with resume=true may be given otherwise: a run trains to the trainer.max_steps it is resumed
# with (a finished one is kept, naming the command that trains it further: train_further).
TRAINED_FURTHER = "trainer.max_steps"


def find_resume_checkpoint(cfg: DictConfig, roots: list[Path], beside: Path | None = None) -> Path:
    """The newest last.ckpt of a run under `roots`, or in a folder of `beside` (the new run's folder's parent:
    hydra.run.dir=runs/b resumes runs/a), whose saved .hydra/config.yaml equals `cfg`. Only `beside`'s own folders:
    hydra.run.dir=/tmp/b searched all of /tmp and stopped at another program's damaged record deep below it."""
    mine = run_identity(cfg)
    found = []
    records = [saved for root in {r.resolve() for r in roots if r.is_dir()}
               for saved in root.rglob(".hydra/config.yaml")]
    # The run's own outputs/<date>/, inside outputs/, is searched, and named, once.
    if beside is not None and not any(r.resolve() in (beside.resolve(), *beside.resolve().parents) for r in roots):
        roots = [*roots, beside]
        records += beside.resolve().glob("*/.hydra/config.yaml")
    for saved in records:
        ckpt = saved.parent.parent / CHECKPOINT
        if ckpt.is_file() and run_identity(saved_config(saved)) == mine:
            found.append(ckpt)
    if not found:
        raise CheckpointError(f"resume=true found no run with this config and a {CHECKPOINT} under "
                              f"{', '.join(str(r) for r in roots)}: pass ckpt_path=<path> or drop resume=true")
    return max(found, key=lambda p: p.stat().st_mtime)


def train_further(run_dir: Path, max_steps: int, overrides: list[str]) -> str:
    """For a finished run that resume=true keeps as it is (as a resumed sweep keeps its finished jobs), though it
    stopped short of this command's trainer.max_steps: where it stopped and the command that trains it further, into
    a folder of its own; "" when it reached them."""
    steps = read_summary(run_dir)["steps"]
    if steps >= max_steps:
        return ""
    ckpt = run_dir / CHECKPOINT
    if not ckpt.is_file():
        return f"; it stopped at step {steps}, short of trainer.max_steps={max_steps}, and its {CHECKPOINT} is gone: " \
            "drop resume=true and pass another hydra.run.dir= to train it again from the start"
    command = ["python train.py", *(shlex.quote(o) for o in overrides if override_key(o) not in NOT_IDENTITY),
               pasted("ckpt_path", str(ckpt))]
    return f"; it stopped at step {steps}, short of trainer.max_steps={max_steps} (resume=true does not train a " \
        f"finished run further): to train it further run {' '.join(command)}"


def settings(values: Any, prefix: str = "") -> dict[str, Any]:
    """A config's values by the dotted keys an override sets (model.heads), in the config's order."""
    if isinstance(values, dict) and values:
        return {key: value for name, inner in values.items()
                for key, value in settings(inner, f"{prefix}{name}.").items()}
    return {prefix.removesuffix("."): values}


def setting(values: dict[str, Any], key: str) -> str:
    """A setting as an override writes it (model.heads=4), an interpolation as the config holds it
    (optim.max_steps=${trainer.max_steps}), or `no <key>` where the config has none."""
    if key not in values:
        return f"no {key}"
    value = values[key]
    return f"{key}={value if isinstance(value, str) and '${' in value else quoted(value)}"


def refuse_another_run(cfg: DictConfig, run_dir: Path, overrides: list[str],
                       compose: Callable[[list[str]], DictConfig]) -> None:
    """resume=true, or ckpt_path= of its own last.ckpt, in a run's own folder (hydra.run.dir= of it) with a config
    other than the one its .hydra records: Hydra would write this command's config over that record, and the run be
    kept or continued as this command's (a finished one said kept, with another model.heads than its model.pt's; a
    stopped one went on at another optim.lr or seed without a word; ckpt_path= trained on at another model.heads and
    wrote a model.pt the record said was all of that model.heads). One line naming the first setting that differs,
    and the command that continues the run. A folder without a record has nothing to compare: left to resume=true's
    search, or to ckpt_path='s checks. A record whose config.yaml is damaged or gone is compared by the config that
    the overrides it records compose now (`compose`: as this command's were); skipped, it let any settings through."""
    if not (run_dir / ".hydra").is_dir():
        return
    saved = run_dir / ".hydra" / "config.yaml"
    continues = "resume=true" if cfg.resume else pasted("ckpt_path", str(cfg.ckpt_path))
    other = "drop resume=true and pass another hydra.run.dir= to start a new run" if cfg.resume else \
        "pass another hydra.run.dir= to continue it with these settings in a run folder of its own"
    try:
        recorded = read_overrides(run_dir)
    except (OSError, ValueError):  # gone or damaged: its config.yaml still says what the run is
        recorded = None
    try:
        theirs, damaged = settings(run_identity(saved_config(saved))), ""
    except (FileNotFoundError, DamagedRecord) as err:
        damaged = f"{saved} is {f'damaged ({err.damage})' if isinstance(err, DamagedRecord) else 'gone'}"
        theirs = settings(run_identity(composed_record(run_dir, recorded, compose, f"{continues}: {damaged}", other)))
    mine = settings(run_identity(cfg))
    key = next((key for key in dict.fromkeys([*mine, *theirs]) if key != TRAINED_FURTHER
                and (key in mine, mine.get(key)) != (key in theirs, theirs.get(key))), None)
    if key is None:
        return
    made, given = ([o for o in found if override_key(o) not in (*NOT_IDENTITY, TRAINED_FURTHER)
                    and not override_key(o).startswith("hydra.")] for found in (recorded or [], overrides))
    if recorded is None or sorted(made) == sorted(given):  # the same overrides: configs/ changed since
        how = f"the settings its {saved} records"
    else:
        # this command's trainer.max_steps (else the run's own), and its own Hydra settings but the folder
        further = [o for o in overrides if override_key(o) == TRAINED_FURTHER] or \
            [o for o in recorded if override_key(o) == TRAINED_FURTHER]
        hydra = [o for o in overrides if override_key(o).startswith("hydra.") and override_key(o) != "hydra.run.dir"]
        command = ["python train.py", *(shlex.quote(o) for o in [*made, *further, *hydra]),
                   pasted("hydra.run.dir", str(run_dir)), continues]
        how = f"the overrides it was made with ({' '.join(command)})"
    there, here = chosen_options(cfg, run_dir, key, recorded or [], overrides, theirs, compose) or \
        (setting(theirs, key), setting(mine, key))
    read_from = f" (by the overrides in {run_dir / OVERRIDES}: {damaged})" if damaged else ""
    raise ValueError(f"{continues}: the run in {run_dir} was made with {there}{read_from}, and this command has "
                     f"{here}; {'resume' if cfg.resume else 'continue'} it with {how}, or {other}")


def composed_record(run_dir: Path, recorded: list[str] | None, compose: Callable[[list[str]], DictConfig],
                    damaged: str, other: str) -> DictConfig:
    """The config the overrides a run's folder records (`recorded`) compose, for a run whose config.yaml is
    `damaged` (a refusal's start, naming it); one line naming the way on where they cannot say what the run was made
    with."""
    if recorded is None:
        raise ValueError(f"{damaged}, and {run_dir / OVERRIDES} cannot be read either: nothing says which settings "
                         f"the run was made with; write {run_dir / OVERRIDES} again from hydra.overrides.task in the "
                         f"hydra.yaml beside it, or {other}")
    try:
        return compose(recorded)
    except HydraException as err:
        raise ValueError(f"{damaged}, and the overrides in {run_dir / OVERRIDES} no longer compose "
                         f"({first_line(err)}): nothing says which settings the run was made with; {other}") from None


def chosen_options(cfg: DictConfig, run_dir: Path, key: str, recorded: list[str], overrides: list[str],
                   theirs: dict[str, Any], compose: Callable[[list[str]], DictConfig]) -> tuple[str, str] | None:
    """Where a group picked on either command line (the run's `recorded` overrides, this command's `overrides`) sets
    `key` and the run and this command picked other options of it, the two as typed (attention=mha, attention=gqa):
    the composed key (model.attention) is not what either command said. A group sets the key or section of its name
    (group_setting), and one outside it where this command with the run's option (`compose`d) has the run's value
    of `key` (`theirs`: the run's settings): data=copy sets model.block_size. None where `key` is given itself, or
    no such group sets it."""
    given = {override_key(o) for o in [*recorded, *overrides]}
    if key in given:
        return None
    try:
        their_options = OmegaConf.load(run_dir / ".hydra" / "hydra.yaml").hydra.runtime.choices
    except (OSError, yaml.YAMLError, ValueError, AttributeError):  # no record of its options: the key says it
        return None
    mine = cfg.hydra.runtime.choices
    differ = [group for group in mine if group in given and their_options.get(group) != mine[group]]
    own = [group for group in differ if key == group_setting(group) or key.startswith(f"{group_setting(group)}.")]
    if own:
        group = max(own, key=lambda g: len(group_setting(g)))  # model.attention: attention=, not model=
    else:
        group = next((group for group in differ if option_sets(
            compose, overrides, f"{group}={quoted(their_options.get(group))}", key, (key in theirs, theirs.get(key)))),
            None)
    if group is None:
        return None
    return f"{group}={their_options.get(group)}", f"{group}={mine[group]}"


def option_sets(compose: Callable[[list[str]], DictConfig], overrides: list[str], option: str, key: str,
                value: tuple[bool, Any]) -> bool:
    """Whether the command line `overrides` with `option` (data=calculator) in place of their own option of its group
    compose `value` (whether there is a `key`, and its value as written)."""
    group = override_key(option)
    try:
        values = settings(run_identity(compose([*(o for o in overrides if override_key(o) != group), option])))
    except HydraException:  # a setting of this command's option that the other lacks: not the one that differs
        return False
    return (key in values, values.get(key)) == value


@dataclass(frozen=True)
class ResumePoint:
    """A checkpoint to continue from, read once here: its path for Lightning, its step, and the shapes of its weights,
    its optimizer's name (None: saved before it was recorded) and the sizes of its groups, to check against the run
    once the model is built (check_resumable)."""

    path: Path
    step: int
    shapes: dict[str, tuple[int, ...]]
    optimizer: str | None
    group_sizes: list[int]


def resume_from(cfg: DictConfig, run_dir: Path, in_sweep: bool = False) -> ResumePoint | None:
    """The checkpoint to continue from (checked to load safely now, not after the data is built). A job of a
    resumed sweep continues from its own folder's checkpoint, or starts if the killed sweep never reached it."""
    if cfg.resume and in_sweep:
        path = run_dir / CHECKPOINT
        if not path.is_file():
            return None
        if finished(run_dir) and not model_rebuildable(run_dir):
            # Loading the checkpoint would fail the job, and a failure never replaces a finished record: kept as
            # finished, its row would stay damaged on every resume.
            print(f"training again from the start: {run_dir / 'model.pt'} and {path} are damaged, so its model "
                  "cannot be written again from them")
            return None
    elif cfg.resume:
        path = find_resume_checkpoint(cfg, [Path("outputs"), Path("multirun")], run_dir.parent)
    elif cfg.ckpt_path:
        path = Path(cfg.ckpt_path)
    else:
        return None
    checkpoint = load_resume_checkpoint(path)
    step, model = checkpoint["global_step"], path.parent.parent / "model.pt"
    # A run killed after its final checkpoint, before its model.pt: its training is done, only its end is missing (as
    # is a damaged model.pt's run: emptied or cut short, it is written again). So is a resumed sweep's job not kept as
    # finished with its model.pt there: its summary.json was deleted as damaged, or a failure after its training
    # replaced it; refused as finished, it could never be a finished row again.
    whole = whole_model(model)
    lost_record = cfg.resume and in_sweep and whole
    ended = step == cfg.trainer.max_steps and (not whole or lost_record)
    if 0 <= cfg.trainer.max_steps <= step and not ended:
        its_model = f" (its model: {model})" if model.is_file() else ""
        raise ValueError(f"{path} has finished: it is at step {step} of trainer.max_steps={cfg.trainer.max_steps}"
                         f"{its_model}; to train it further pass {pasted('ckpt_path', str(path))} and a larger "
                         "trainer.max_steps")
    if not ended and (spent := spent_max_time(cfg.trainer.get("max_time"), checkpoint)) is not None:
        raise ValueError(f"{path} has trained for {spent:.0f} s, all of trainer.max_time (which counts the time of "
                         f"the run it continues); to train it further pass {pasted('ckpt_path', str(path))} and a "
                         "larger trainer.max_time, or trainer.max_time=null")
    missing = "a summary.json that says so" if lost_record else "a whole model.pt"
    print(f"finishing {path}: its training reached step {step}, but its run stopped before writing {missing}; "
          "writing it without training" if ended
          else f"resuming from {path} at step {step}")
    if not ended and (note := schedule_change(cfg, path, checkpoint)):
        print(f"note: {note}")
    return ResumePoint(path, step, {k: tuple(v.shape) for k, v in checkpoint.get("state_dict", {}).items()},
                       checkpoint.get(OPTIM_NAME), [len(g["params"]) for state in checkpoint["optimizer_states"]
                        for g in state.get("param_groups", [])])


def schedule_change(cfg: DictConfig, path: Path, checkpoint: dict[str, Any]) -> str | None:
    """Where this run's LR schedule differs from the checkpoint's at the step it resumes at, what the LR does there and
    how to keep the checkpoint's: the schedule follows optim.max_steps, so a finished cosine or wsd run trained further
    with a larger trainer.max_steps leapt from its minimum LR back towards its peak without a word."""
    if not checkpoint.get("lr_schedulers"):
        return None
    optim = OptimConfig.from_dict(OmegaConf.to_container(cfg.optim, resolve=True))
    step = checkpoint["lr_schedulers"][0]["last_epoch"]
    its_lr = checkpoint["optimizer_states"][0]["param_groups"][0]["lr"]  # AdamW's first group: optim.lr's
    before, after = its_lr / checkpoint["lr_schedulers"][0]["base_lrs"][0], SCHEDULES[optim.schedule](step, optim)
    if math.isclose(before, after, rel_tol=1e-6):  # the same point of the peak LR, whatever peak this run gives
        return None
    saved, its_steps = path.parent.parent / ".hydra/config.yaml", None
    with contextlib.suppress(CheckpointError):  # a checkpoint away from its run folder's config: its length unknown
        if saved.is_file():
            its_steps = OmegaConf.select(saved_config(saved), "optim.max_steps", throw_on_resolution_failure=False)
    if its_steps == optim.max_steps:  # another min_lr, warmup or schedule given: applied from here, as asked
        return None
    keep = f"optim.max_steps={its_steps}" if its_steps else "optim.max_steps=<the trainer.max_steps it trained to>"
    return (f"the LR schedule now ends at optim.max_steps={optim.max_steps}: at step {step} the LR goes from "
            f"{its_lr:.3g} (the checkpoint's schedule) to {after * optim.lr:.3g}; to keep the checkpoint's "
            f"schedule (at optim.min_lr after its end) pass {keep}")


def spent_max_time(max_time: Any, checkpoint: dict[str, Any]) -> float | None:
    """The seconds a checkpoint's run has trained, where they are all of `max_time`, else None. Lightning's Timer
    restores them, so a run stopped by trainer.max_time and resumed with it stopped again before its first step,
    leaving a run folder without a history, a summary or a word of why."""
    timer_state = checkpoint.get("callbacks", {}).get("Timer")
    if max_time is None or timer_state is None:
        return None
    timer = Timer(duration=OmegaConf.to_container(max_time) if isinstance(max_time, DictConfig) else max_time)
    timer.load_state_dict(timer_state)
    return timer.time_elapsed() if timer.time_remaining() <= 0 else None


def check_resumable(start: ResumePoint, lit: LitGPT) -> None:
    """The checkpoint holds this run's model and optimizer (weights of the same names and shapes, the optimizer of
    the same name, or of groups of the same sizes where it names none), else one line: Lightning's own answer is a
    wall of missing keys, or a line naming no file."""
    fix = "resume with the settings it was trained with, or start afresh without ckpt_path or resume=true"
    saved, wanted = start.shapes, {k: tuple(v.shape) for k, v in lit.state_dict().items()}
    differ = sorted(set(saved) ^ set(wanted)) or [k for k in wanted if saved[k] != wanted[k]]
    if differ:
        key = differ[0]
        shapes = [str(list(d[key])) if key in d else "absent" for d in (saved, wanted)]
        raise CheckpointError(f"{start.path} holds another model ({key} is {shapes[0]} there, {shapes[1]} here): "
                              f"{fix}")
    if start.optimizer not in (None, lit.optim.name):
        raise CheckpointError(f"{start.path} holds the state of another optimizer than optim={lit.optim.name} "
                              f"(optim={start.optimizer}'s): resume with optim={start.optimizer}, or start afresh "
                              "without ckpt_path or resume=true")
    groups = OPTIMIZERS[lit.optim.name](lit.model, lit.optim, False).state_dict()["param_groups"]
    if [len(g["params"]) for g in groups] != start.group_sizes:
        raise CheckpointError(f"{start.path} holds the state of another optimizer than optim={lit.optim.name}: {fix}")
