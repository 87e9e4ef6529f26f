"""train.py's composed config checked before any work, one line per mistake: every section against the signature of
what it is passed to (gpt/validate.py), the model's parts and the settings they read (model_settings.py), each task's
knobs, the precision a CPU can compute in (precision.py); the sections Lightning builds from in lightning_checks.py,
imported only once the others pass. Also what train.py builds from that config: OptimConfig's fields, the data's
arguments."""
from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import torch
from hydra.utils import get_class
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import (ConfigAttributeError, ConfigKeyError, InterpolationKeyError, OmegaConfBaseException,
                              UnsupportedInterpolationType)

from gpt.data.tasks.spec import build_tasks
from gpt.evaluation.extrapolation import too_long
from gpt.model.config import ModelConfig
from gpt.model.gpt import check_parts
from gpt.overrides import override_key, quoted
from gpt.training.init_from import check_init_from
from gpt.training.model_settings import check_settings_read, given_model_settings, model_config
from gpt.training.optim import OptimConfig, check_schedule_reads, check_sharding
from gpt.training.precision import check_cpu_precision
from gpt.training.recorded import as_typed
from gpt.training.section_values import user_values
from gpt.validate import (PositiveInt, Range, check_section, check_value, declared_types, did_you_mean,
                          first_line)

if TYPE_CHECKING:
    import lightning as L

CPU_DEVICES = PositiveInt | Literal["auto"]  # what Lightning takes as trainer.devices on the CPU
SECTIONS = ("model", "data", "optim", "trainer", "callbacks.checkpoint", "callbacks.sample", "logger")
GROUPS = tuple(dict.fromkeys(key.split(".")[0] for key in SECTIONS))  # train.yaml's sections, beside RunSettings
CALLBACKS = ("checkpoint", "sample", "lengths")  # configs/callbacks/default.yaml's, each one read by train.py


@dataclass(frozen=True)
class RunSettings:
    """configs/train.yaml's own keys: how a run starts rather than what it trains (tested equal to the YAML's)."""
    seed: Annotated[int, Range(0, 2**32 - 1)]  # what numpy takes; Lightning refuses others once the run has begun
    compile: bool  # torch.compile the model's forward
    resume: bool  # continue the newest run with this config
    ckpt_path: str | None  # or continue from this Lightning checkpoint
    init_from: str | None  # or fine-tune from a Hugging Face folder or a model.pt


def optim_config(cfg: DictConfig) -> dict[str, Any]:
    return OmegaConf.to_container(cfg.optim, resolve=True)


def data_arguments(cfg: DictConfig, overrides: Sequence[str]) -> dict[str, Any]:
    """What data= is built with beyond its section: for a corpus that takes them (running text's `given`), the data
    settings the command line (`overrides`) names, so that a prepared data.path refuses one it was made otherwise
    even at its default (by value alone, `data.val_fraction=0.1` reads as nothing said). `++` gives a setting to every
    job of a sweep, some of which may not read it (++data.vocab_size beside data.tokenizer=char,bpe), so it is left
    out, as given_model_settings leaves it out."""
    # Asked of the class the run builds anyway: importing TextData to compare cost every task run's start-up ~20 ms.
    if "given" not in inspect.signature(get_class(cfg.data._target_)).parameters:
        return {}
    return {"given": given_settings(overrides, "data")}


def given_settings(overrides: Sequence[str], section: str) -> list[str]:
    """The fields of `section` the command line (`overrides`) sets; not those written with `++`, which a sweep gives to
    every job, some of which may not read them, nor those `~` removes."""
    keys = [override_key(override) for override in overrides if not override.startswith(("++", "~"))]
    return [key.removeprefix(f"{section}.") for key in keys if key.startswith(f"{section}.")]


def check_accelerator(trainer: DictConfig) -> None:
    """On the machine that trains (not where a command is composed: a cluster's login node has no GPU), a GPU
    trainer needs one. Lightning's own words, "No supported gpu backend found!", name neither setting nor fix."""
    if trainer.accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ValueError(f"trainer.accelerator={trainer.accelerator} needs a CUDA GPU and torch sees none here: to "
                         f"train on the CPU drop trainer.accelerator={trainer.accelerator}, or the trainer=gpu or "
                         "trainer=fsdp that set it")
    # auto trains on this CPU where torch sees no GPU (trainer=ddp here): devices=-1 was Lightning's TypeError.
    if trainer.accelerator == "auto" and not torch.cuda.is_available() and not torch.backends.mps.is_available():
        check_value("trainer.devices", trainer.devices, CPU_DEVICES)
        check_cpu_precision(trainer.precision)
    # Lightning's answer was its ModuleNotFoundError's traceback, and the run folder left behind.
    if trainer.accelerator == "tpu" and importlib.util.find_spec("torch_xla") is None:
        raise ValueError("trainer.accelerator=tpu needs torch_xla, which this Python lacks: run on a TPU machine with "
                         "it installed, or drop trainer.accelerator=tpu to train on the CPU")


