"""Learning-rate schedules, keyed by `optim.schedule`: each gives the multiplier of the peak LR at a step.
Cosine with warmup (GPT-2/3's), warmup-stable-decay (Hu et al. 2024, MiniCPM) and constant with warmup."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpt.training.optim import OptimConfig


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
