"""A composed section's values as what reads them takes them: the values a user set (to check against a signature),
and the trainer section as lightning.Trainer's arguments."""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from gpt.training.precision import resolve_precision


def user_values(node: DictConfig) -> dict[str, Any]:
    """A section's values as plain Python, less those interpolated from elsewhere (checked where they are set)."""
    values = OmegaConf.to_container(node, resolve=False)
    return {k: values[k] for k in node if k != "_target_" and not OmegaConf.is_interpolation(node, k)}


def trainer_arguments(cfg: DictConfig) -> dict[str, Any]:
    """The trainer section as lightning.Trainer takes it: plain values (it reads a dict max_time, not a DictConfig)
    and the precision to train in."""
    return {**OmegaConf.to_container(cfg.trainer, resolve=True),
            "precision": resolve_precision(None if cfg.trainer.precision is None else str(cfg.trainer.precision),
                                           cfg.trainer.accelerator)}
