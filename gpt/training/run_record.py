"""What each training run leaves for the sweep report, whatever the logger: `history.csv` (one row per
validation: step, wall time, val loss, perplexity, bits per byte on text, held-out accuracy) and `summary.json`
(final numbers and costs, or status "failed" or "stopped" with a one-line reason)."""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import nn

from gpt.inference.checkpoint import unwrap
from gpt.inference.depth import peak_memory_bytes, reset_peak_memory, tensor_bytes
from gpt.overrides import as_override
from gpt.training.callbacks import SummaryPart
from gpt.training.interrupts import StopOnInterrupt
from gpt.training.run_folder import (SUMMARY, damaged, finished, read_history, read_summary, record_failure,
                                     record_stop, write_history, write_summary)


@torch.no_grad()
def kv_cache_bytes_per_token(model: nn.Module) -> float:
    """Cache memory a generated token costs: what every layer's cache holds after one sequence of
    block_size tokens (all positions, a window of them, or a fixed-size state), divided by block_size.
    Filled rather than just allocated, because some caches grow as they go."""
    model = unwrap(model)
    caches = model.new_caches(1)
    model(torch.zeros(1, model.cfg.block_size, dtype=torch.long, device=next(model.parameters()).device), caches)
    return tensor_bytes(caches) / model.cfg.block_size


