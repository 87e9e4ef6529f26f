"""LitGPT: the Lightning wrapper around GPT: loss, logging, and the optimizer and LR schedule named by optim."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from lightning.pytorch.plugins.precision import MixedPrecision
from lightning.pytorch.strategies import FSDPStrategy
from torch.nn import functional as F

from gpt.data.batches import IGNORE_INDEX
from gpt.evaluation.bpb import bits_per_byte
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT
from gpt.training.optim import OPTIMIZERS, SCHEDULES, OptimConfig, check_sharding

# The training checkpoint's key naming the optimizer (optim.name) whose state it holds: one of another name may build
# groups of the same sizes, which alone could not tell its state from this run's optimizer's.
OPTIM_NAME = "optim_name"


def logs_at(step: int, every: int, max_steps: int) -> bool:
    """Whether the step (0-based) logs its metrics: each self.log costs Lightning about 0.7 ms (it moves its metric
    state on every call), several percent of a tiny model's step, so only the steps the logger writes do; that is
    every `every` steps and the last one (where Lightning writes whatever was logged last: a stale loss otherwise)."""
    return bool(every) and ((step + 1) % every == 0 or step + 1 == max_steps)


class LitGPT(L.LightningModule):
    def __init__(self, model_cfg: ModelConfig, compile: bool = False, token_bytes: torch.Tensor | None = None,
                 **optim: Any) -> None:
        """`token_bytes`: (vocab_size,) UTF-8 bytes per token id, to log val/bpb (text corpora);
        `optim`: fields of OptimConfig (train.py passes the composed `optim` group)."""
        super().__init__()
        self.model = GPT(model_cfg)
        self.optim, self.compile_model = OptimConfig.from_dict(optim), compile
        # Not persistent: it describes the data, not the model, so checkpoints stay the model's weights.
        self.register_buffer("token_bytes", token_bytes, persistent=False)
        self._val_totals = torch.zeros(2, dtype=torch.float64)  # summed nats and bytes over one validation
        self._tokens_since_log = 0
        self._counted: torch.Tensor | None = None  # targets counted so far in this optimizer step's batches
        self._last_log_time: float | None = None

    def configure_model(self) -> None:
        # Module.compile() compiles forward in place: parameter names keep no `_orig_mod.` prefix, so
        # last.ckpt and model.pt from a compiled run load into an uncompiled model. Done here, in each
        # worker process, because a compiled module does not pickle for ddp_spawn.
        if self.compile_model:
            self.model.compile()

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor], reduction: str = "mean") -> torch.Tensor:
        inputs, targets = batch
        logits = self.model(inputs)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX, reduction=reduction)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self._tokens_since_log += batch[0].numel()
        if self.pools_targets():
            # Each batch's own mean would weigh its targets by 1 / its count, which differs between batches whose
            # rows score different numbers of tokens: summed here and divided by the count of them all in
            # optimizer_step.
            summed, counted = self.loss(batch, reduction="sum"), (batch[1] != IGNORE_INDEX).sum()
            self._counted = counted if self._counted is None else self._counted + counted
            # Divided by a constant, the same in every batch and process, which average_over_targets undoes.
            loss, returned = summed.detach() / counted, summed / self.model.cfg.block_size
        else:
            loss = returned = self.loss(batch)
        if logs_at(self.global_step, self.trainer.log_every_n_steps, self.trainer.max_steps):
            self.log_step(loss)
        return returned

    def pools_targets(self) -> bool:
        """Whether one optimizer step averages over several batches: accumulated, or one per process."""
        return self.trainer.accumulate_grad_batches > 1 or self.trainer.world_size > 1

    def optimizer_step(self, epoch: int, batch_idx: int, optimizer: Any,
                       optimizer_closure: Callable[[], Any] | None = None) -> None:
        def closure() -> Any:
            result = optimizer_closure()  # the step's last forward and backward (and the gradients' all-reduce)
            if self._counted is not None:
                self.average_over_targets()
            return result
        # Lightning runs the hooks that read gradients, then clips them, after this closure: on the averaged ones.
        optimizer.step(closure=closure)

    def average_over_targets(self) -> None:
        """Gradients of the summed losses, divided by block_size in each batch, by accumulate_grad_batches (Lightning)
        and by the processes (their all-reduce averages): made the mean over every target the step counted."""
        counted = self.trainer.strategy.reduce(self._counted.float(), reduce_op="sum")
        self._counted = None
        scale = self.model.cfg.block_size * self.trainer.accumulate_grad_batches * self.trainer.world_size / counted
        for p in self.parameters():
            if p.grad is not None:
                p.grad.mul_(scale.to(p.grad.dtype))

    def log_step(self, loss: torch.Tensor) -> None:
        """Log the loss, LR and the tokens/s since the previous logged step, of every process together (each counts
        only its own batches, all of one shape)."""
        now = time.perf_counter()
        if self._last_log_time is not None:
            tokens = self._tokens_since_log * self.trainer.world_size
            self.log("train/tok_per_s", tokens / (now - self._last_log_time), prog_bar=True)
        self._last_log_time, self._tokens_since_log = now, 0
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/lr", self.optimizers().param_groups[0]["lr"])

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        loss = self.loss(batch)
        targets = batch[1][batch[1] != IGNORE_INDEX]
        # Weighted by the targets it counts, not its rows: task rows leave different numbers unscored.
        self.log("val/loss", loss, prog_bar=True, batch_size=targets.numel(), sync_dist=True)
        if self.token_bytes is not None:
            self._val_totals += torch.stack([loss.detach().double() * targets.numel(),
                                             self.token_bytes[targets].sum().double()]).cpu()

    def on_validation_epoch_start(self) -> None:
        self._val_totals.zero_()

    def on_validation_epoch_end(self) -> None:
        val_loss = self.trainer.callback_metrics.get("val/loss")
        if val_loss is not None:
            self.log("val/ppl", torch.exp(val_loss), sync_dist=True)  # val/loss is synced: the same on each rank
        if self.token_bytes is not None and self._val_totals[1] > 0:
            nats, n_bytes = self.trainer.strategy.reduce(self._val_totals.to(self.device), reduce_op="sum")
            self.log("val/bpb", bits_per_byte(nats, n_bytes).float(), prog_bar=True, sync_dist=True)  # reduced above
        self._last_log_time = None  # validation time is not training time

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        if gradient_clip_val and gradient_clip_algorithm != "value" and isinstance(self.trainer.strategy, FSDPStrategy):
            # Each rank holds a shard of every gradient, so the norm is over all shards: the root module's own
            # clip_grad_norm_, which Lightning's FSDP plugin does not call (it refuses norm clipping instead).
            self.trainer.strategy.model.clip_grad_norm_(gradient_clip_val)
            return
        if gradient_clip_val and isinstance(self.trainer.precision_plugin, MixedPrecision) \
                and self.trainer.precision == "bf16-mixed":
            # Lightning's mixed-precision plugin will not clip for a fused optimizer, for fear of loss-scaled
            # gradients; bf16 scales no loss, so these are the true gradients and clip as in fp32.
            if gradient_clip_algorithm == "value":
                torch.nn.utils.clip_grad_value_(self.parameters(), gradient_clip_val)
            else:
                torch.nn.utils.clip_grad_norm_(self.parameters(), gradient_clip_val)
            return
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint[OPTIM_NAME] = self.optim.name

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Lightning restores the optimizer's settings and the schedule's peak LRs as they were saved, so a run resumed
        with another optim.lr, optim.muon_lr or optim.weight_decay (as a non-finite loss advises) trained on as
        before without a word: this run's settings replace them, the optimizer's moments and step kept."""
        fresh = OPTIMIZERS[self.optim.name](self.model, self.optim, False).state_dict()["param_groups"]
        scale = SCHEDULES[self.optim.schedule]
        for state, schedule in zip(checkpoint["optimizer_states"], checkpoint["lr_schedulers"]):
            for group, new in zip(state["param_groups"], fresh):
                # fused is the trainer's precision's choice (configure_optimizers), not a setting of optim.
                group.update({k: v for k, v in new.items() if k not in ("params", "fused")})
                # LambdaLR's own product, as it would have set it at this step from this peak.
                group["initial_lr"], group["lr"] = new["lr"], new["lr"] * scale(schedule["last_epoch"], self.optim)
            schedule["base_lrs"] = [group["lr"] for group in fresh]

    def configure_optimizers(self) -> dict[str, Any]:
        # The fused AdamW kernel updates every tensor in one call (~0.5 ms a step here against ~2.3 ms for the
        # per-tensor loop). Not under 16-mixed: a gradient scaler would then leave scaled gradients to clip.
        fused = self.trainer.precision != "16-mixed"
        check_sharding(self.optim.name, "fsdp" in type(self.trainer.strategy).__name__.lower())
        optimizer = OPTIMIZERS[self.optim.name](self.model, self.optim, fused)
        shape = SCHEDULES[self.optim.schedule]
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: shape(step, self.optim))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
