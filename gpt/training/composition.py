"""train.py's config composed as Hydra composes it, one job's or a sweep's, with the overrides read as Hydra reads
them (one it cannot read is one line) and the groups and options configs/ offers. Hydra's other composition errors
made one line: config_errors.py."""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, ValueType
from hydra.errors import OverrideParseException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from gpt.overrides import override_key
from gpt.validate import did_you_mean, first_line


def parsed(overrides: list[str]) -> list[Override]:
    """Hydra's reading of each override; one it cannot read, a sweep of one of Hydra's own settings (which Hydra
    refuses in three lines), or one that sets a `_target_` (which class a section builds is chosen by its group:
    data=<option>), is one line naming it."""
    parser = OverridesParser.create()
    for override in overrides:  # one at a time, so an unreadable one can be named
        try:
            parser.parse_overrides([override])
        except OverrideParseException as err:
            raise ValueError(f"cannot read the override {override!r} ({first_line(err)}): write "
                             "key=value, e.g. model.heads=4") from None
    found = parser.parse_overrides(overrides)
    for override in found:
        key = override.key_or_group
        if key.startswith("hydra.") and override.is_sweep_override():  # Hydra's answer is three lines
            values = override.input_line.split("=", 1)[1]
            swept = key.removeprefix("hydra.sweeper.params.")
            fix = f"sweep {swept}={values} itself (it replaces a preset's values of {swept})" if swept != key \
                else "give it one value"
            raise ValueError(f"{override.input_line} sweeps a setting of Hydra's own: {fix}")
        if key.split(".")[-1] == "_target_":
            group = override.key_or_group.split(".")[0]
            raise ValueError(f"{override.key_or_group} is not a setting: what {group} builds is chosen by its "
                             f"option ({group}=<option>)")
    return found


def swept_options(overrides: list[str]) -> set[str]:
    """Every `group=option` a sweep's command line runs (`attention=mha,gqa`: attention=mha and attention=gqa)."""
    return {f"{o.key_or_group}={value}" for o in parsed(overrides) if o.is_choice_sweep()
            and o.value_type != ValueType.GLOB_CHOICE_SWEEP for value in o.sweep_string_iterator()}


def preset_sweeps(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """The sweeps a preset lists in hydra.sweeper.params (experiment=attention_tasks sweeps attention=), as
    overrides, less the keys the command line sets itself, which replace them."""
    given = {override_key(o) for o in overrides}
    params = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
    return [f"{key}={value}" for key, value in params.items() if key not in given]


def sweep_overrides(params: Mapping[str, Any], overrides: Sequence[str]) -> list[str]:
    """A sweep's overrides as its sweeper reads them: the preset's sweeper params, then the command line's, whose
    sweep of a key replaces the preset's (a key the same with or without its +, as the preset's `+experiment/state`
    and a command line's)."""
    return [*(f"{key}={value}" for key, value in params.items()), *overrides]


def compose_train(config_dir: Path, overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3", job_name="train"):
        return compose("train", overrides=overrides, return_hydra_config=True)


@contextmanager
def composed_sweep(config_dir: Path, overrides: list[str]) -> Iterator[DictConfig]:
    """A sweep's config as Hydra composes it for -m, its swept keys at their values before the sweep; Hydra stays
    initialized with the configs while it is used, to compose the sweep's jobs."""
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3", job_name="train"):
        yield GlobalHydra.instance().config_loader().load_configuration(
            "train", overrides, run_mode=RunMode.MULTIRUN, validate_sweep_overrides=False)


def groups(config_dir: Path) -> list[str]:
    """The config groups a command line picks options of (`attention=gqa`); Hydra's own are left out."""
    return sorted(p.name for p in config_dir.iterdir() if p.is_dir() and p.name != "hydra")


def group_options(config_dir: Path, group: str) -> list[str]:
    """A group's options: its files here, and for Hydra's own groups (hydra/launcher) also those Hydra and its
    plugins ship (basic, joblib, ...), which no file here holds."""
    if not group.startswith("hydra/"):
        return sorted(p.stem for p in (config_dir / group).glob("*.yaml"))
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return GlobalHydra.instance().config_loader().get_group_options(group)


# Options of Hydra's own groups that a plugin from one of this project's extras brings, and the option of ours that
# builds on each: without the plugin, Hydra's error named the plugin's option, which no user typed, as no option.
PLUGIN_OPTIONS = {("hydra/launcher", "submitit_slurm"): ("hydra/launcher=slurm", "hydra-submitit-launcher", "cluster")}


def not_an_option(config_dir: Path, group: str, option: str) -> str:
    if (group, option) in PLUGIN_OPTIONS:
        ours, package, extra = PLUGIN_OPTIONS[group, option]
        return f'{ours} needs {package}, which is not installed here: pip install -e ".[{extra}]"'
    options = group_options(config_dir, group)
    return (f"{group}={option} is not an option of {group}: choose one of {', '.join(options)}"
            f"{did_you_mean(option, options, group + '=')}")
