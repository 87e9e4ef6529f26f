"""The sections of train.py's config that Lightning builds from, checked against what builds them, one line per
mistake: the data module, the Trainer, the callbacks, the logger. Apart from checks.py, which checks the rest first,
because importing Lightning takes seconds that a typo in the model's settings need not wait for."""
from __future__ import annotations

from typing import Any

import lightning as L
from hydra.utils import get_class
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.callbacks import Timer
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.strategies.launchers import _SubprocessScriptLauncher
from omegaconf import DictConfig, OmegaConf

from gpt.overrides import quoted
from gpt.training.callbacks import LossAtLengths, ResumeCheckpoint, SampleText
from gpt.training.loggers import WandbMode
from gpt.training.section_values import trainer_arguments, user_values
from gpt.validate import NonNegativeFloat, PositiveInt, check_section, check_value

SET_BY_TRAIN = ("callbacks", "logger", "plugins", "default_root_dir")  # train() passes these to the Trainer itself


def check_lightning_sections(cfg: DictConfig) -> None:
    """The data, trainer, callback and logger sections against the classes Lightning builds from them, and the values
    Lightning takes but fails on only once training has begun."""
    check_section("data", user_values(cfg.data), get_class(cfg.data._target_), not_settable=["given"])
    # Running text's windows follow the model's context: set apart, the model trained on windows of another length
    # (positions past them never trained) or was refused for a "longest line" running text does not have.
    if "block_size" in cfg.data and not OmegaConf.is_interpolation(cfg.data, "block_size") \
            and cfg.data.block_size != cfg.model.block_size:
        raise ValueError(f"data.block_size={cfg.data.block_size} is not set on its own: it follows model.block_size="
                         f"{cfg.model.block_size}; set model.block_size={cfg.data.block_size} instead")
    arguments = trainer_arguments(cfg)
    check_section("trainer", {**user_values(cfg.trainer), "precision": arguments["precision"]}, L.Trainer,
                  not_settable=SET_BY_TRAIN)
    check_max_time(arguments.get("max_time"))
    # Lightning takes these at 0, then divides by them once training starts: a traceback after the run folder is made.
    check_value("trainer.accumulate_grad_batches", arguments.get("accumulate_grad_batches", 1), PositiveInt)
    # Lightning's fp32 path skips a clip <= 0; in bf16-mixed and FSDP LitGPT clips itself, and torch's clip_grad_norm_
    # takes -1 as a factor of -1/norm: every gradient flipped, the loss climbing.
    check_value("trainer.gradient_clip_val", arguments.get("gradient_clip_val"), NonNegativeFloat | None)
    if arguments.get("val_check_interval") == 0:
        raise ValueError("trainer.val_check_interval=0: it counts the batches between validations, at least 1; every "
                         "run validates at its last step, so to validate only there set it to trainer.max_steps")
    check_section("callbacks.checkpoint", user_values(cfg.callbacks.checkpoint), ResumeCheckpoint, ["dirpath"])
    check_section("callbacks.sample", user_values(cfg.callbacks.sample), SampleText,
                  not_settable=["tokenizer", "meta", "seed"])
    check_section("callbacks.lengths", user_values(cfg.callbacks.lengths), LossAtLengths)
    if cfg.callbacks.lengths.at and cfg.data.get("tasks") is not None:
        raise ValueError("callbacks.lengths.at scores running text at longer lengths; a task is graded per length by "
                         "its own lines (data=length): set callbacks.lengths.at=null")
    if cfg.get("logger"):
        check_section("logger", user_values(cfg.logger), get_class(cfg.logger._target_))
        if "mode" in cfg.logger and get_class(cfg.logger._target_) is WandbLogger:
            check_value("logger.mode", cfg.logger.mode, WandbMode)


def check_launch(trainer: L.Trainer, strategy: str, in_sweep: bool) -> None:
    """Lightning's ddp, which trainer.strategy=auto picks for several devices, starts each other process by running
    the command line again: under -m that process ran the whole sweep a second time, its jobs trained twice at once
    into the same folders and the report written twice. ddp_spawn starts them from inside the job."""
    if in_sweep and isinstance(trainer.strategy.launcher, _SubprocessScriptLauncher):
        raise ValueError(f"trainer.strategy={strategy} on {trainer.world_size} processes starts the others by running "
                         "the command again, which under -m re-runs the whole sweep: pass trainer.strategy=ddp_spawn "
                         "(or trainer=ddp)")


def check_max_time(max_time: Any) -> None:
    """Lightning refuses a trainer.max_time it cannot read only once the run folder is made, naming no key."""
    if max_time is None:
        return
    try:
        Timer(duration=max_time)
    except (MisconfigurationException, TypeError, ValueError):
        raise ValueError(f"trainer.max_time={quoted(max_time)} must be DD:HH:MM:SS (00:01:30:00 is 90 minutes) or a "
                         "mapping of days, hours, minutes and seconds ({minutes:90})") from None


