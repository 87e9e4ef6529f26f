"""The config a run's or a sweep's folder records, which resume=true compares with the command: read whole or
refused naming how it is damaged, and what of it makes two runs the same run."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from omegaconf import DictConfig, ListConfig, OmegaConf

from gpt.inference.checkpoint import CheckpointError
from gpt.training.recorded import as_typed
from gpt.training.run_folder import CHECKPOINT, NOT_IDENTITY
from gpt.validate import first_line

# The top-level keys every run's config has held since the first and no run goes without (train.py refuses each
# removed; ~model and ~logger train): a saved config without one was cut short, not made by another config. Hydra
# writes seed after the others, so a file cut anywhere before its line lacks one.
EVERY_CONFIG = ("data", "trainer", "callbacks", "optim", "seed")


class DamagedRecord(CheckpointError):
    """A run's or a sweep's record that resume=true compares with the command and cannot read; `damage` says how."""

    def __init__(self, path: Path, damage: str, fix: str) -> None:
        super().__init__(f"{path} is damaged ({damage}): {fix}")
        self.damage = damage


def saved_config(path: Path, sweep: bool = False, job: bool = False) -> DictConfig:
    """A run's .hydra/config.yaml (`job`: a sweep job's) or (`sweep`) a sweep's multirun.yaml, which resume=true
    compares with this run's config; one that cannot be read is refused naming it, not skipped: it may be the newest
    run of this config."""
    try:
        cfg = OmegaConf.load(path)
    except (yaml.YAMLError, ValueError) as err:  # UnicodeDecodeError is a ValueError
        what = first_line(err)
    else:
        if not isinstance(cfg, DictConfig):
            what = "not a mapping"
        elif sweep and not isinstance(OmegaConf.select(cfg, "hydra.overrides.task"), ListConfig):
            what = "no hydra.overrides.task: emptied or cut short"  # what sweep_identity reads
        elif missing := [key for key in EVERY_CONFIG if key not in cfg]:
            what = f"no top-level {missing[0]}: emptied or cut short"
        else:
            try:
                if sweep:
                    swept(as_typed(cfg.hydra.overrides.task))  # what sweep_identity parses: edited, it may not
                return cfg
            except OverrideParseException as err:
                what = first_line(err)
    fix = "delete the sweep folder holding it to run that sweep again" if sweep else \
        f"delete that job's folder {path.parent.parent} to run the job again (the sweep's other jobs are kept)" if job \
        else f"delete the folder holding it, or pass ckpt_path=<its {CHECKPOINT}> instead of resume=true"
    raise DamagedRecord(path, what, fix)


def run_identity(cfg: DictConfig) -> dict[str, Any]:
    """The config as written (interpolations unresolved), without the keys that only say how to start (and
    Hydra's own section, which holds the time and folders of the launch)."""
    values = OmegaConf.to_container(cfg, resolve=False)
    return {k: v for k, v in values.items() if k not in (*NOT_IDENTITY, "hydra")}


def swept(overrides: list[str]) -> list[str]:
    """The overrides that sweep (`seed=0,1`), in the order given."""
    return [o.input_line for o in OverridesParser.create().parse_overrides(overrides) if o.is_sweep_override()]
