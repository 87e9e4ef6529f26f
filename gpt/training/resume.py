"""Resuming one run: the newest run with the same config (resume=true), the command that trains a finished run
further, and the checkpoint to continue from, checked against the run it continues (whether a run folder's record
is the run a command continues: same_run.py)."""
from __future__ import annotations

import contextlib
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Timer
from omegaconf import DictConfig, OmegaConf

from gpt.inference.checkpoint import CheckpointError
from gpt.overrides import override_key, pasted
from gpt.training.checkpoint_io import load_resume_checkpoint
from gpt.training.lit import OPTIM_NAME, LitGPT
from gpt.training.optim import OPTIMIZERS, SCHEDULES, OptimConfig
from gpt.training.run_folder import CHECKPOINT, NOT_IDENTITY, finished, model_rebuildable, read_summary, whole_model
from gpt.training.saved_config import run_identity, saved_config


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
