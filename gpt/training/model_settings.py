"""The model a run's config builds (ModelConfig), and which of the model settings a command line gives its parts read:
one that none reads is refused, since the run would train as without it and its record say it had it; a sweep's
`++` setting its job ignores is left out of what the run is."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpt.model.config import ModelConfig
from gpt.model.gpt import check_parts, settings_read, without_foreign_settings
from gpt.overrides import MODEL_GROUPS, override_key, override_value, quoted


def model_config(cfg: DictConfig, vocab_size: int) -> ModelConfig:
    return without_foreign_settings(ModelConfig.from_dict({**OmegaConf.to_container(cfg.model, resolve=True),
                                                            "vocab_size": vocab_size}))


def group_setting(group: str) -> str:
    """The composed key or section an option of `group` sets: model.attention for attention=, data for data=."""
    return f"model.{group}" if group in MODEL_GROUPS else group


def given_model_settings(cfg: DictConfig, overrides: Sequence[str], forced: bool = False) -> dict[str, Any]:
    """The model fields the command line (`overrides`) sets, directly (model.rope_base=500) or by an option of a
    group whose package is the model (attention=gqa sets attention), with the values the run composed. `++` marks a
    setting given to every job of a sweep whose other jobs read it (the preflight's advice), so it is left out unless
    `forced` (init_from's check: no `++` changes a pretrained model's architecture)."""
    keys = [override_key(o) for o in overrides if not o.startswith("~") and (forced or not o.startswith("++"))]
    fields = [key.removeprefix("model.") for key in keys if key.startswith("model.")] + \
        [key for key in keys if key in MODEL_GROUPS]
    return {name: cfg.model[name] for name in fields if name in cfg.model}


def unread_settings(given: dict[str, Any], model_cfg: ModelConfig) -> list[str]:
    """The names among `given` model settings that no part of this model reads (settings_read)."""
    if not given:  # no one-layer model built for nothing (a run that sets no model setting)
        return []
    read = settings_read(model_cfg) | {"block_size"}  # the length of the data's windows and rows too
    return [name for name in given if name not in read]


def check_settings_read(given: dict[str, Any], model_cfg: ModelConfig, sweep: Sequence[str] = ()) -> None:
    """Refuse a model setting the command line gives that no part of this model reads: the run would train as without
    it, and its record, a sweep's row, would say it had it. `sweep`: the overrides of the sweep this run is a job of,
    whose values of the setting the advice repeats (`++model.rope_base=100,10000`, not this job's one value)."""
    unread = unread_settings(given, model_cfg)
    if unread:
        name, value = unread[0], quoted(given[unread[0]])
        swept = override_value(sweep, f"model.{name}", value)
        raise ValueError(f"model.{name}={value} changes nothing in a model of attention={model_cfg.attention}, "
                         f"pos={model_cfg.pos}: none of its parts reads model.{name}; drop it (in a sweep whose other "
                         f"jobs read it, give it to all as ++model.{name}={swept})")


def forced_unread(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """The `++model.x=v` overrides, as written, whose setting no part of the config's model reads: a sweep gives such a
    setting to every job, and these jobs ignore it (their record leaves it out of what the run is)."""
    forced = [o for o in overrides if o.startswith("++")]
    unread = unread_settings(given_model_settings(cfg, forced, forced=True), model_config(cfg, vocab_size=1))
    return [o for o in forced if override_key(o).removeprefix("model.") in unread]


def model_accepts(cfg: DictConfig, override: str) -> bool:
    """Whether the model's parts accept the config's model with `override` (`++model.qk_norm=true`) in place of its
    own value of that setting."""
    try:
        check_parts(model_config(OmegaConf.merge(cfg, OmegaConf.from_dotlist([override.lstrip("+")])), vocab_size=1))
    except (TypeError, ValueError):  # as its job's own checks refuse it
        return False
    return True


def model_refused(cfg: DictConfig, overrides: Sequence[str]) -> bool:
    """Whether a job of this config and these overrides is refused for its model before it trains, by the checks it
    runs: a model setting that none of its parts reads, or parts that do not suit each other (attention=torch_mha
    with pos=rope)."""
    try:
        model_cfg = model_config(cfg, vocab_size=1)
        check_settings_read(given_model_settings(cfg, overrides), model_cfg)
        check_parts(model_cfg)
    except (TypeError, ValueError, OmegaConfBaseException):  # an interpolation to nowhere: check_config refuses it
        return True
    return False
