"""Lightning callbacks: held-out grading and sample text at each validation, and a resume checkpoint that is always
good (atomic, finite, with RNG state). The clean stop on Ctrl-C or SIGTERM is gpt/training/interrupts.py."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint, RichProgressBar

from gpt.data.tasks import Line
from gpt.data.tokenizers.base import Tokenizer
from gpt.evaluation.extrapolation import extrapolation
from gpt.evaluation.grading import grade, scores_by_group, scores_by_level
from gpt.inference.text import TextModel, line_prompt_ids, running_prompt_ids
from gpt.overrides import pasted
from gpt.training.loggers import log_text
from gpt.validate import NonNegativeFloat, NonNegativeInt, PositiveInt

SUMMARY_KEYS = {"val_acc": "exact", "val_token_acc": "token", "val_prefix": "prefix", "val_tokens": "tokens",
                "val_chance": "chance", "val_exact_chance": "exact_chance"}


class TrainingStopped(RuntimeError):
    """Training cannot go on (a non-finite loss); the message is one line naming the last good checkpoint."""


class ValidateAtEnd(L.Callback):
    """Validate (and so grade and record) at the last step whatever val_check_interval is: a run shorter than
    one interval, or one whose last step falls between two, still ends with a val loss. Asking Lightning to
    stop at max_steps is what makes its loop validate there; at an interval step it validates once."""

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True


class StepProgressBar(RichProgressBar):
    """Lightning's progress bar counting optimizer steps up to trainer.max_steps, so a resumed run's bar
    continues where it stopped (not "Epoch 1: 80% 178/223"), and without the logger's version number."""

    @property
    def total_train_batches(self) -> int | float:
        return self.trainer.max_steps if self.trainer.max_steps > 0 else float("inf")

    def _get_train_description(self, current_epoch: int) -> str:
        return "step".ljust(len(self.validation_description))

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if not self.is_disabled and self.train_progress_bar_id is None:
            self._initialize_train_progress_bar_id()  # a run resumed mid-epoch
        self._update(self.train_progress_bar_id, trainer.global_step)
        self._update_metrics(trainer, pl_module)
        self.refresh()

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, int | str | float]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        return metrics