def check_config(cfg: DictConfig, overrides: Sequence[str] | None = None, sweep: Sequence[str] = (),
                 lightning: bool = True) -> None:
    """Refuse settings that cannot work, one line each, before any data or model work: every section against
    the signature of what it is passed to, train.yaml's own keys against RunSettings, and the model, schedule and
    sample settings the command line (`overrides`; a composed config's own by default) gives against what reads them
    (init_from's model: once it is loaded). `sweep`: the overrides of the sweep this run is a job of, which its
    advice repeats; `lightning=False`: the sections Lightning builds from are left unchecked (check_sections)."""
    if overrides is None:
        overrides = as_typed(cfg.hydra.overrides.task) if "hydra" in cfg else ()
    try:
        check_removed(cfg, overrides)
        check_sections(cfg, lightning)
        check_schedule_reads(OptimConfig.from_dict(optim_config(cfg)), given_settings(overrides, "optim"))
        if "max_new_tokens" in given_settings(overrides, "callbacks.sample") and cfg.data.get("tasks") is not None:
            value = cfg.callbacks.sample.max_new_tokens
            raise ValueError(f"callbacks.sample.max_new_tokens={value} is the length of a running text's sample; a "
                             "task's is one whole line: drop callbacks.sample.max_new_tokens (in a sweep whose other "
                             f"jobs read it, give it to all as ++callbacks.sample.max_new_tokens={value})")
        if not cfg.init_from:
            check_settings_read(given_model_settings(cfg, overrides), model_config(cfg, vocab_size=1), sweep)
    except (ConfigAttributeError, ConfigKeyError) as err:
        raise ValueError(missing_setting(cfg, overrides, err.full_key)) from None
    except OmegaConfBaseException as err:  # an interpolation to nowhere: ${nope}
        raise ValueError(f"{err.full_key}: {first_line(err)}") from None


def missing_setting(cfg: DictConfig, overrides: Sequence[str], key: str) -> str:
    """Why a key train.py reads is not in the config: the command line removed it (or its section) with ~, or the
    option file that composes its section never wrote it (a new configs/optim/<name>.yaml without max_steps)."""
    removed = [override_key(o) for o in overrides if o.startswith("~")]
    if covering := next((r for r in removed if f"{key}.".startswith(f"{r}.")), None):
        return f"{key} is missing from the config: train.py needs it (drop ~{covering})"
    group = key.split(".")[0]
    option = OmegaConf.select(cfg, f"hydra.runtime.choices.{group}", default=None) if "hydra" in cfg else None
    return (f"{key} is missing from the config: add it to the {group} option's file "
            f"(configs/{group}/{option or '<option>'}.yaml)")