class RunRecord(L.Callback):
    """Writes history.csv at each validation and summary.json when training ends. A non-finite val loss
    stops training and marks the run failed (a NaN run's later numbers mean nothing); Ctrl-C marks it stopped (the
    run has not finished, and resume=true goes on)."""

    def __init__(self, run_dir: str | Path, continues: Path | None = None, ignores: Sequence[str] = ()) -> None:
        """`continues`: the folder of the run this one resumes from a checkpoint of, where that is another folder
        (resume=true or ckpt_path= of a single run): its history and clock go on here, else this folder's.
        `ignores`: the run's ++ overrides that its model reads nowhere, recorded so the report leaves them out of
        what the run is."""
        self.run_dir = Path(run_dir)
        self.ignores = list(ignores)
        self.continues = self.run_dir if continues is None else Path(continues)
        self.history: list[dict[str, float]] = []
        self.tokens = 0
        self.start = self.val_start = self.val_seconds = self.earlier_seconds = 0.0
        self.start_step = 0
        self.saved_seconds: float | None = None  # the clock a resume checkpoint holds
        self.failure: str | None = None
        self.stop: str | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        reset_peak_memory(pl_module.device)
        # A resumed run continues its history and its clock from the step it resumes at, less the
        # validation its stop made off the schedule (Ctrl-C at step 111): an uninterrupted run has no such row.
        # The clock still goes on from that row, which holds the time of every step before the stop. The last step's
        # validation is on the schedule wherever it falls (ValidateAtEnd).
        step = trainer.global_step
        scheduled = not isinstance(trainer.val_check_interval, int) or step == trainer.max_steps or \
            step * trainer.accumulate_grad_batches % trainer.val_check_interval == 0
        before = [row for row in read_history(self.continues) if row["step"] <= step]
        self.history = [row for row in before if row["step"] < step or scheduled]
        # The checkpoint's own clock: its step may come after the last row, whose clock misses the steps between.
        self.earlier_seconds = self.saved_seconds if self.saved_seconds is not None else \
            before[-1]["wall_s"] if before else 0.0
        self.start, self.start_step = time.perf_counter(), trainer.global_step

    def state_dict(self) -> dict[str, Any]:
        """The run's clock when a checkpoint is written, which a run resumed from it goes on from."""
        return {"wall_s": self.earlier_seconds + time.perf_counter() - self.start}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.saved_seconds = state_dict["wall_s"]

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any,
                           batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self.tokens += batch[0].numel()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.val_start = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Here, after every on_validation_epoch_end hook, callback_metrics hold the loss, ppl and accuracy.
        if trainer.sanity_checking:
            return
        now = time.perf_counter()
        self.val_seconds += now - self.val_start
        metrics = {k.replace("/", "_"): float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        wall_s = self.earlier_seconds + now - self.start
        if self.history and self.history[-1]["step"] == trainer.global_step:
            # A run killed after its final checkpoint, finished here: its validation repeated, which its row's clock
            # already counts, as the uninterrupted run's did.
            wall_s = self.history.pop()["wall_s"]
        self.history.append({"step": trainer.global_step, "wall_s": wall_s, **metrics})
        loss = metrics.get("val_loss")
        if loss is not None and not math.isfinite(loss):
            self.failure = f"val loss became {loss} at step {trainer.global_step}"
            trainer.should_stop = True
        if trainer.is_global_zero:  # one writer when several processes train (DDP)
            write_history(self.run_dir, self.history)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        seconds = time.perf_counter() - self.start
        if stopped := next((c for c in trainer.callbacks if isinstance(c, StopOnInterrupt) and c.requested), None):
            self.stop = f"stopped {stopped.how} at step {trainer.global_step}"
        # Every process runs this forward pass: a sharded (FSDP) model's forward needs all of them.
        kv_bytes = kv_cache_bytes_per_token(pl_module.model) if not (self.failure or self.stop) else None
        if not trainer.is_global_zero:
            return
        if self.failure:
            record_failure(self.run_dir, self.failure)
            return
        if self.stop:
            record_stop(self.run_dir, self.stop)
            return
        off = validation_off(trainer.limit_val_batches)
        # Resumed with validation off, the last row is of an earlier step: not this run's final val loss.
        last = self.history[-1] if self.history and not off else {}
        trained = trainer.global_step - self.start_step
        # Counted in this process alone; every process trains batches of the same shape (its share of the global batch).
        tokens = self.tokens * trainer.world_size
        write_summary(self.run_dir, {
            "status": "ok",
            "params": pl_module.model.num_params(),
            "steps": trainer.global_step,
            # continued from a checkpoint: the steps this session took it from, for a resumed sweep's pace
            **({"resumed_at": self.start_step} if self.start_step else {}),
            "val_loss": last.get("val_loss"),
            "val_ppl": last.get("val_ppl"),
            "val_bpb": last.get("val_bpb"),  # text corpora only: bits per UTF-8 byte, comparable across tokenizers
            # training only, this session, as is the peak memory: none for a run only finished here (killed after
            # its final checkpoint)
            "tokens_per_s": tokens / max(seconds - self.val_seconds, 1e-9) if trained else None,
            "ms_per_step": 1000 * (seconds - self.val_seconds) / trained if trained else None,
            "wall_s": self.earlier_seconds + seconds if trained else last.get("wall_s", self.earlier_seconds),
            "peak_memory_bytes": peak_memory_bytes(pl_module.device) if trained else None,
            "kv_bytes_per_token": kv_bytes,
            "model": unwrap(pl_module.model).cfg.to_dict(),  # what the report's cost card prices
            "device": str(pl_module.device),
            "threads": torch.get_num_threads(),  # of this process: a sweep's launcher gives each job its share
            **({"ignores": self.ignores} if self.ignores else {}),
            **({"validation_off": off} if off else {}),
            **{k: v for c in trainer.callbacks if isinstance(c, SummaryPart)
               for k, v in c.summary_part(trainer, pl_module).items()},
        })


def validation_off(limit_val_batches: Any) -> str | None:
    """The setting that turns a run's validation off, as the command gives it (trainer.limit_val_batches=0, which
    times training alone), or None where the run validates."""
    return f"trainer.limit_val_batches={as_override(limit_val_batches)}" if limit_val_batches == 0 else None


def clock(seconds: float) -> str:
    """A wall time as a run's and a sweep's lines write it: 1m16s."""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def summary_line(history: list[dict[str, float]], step: int, seconds: float, path: Path, took: str = "done in",
                 off: str | None = None) -> str:
    """The run in one line: what `seconds` measured (`took`: "done in", "stopped after" a Ctrl-C or its sweep's stop,
    "trained in"), last val loss and held-out exact match, where model.pt is; `off`, the setting that turned
    validation off, says so in place of the val loss."""
    last = history[-1] if history and not off else {}
    parts = [f"{took} {clock(seconds)}", f"step {step}"]
    if off:
        parts.append(f"not validated ({off})")
    if "val_loss" in last:
        parts.append(f"val loss {last['val_loss']:.4f}")
    if "val_acc_all" in last:
        parts.append(f"held-out exact match {100 * last['val_acc_all']:.1f}%")
    return ", ".join(parts) + f"; model: {path}"


def finished_line(run_dir: Path) -> str | None:
    """The summary line of the finished run in this folder, or None when it has not finished."""
    if not finished(run_dir):
        return None
    summary = read_summary(run_dir)
    # read_summary has checked each is a number or null (SHAPES): a finished run needs both, and finite
    if any(summary.get(k) is None or not math.isfinite(summary[k]) for k in ("steps", "wall_s")):
        raise damaged(run_dir / SUMMARY, "status ok, but no steps or wall_s")
    # wall_s is the training's time, not the whole command's that the run's own last line gave
    return summary_line(read_history(run_dir), summary["steps"], summary["wall_s"], run_dir / "model.pt",
                        "trained in", summary.get("validation_off"))