class SummaryPart(L.Callback):
    """A callback with findings of its own for summary.json (held-out grading, loss at longer lengths): RunRecord
    adds each one's part when training ends."""

    def summary_part(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        return {}


class HeldOutAccuracy(SummaryPart):
    """Grade every answer of a fixed sample of held-out lines at each validation: log exact match per group as
    val/acc_<group>, show a few answers, and keep the last grading (exact match, per-token accuracy, longest right
    prefix and chance, per group and per level) for summary.json."""

    def __init__(self, lines: list[Line], tokenizer: Tokenizer, order: Sequence[str] = (),
                 level_names: dict[str, str] | None = None, show: int = 3) -> None:
        self.lines, self.tokenizer, self.order, self.show = lines, tokenizer, order, show
        self.level_names = level_names or {}
        self.groups: dict[str, dict[str, float]] = {}
        self.levels: dict[str, dict[int, dict[str, float]]] = {}

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        graded = grade(pl_module.model, self.tokenizer, self.lines)
        self.groups, self.levels = scores_by_group(graded, self.order), scores_by_level(graded)
        # every rank grades the same lines: sync_dist agrees them and spares DDP's warning per metric
        pl_module.log_dict({f"val/acc_{group.replace(' ', '_')}": s["exact"] for group, s in self.groups.items()},
                           sync_dist=True)
        summary = "  ".join(f"{group} {100 * s['exact']:.1f}% of {s['count']}" for group, s in self.groups.items())
        pl_module.print(f"\nstep {trainer.global_step}: held-out exact match: {summary}")
        for g in [g for g in graded if g.example.last][:self.show]:
            prompt = g.example.prompt if len(g.example.prompt) <= 60 else "..." + g.example.prompt[-57:]
            pl_module.print(f"  {prompt} -> {g.output}  [{'ok' if g.exact else 'WRONG'}]")

    def summary_part(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        """Per group: val_acc (exact match), val_token_acc, val_prefix (tokens), val_tokens (answer length), val_chance
        and val_exact_chance (what a guess scores per token and on a whole answer, where a guess has a chance);
        val_levels: those per task and level, and what each task's levels count."""
        part = {key: {group: s[metric] for group, s in self.groups.items() if metric in s}
                for key, metric in SUMMARY_KEYS.items()}
        return {**part, "val_levels": self.levels, "val_level_names": self.level_names}


class LossAtLengths(SummaryPart):
    """When training ends, score a running-text model's validation text at the lengths `at` (Press et al. 2022):
    loss per evaluation length and per position, past the trained block where the positional encoding allows,
    into summary.json's val_extrapolation (lengths learned positions cannot place are refused there, one line)."""

    def __init__(self, at: list[PositiveInt] | None = None, windows: PositiveInt = 128) -> None:
        self.at, self.windows = at, windows

    def summary_part(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        ids = trainer.datamodule.corpus.val.to_array()
        record = extrapolation(pl_module.model, ids, self.at or [], self.windows)
        if "refused" in record:
            pl_module.print(f"callbacks.lengths: {record['refused']}: longer lengths not scored")
        return {"val_extrapolation": record}


class SampleText(L.Callback):
    """Sample one continuation of `prompt` at each validation with a fixed seed (its own generator, so training's
    random stream is untouched), print it and log it as text. Through the text API, so it follows the corpus's
    conventions: on one-example-per-line corpora the sample is one line (max_new_tokens is for running text)."""

    def __init__(self, tokenizer: Tokenizer, meta: dict[str, Any], prompt: str = "",
                 max_new_tokens: NonNegativeInt = 100, temperature: NonNegativeFloat = 0.8, seed: int = 0) -> None:
        self.tokenizer, self.meta, self.prompt, self.max_new_tokens = tokenizer, meta, prompt, max_new_tokens
        self.temperature, self.seed = temperature, seed
        try:  # now, so a prompt the text API refuses stops the run before training, not at its first validation
            (line_prompt_ids if meta.get("one_example_per_line") else running_prompt_ids)(tokenizer, prompt)
        except ValueError as err:
            raise ValueError(f"callbacks.sample.prompt={prompt!r}: {err}") from None

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        text_model = TextModel(pl_module.model, self.tokenizer, self.meta)
        length = None if text_model.line_based else self.max_new_tokens
        continuation = text_model.complete(self.prompt, length, self.temperature, seed=self.seed)
        text = " ".join(filter(None, (self.prompt, continuation))) if text_model.line_based else \
            self.prompt + continuation
        # Early in training: a line-based model ends the line at once, a running-text one its document.
        shown = text or ("(an empty line: the model ends the line at once)" if text_model.line_based else
                         "(nothing: the model ends the document at once)")
        # Named as drawn: a calculator line sampled at 0.8 read as a wrong answer of a model that grades 100% greedily.
        drawn = "greedy sample" if self.temperature == 0 else f"sample at temperature {self.temperature:g}"
        pl_module.print(f"step {trainer.global_step} {drawn}: {shown}")
        log_text(trainer.loggers, "val/sample", text, trainer.global_step)


def validates_after_step(trainer: L.Trainer) -> bool:
    """Whether Lightning validates right after the optimizer step just taken: trainer.val_check_interval counts
    batches (trainer.check_val_every_n_epoch=null, the default), accumulate_grad_batches of them a step."""
    interval = trainer.val_check_interval
    return trainer.enable_validation and trainer.check_val_every_n_epoch is None and isinstance(interval, int) and \
        trainer.global_step * trainer.accumulate_grad_batches % interval == 0


class ResumeCheckpoint(Checkpoint):
    """Keep <dirpath>/last.ckpt current and good: written through the trainer's (atomic) checkpoint IO
    every `every_n_steps` optimizer steps (after that step's validation, if it has one) and when training ends,
    with the RNG state, never with non-finite weights. A non-finite loss stops training naming the step and this
    checkpoint."""

    def __init__(self, dirpath: str | Path, every_n_steps: PositiveInt) -> None:
        self.path = Path(dirpath) / "last.ckpt"
        self.every_n_steps = every_n_steps
        self.saved_step: int | None = None
        self._after_validation: int | None = None  # the step whose checkpoint waits for its validation to end
        self._restored_rng: dict[str, Any] | None = None

    def _stop(self, what: str, step: int) -> None:
        good = (f"last good checkpoint: {self.path} (step {self.saved_step}); resume with "
                f"{pasted('ckpt_path', str(self.path))} and" if self.saved_step is not None
                else "no checkpoint was written before it; start again with")
        raise TrainingStopped(f"{what} at step {step}; {good} a lower optim.lr (and optim.muon_lr with optim=muon) "
                              "or trainer.gradient_clip_val")

    def save(self, trainer: L.Trainer) -> None:
        if not all(torch.isfinite(p).all() for p in trainer.lightning_module.parameters()):
            self._stop("weights became non-finite", trainer.global_step)
        self.saved_step = trainer.global_step
        trainer.save_checkpoint(self.path, weights_only=False)  # the full training state

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        # Restored here, right before the first forward, so nothing Lightning does while restarting
        # (building data loaders, seeding workers) draws from the stream dropout will use.
        if self._restored_rng is not None:
            torch.set_rng_state(self._restored_rng["cpu"])
            if torch.cuda.is_available() and self._restored_rng.get("cuda") is not None:
                torch.cuda.set_rng_state(self._restored_rng["cuda"])
            self._restored_rng = None

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        # Before backward, so the step named is the one whose loss it is and no NaN gradient is applied.
        if not torch.isfinite(loss):
            self._stop(f"loss is {loss.item()}", trainer.global_step)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = trainer.global_step  # counts optimizer steps: equal to saved_step until an accumulation completes
        if step and step != self.saved_step and step % self.every_n_steps == 0:
            # Lightning resumes a checkpoint of a validating step past its validation: written before it, a kill during
            # it left the resumed run's history.csv without that step's row (both every 200 steps by default).
            if validates_after_step(trainer):
                self._after_validation = step
            else:
                self.save(trainer)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._after_validation is not None and self._after_validation == trainer.global_step:
            self._after_validation = None
            self.save(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step != self.saved_step:
            self.save(trainer)

    def state_dict(self) -> dict[str, Any]:
        cuda = torch.cuda.get_rng_state() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        return {"saved_step": self.saved_step, "rng": {"cpu": torch.get_rng_state(), "cuda": cuda}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.saved_step, self._restored_rng = state_dict["saved_step"], state_dict["rng"]