def check_removed(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Refuse a setting or section the command line removed with ~ that another setting names (optim.max_steps is
    ${trainer.max_steps}): resolving the other said only that its key was not found."""
    written = str({k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items() if k != "hydra"})
    for key in (override_key(o) for o in overrides if o.startswith("~")):
        if "${" + key + "}" in written or "${" + key + "." in written:  # the key, or a key of the section removed
            raise ValueError(f"{key} is missing from the config: train.py needs it (drop ~{key})")


def check_resolves(node: DictConfig | ListConfig, prefix: str = "") -> None:
    """Refuse a value whose ${...} names no setting, naming where it is written: the checks below skip interpolated
    values, and building the data or model met it with no key named."""
    for key in range(len(node)) if isinstance(node, ListConfig) else node:
        if not prefix and key == "hydra":  # Hydra's own section, read by Hydra
            continue
        try:
            value = node[key]
        except (InterpolationKeyError, UnsupportedInterpolationType) as err:  # ${hydra:...} resolves in the run only
            raise ValueError(f"{prefix}{key}: {first_line(err)}") from None
        except OmegaConfBaseException:
            continue
        if isinstance(value, (DictConfig, ListConfig)):
            check_resolves(value, f"{prefix}{key}.")


def check_known_keys(cfg: DictConfig) -> None:
    """Refuse a key that nothing reads, at the top or among the callbacks: `+` adds any key, and `+seeds=3` trained at
    the default seed as if it were not given. The sections' own settings are checked against what reads them."""
    settings = list(declared_types(RunSettings))
    for key in cfg:
        if key != "hydra" and key not in (*settings, *GROUPS):
            raise ValueError(f"{key} is not a setting of train.py{did_you_mean(key, [*settings, *GROUPS])} (settings: "
                             f"{', '.join(settings)}, and the sections {', '.join(GROUPS)})")
    for key in cfg.callbacks:
        if key not in CALLBACKS:
            meant = did_you_mean(key, CALLBACKS, "callbacks.")
            raise ValueError(f"callbacks.{key} is not a setting of callbacks{meant} (settings: {', '.join(CALLBACKS)})")


def check_sections(cfg: DictConfig, lightning: bool = True) -> None:
    """Every section's values against what reads them: first those needing no Lightning (the model, the optimizer,
    the run's own keys), whose import made a typo there a six-second wait for one line; then, with `lightning`, the
    sections Lightning builds from (lightning_checks.py)."""
    check_resolves(cfg)
    for key in SECTIONS:  # a section replaced by a value (callbacks.sample=7) or removed (~data)
        node = OmegaConf.select(cfg, key)
        if not isinstance(node, DictConfig) and not (key == "logger" and node is None):  # logger=none is null
            raise ValueError(f"{key} must hold settings, not {quoted(node)}: drop the override that replaced or "
                             f"removed it (set one of its settings with {key}.<setting>=<value>)")
    check_known_keys(cfg)
    check_section("model", user_values(cfg.model), ModelConfig, not_settable=["vocab_size"])
    check_parts(model_config(cfg, vocab_size=1))
    if cfg.data.get("tasks") is not None:  # each task's knobs, by the task itself
        build_tasks(OmegaConf.to_container(cfg.data.tasks, resolve=True))
    check_section("optim", user_values(cfg.optim), OptimConfig)
    if OmegaConf.is_interpolation(cfg.optim, "max_steps"):  # the schedule's length follows trainer.max_steps
        check_value("trainer.max_steps", cfg.trainer.max_steps, PositiveInt)  # named as set, not as optim's field
    OptimConfig.from_dict(optim_config(cfg))  # option names, and ranges that relate fields (after trainer.max_steps)
    for key, hint in declared_types(RunSettings).items():
        check_value(key, cfg.get(key), hint)
    if cfg.resume and cfg.ckpt_path:
        raise ValueError("pass either resume=true (newest run with this config) or ckpt_path=<path>, not both")
    check_init_from(cfg.init_from)
    if not lightning:
        return
    from gpt.training.lightning_checks import check_lightning_sections  # Lightning: only once the above pass

    check_lightning_sections(cfg)
    if cfg.trainer.accelerator == "cpu":  # -1 (every GPU on a GPU) was Lightning's TypeError after the run folder
        check_value("trainer.devices", cfg.trainer.devices, CPU_DEVICES)
        check_cpu_precision(cfg.trainer.precision)
    # Also refused when the optimizer is built (a Trainer given an FSDP strategy object), but on the GPUs, after
    # the run folder, the data and the model: named here from the config, before any work.
    check_sharding(cfg.optim.name, "fsdp" in str(cfg.trainer.strategy).lower())


def check_fits(model_cfg: ModelConfig, data: L.LightningDataModule) -> None:
    """The model's context holds the corpus's longest line (a task's lines are whole examples)."""
    if model_cfg.block_size < data.max_tokens:
        raise ValueError(f"model.block_size={model_cfg.block_size} is shorter than the corpus's longest line "
                         f"({data.max_tokens} tokens): set model.block_size={data.max_tokens} or more")


def check_lengths(at: Sequence[int] | None, data: L.LightningDataModule) -> None:
    """Every length of callbacks.lengths.at has a window of length + 1 tokens in the validation text: scored only
    when training ends, a longer one stopped the run there, before its model.pt and summary.json were written."""
    tokens = data.meta.get("val_tokens")
    longest = max(at or [0])
    if too_long(longest, tokens):
        raise ValueError(f"callbacks.lengths.at has {longest}, but the validation text has only {tokens:,} tokens: "
                         f"list lengths up to {tokens - 1} (or validate on more text)")
