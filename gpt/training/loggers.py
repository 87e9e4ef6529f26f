"""Metric loggers from the `logger` config group (csv, tensorboard, wandb, none), wandb's online/offline
decision made before wandb starts, and sample text written the way each logger can show it."""
from __future__ import annotations

import netrc
import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger, WandbLogger
from omegaconf import DictConfig, OmegaConf

from gpt.training.recorded import built

# logger.mode, which WandbLogger passes on to wandb.init unchecked: wandb refuses another only once the run folder
# exists, in words naming neither the key nor the modes ("1 validation error for Settings").
WandbMode = Literal["online", "offline", "disabled"] | None


def wandb_mode() -> str:
    """WANDB_MODE if set; else 'online' only when an API key is configured (WANDB_API_KEY or a netrc
    entry from `wandb login`), else 'offline': wandb then never waits on a login prompt or the network."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if os.environ.get("WANDB_API_KEY"):
        return "online"
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return "online" if netrc.netrc(os.environ.get("NETRC")).authenticators(host) else "offline"
    except (OSError, netrc.NetrcParseError):
        return "offline"


def make_logger(cfg: DictConfig | None) -> Logger | bool:
    """The configured logger, or False for logger=none (the progress bar still shows the metrics)."""
    if not cfg:
        return False
    values = OmegaConf.to_container(cfg, resolve=True)
    if values["_target_"].endswith(WandbLogger.__name__):
        values["mode"] = values.get("mode") or wandb_mode()
        values["name"] = values.get("name") or None  # a run without overrides gets wandb's own name
    return built(values)


def finish(loggers: list[Logger]) -> None:
    """Close wandb's run (so each multirun job is its own run) and say how to upload an offline one."""
    if not any(isinstance(logger, WandbLogger) for logger in loggers):
        return
    import wandb  # only imported when asked for: it is slow to import

    if wandb.run is not None:
        offline, run_dir = wandb.run.settings.mode == "offline", Path(wandb.run.dir).parent
        wandb.finish()
        if offline:
            print(f"wandb ran offline; upload with: wandb sync {run_dir}")


def _csv_text(logger: CSVLogger, key: str, text: str, step: int) -> None:
    with open(Path(logger.log_dir) / "samples.txt", "a") as f:
        f.write(f"{key} step {step}: {text}\n")


def _tensorboard_text(logger: TensorBoardLogger, key: str, text: str, step: int) -> None:
    logger.experiment.add_text(key, text, step)


def _wandb_text(logger: WandbLogger, key: str, text: str, step: int) -> None:
    logger.log_text(key, columns=["step", "text"], data=[[step, text]], step=step)


TEXT_WRITERS: dict[type, Callable[[Logger, str, str, int], None]] = {
    CSVLogger: _csv_text, TensorBoardLogger: _tensorboard_text, WandbLogger: _wandb_text}


def log_text(loggers: list[Logger], key: str, text: str, step: int) -> None:
    for logger in loggers:
        writer = TEXT_WRITERS.get(type(logger))
        if writer is not None:  # a logger with no way to show text still gets the printed sample
            writer(logger, key, text, step)
