"""Optimizers, keyed by the Hydra option `optim=<name>` (configs/optim/<name>.yaml): AdamW (Loshchilov & Hutter
2019) for every parameter, or Muon (Jordan et al. 2024) for the blocks' 2-D matrices with AdamW for embeddings,
positions and norm gains; learning-rate schedules, keyed by `optim.schedule`; and OptimConfig, the settings they
read, validated once, whose defaults are what `python train.py` trains (optim=muon)."""
from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

import torch
from torch import nn

from gpt.overrides import as_override
from gpt.training.muon import Muon
from gpt.validate import (NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, Probability, Range,
                          check_choice, check_fields, check_known_fields)


@dataclass(frozen=True)
class OptimConfig:
    name: str = "muon"
    lr: PositiveFloat = 3e-3  # AdamW's peak LR
    min_lr: NonNegativeFloat = 3e-4  # where cosine and wsd end: every group (Muon's too) at min_lr / lr of its peak
    weight_decay: NonNegativeFloat = 0.1
    betas: tuple[Probability, Probability] = (0.9, 0.98)
    schedule: str = "cosine"
    warmup_steps: NonNegativeInt = 100
    max_steps: PositiveInt = 600  # where the schedule reaches min_lr (trainer.max_steps)
    decay_fraction: Annotated[float, Range(0, 1, low_open=True)] = 0.2  # wsd: the final share of max_steps decaying
    muon_lr: PositiveFloat = 0.04  # muon: peak LR of the hidden matrices (scaled by sqrt(max(1, out/in)) as torch's)
    momentum: Probability = 0.95  # muon: Nesterov momentum of the hidden matrices
    # muon: Newton-Schulz iterations orthogonalising each update (each ~3 matrix multiplies per matrix)
    ns_steps: Annotated[int, Range(1, 99)] = 5

    def __post_init__(self) -> None:
        # Each field's type and range comes from its annotation (gpt.validate; train.py's check_config checks the
        # command line the same way); what is left are the registry names and the one rule between two fields.
        check_fields(self)
        for name, registry in (("name", OPTIMIZERS), ("schedule", SCHEDULES)):
            check_choice(f"optim.{name}", getattr(self, name), registry)
        if self.min_lr > self.lr:
            raise ValueError(f"optim.min_lr={self.min_lr} must be between 0 and optim.lr={self.lr}")

    @property
    def min_ratio(self) -> float:
        return self.min_lr / self.lr

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> OptimConfig:
        check_known_fields(cls, values, "optim")
        if "betas" in values:
            values = {**values, "betas": tuple(values["betas"])}
        return cls(**values)


def adamw_groups(params: Iterable[nn.Parameter], weight_decay: float) -> list[dict[str, Any]]:
    # Decay only matrices: biases and norm gains are few, and shrinking them only hurts.
    params = list(params)
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def adamw(model: nn.Module, cfg: OptimConfig, fused: bool) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(adamw_groups(params, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, fused=fused)


def muon(model: nn.Module, cfg: OptimConfig, fused: bool) -> torch.optim.Optimizer:
    # Muon orthogonalises an update of a linear map; embeddings, positions and gains are not such maps.
    hidden = [p for name, p in model.named_parameters() if p.requires_grad and "blocks." in name and p.dim() == 2]
    chosen = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in chosen]
    return Chained([
        torch.optim.AdamW(adamw_groups(rest, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, fused=fused),
        Muon(hidden, lr=cfg.muon_lr, weight_decay=cfg.weight_decay, momentum=cfg.momentum, ns_steps=cfg.ns_steps),
    ])


def check_sharding(optimizer: str, sharded: bool) -> None:
    """Refuse an optimizer that cannot step parameters a strategy shards across devices."""
    if optimizer == "muon" and sharded:
        raise ValueError("optim=muon orthogonalises whole matrices, which trainer=fsdp shards: use optim=adamw")


class Chained(torch.optim.Optimizer):
    """Optimizers over disjoint parameters stepped as one. Their groups and their state are this object's
    own (shared, not copied), so Lightning's single-optimizer loop, gradient clipping, an LR schedule and
    the resume checkpoint see one ordinary optimizer."""

    def __init__(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self.optimizers = optimizers
        super().__init__([group for o in optimizers for group in o.param_groups], {})
        self._share()

    def _share(self) -> None:
        """Point each optimizer at its slice of this one's groups and at this one's state."""
        start = 0
        for optimizer in self.optimizers:
            count = len(optimizer.param_groups)
            optimizer.param_groups, optimizer.state = self.param_groups[start:start + count], self.state
            start += count

    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        loss = None
        if closure is not None:  # Lightning's closure runs forward and backward once, for all of them
            with torch.enable_grad():
                loss = closure()
        for optimizer in self.optimizers:
            optimizer.step()
        return loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)  # replaces this one's groups and state with new objects
        self._share()


OPTIMIZERS: dict[str, Callable[[nn.Module, OptimConfig, bool], torch.optim.Optimizer]] = {
    "adamw": adamw, "muon": muon}


# Learning-rate schedules, keyed by `optim.schedule`: each gives the multiplier of the peak LR at a step.
# Cosine with warmup (GPT-2/3's), warmup-stable-decay (Hu et al. 2024, MiniCPM) and constant with warmup.
def warmup(step: int, cfg: OptimConfig) -> float:
    """Linear rise over warmup_steps (never 0, so the first step already moves), then 1."""
    return (step + 1) / cfg.warmup_steps if step < cfg.warmup_steps else 1.0


def cosine(step: int, cfg: OptimConfig) -> float:
    """Warmup, then half a cosine from 1 down to min_lr / lr at max_steps, flat after."""
    if step < cfg.warmup_steps:
        return warmup(step, cfg)
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    return cfg.min_ratio + (1 - cfg.min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def wsd(step: int, cfg: OptimConfig) -> float:
    """Warmup, hold the peak, then fall linearly to min_lr / lr over the last decay_fraction of max_steps:
    the stable phase does not depend on when training ends, so one run can branch into several lengths."""
    decay_start = max(cfg.warmup_steps, cfg.max_steps - round(cfg.decay_fraction * cfg.max_steps))
    if step < decay_start:
        return warmup(step, cfg)
    progress = min(1.0, (step - decay_start) / max(1, cfg.max_steps - decay_start))
    return 1 - (1 - cfg.min_ratio) * progress


def constant(step: int, cfg: OptimConfig) -> float:
    """Warmup, then the peak LR to the end."""
    return warmup(step, cfg)


SCHEDULES: dict[str, Callable[[int, OptimConfig], float]] = {"cosine": cosine, "wsd": wsd, "constant": constant}

# The settings only some schedules read: constant never decays, so it has no end or floor; cosine no stable phase.
READ_BY: dict[str, tuple[str, ...]] = {"min_lr": ("cosine", "wsd"), "max_steps": ("cosine", "wsd"),
                                       "decay_fraction": ("wsd",)}


def check_schedule_reads(cfg: OptimConfig, given: Collection[str]) -> None:
    """Refuse a setting the command line gives (`given`: optim fields) that this schedule never reads: the run would
    train as without it, and its record would say it had it."""
    for name, readers in READ_BY.items():
        if name in given and cfg.schedule not in readers:
            value = as_override(getattr(cfg, name))
            raise ValueError(f"optim.{name}={value} is read by optim.schedule={' or '.join(readers)} only, and this "
                             f"run has optim.schedule={cfg.schedule}: drop optim.{name} (in a sweep whose other jobs "
                             f"read it, give it to all as ++optim.{name}={value})")
