"""Whether a run folder's record is the run a command continues there (resume=true, or ckpt_path= of its own
last.ckpt): the config its .hydra records, or the one its recorded overrides compose, against the command's, and
the first setting that differs named as either command line typed it."""
from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from gpt.overrides import override_key, pasted, quoted
from gpt.training.model_settings import group_setting
from gpt.training.run_folder import NOT_IDENTITY, OVERRIDES, read_overrides
from gpt.training.saved_config import DamagedRecord, run_identity, saved_config
from gpt.validate import first_line

# What a run continued with resume=true may be given otherwise: a run trains to the trainer.max_steps it is resumed
# with (a finished one is kept, naming the command that trains it further: train_further).
TRAINED_FURTHER = "trainer.max_steps"



def settings(values: Any, prefix: str = "") -> dict[str, Any]:
    """A config's values by the dotted keys an override sets (model.heads), in the config's order."""
    if isinstance(values, dict) and values:
        return {key: value for name, inner in values.items()
                for key, value in settings(inner, f"{prefix}{name}.").items()}
    return {prefix.removesuffix("."): values}


def setting(values: dict[str, Any], key: str) -> str:
    """A setting as an override writes it (model.heads=4), an interpolation as the config holds it
    (optim.max_steps=${trainer.max_steps}), or `no <key>` where the config has none."""
    if key not in values:
        return f"no {key}"
    value = values[key]
    return f"{key}={value if isinstance(value, str) and '${' in value else quoted(value)}"


def refuse_another_run(cfg: DictConfig, run_dir: Path, overrides: list[str],
                       compose: Callable[[list[str]], DictConfig]) -> None:
    """resume=true, or ckpt_path= of its own last.ckpt, in a run's own folder (hydra.run.dir= of it) with a config
    other than the one its .hydra records: Hydra would write this command's config over that record, and the run be
    kept or continued as this command's (a finished one said kept, with another model.heads than its model.pt's; a
    stopped one went on at another optim.lr or seed without a word; ckpt_path= trained on at another model.heads and
    wrote a model.pt the record said was all of that model.heads). One line naming the first setting that differs,
    and the command that continues the run. A folder without a record has nothing to compare: left to resume=true's
    search, or to ckpt_path='s checks. A record whose config.yaml is damaged or gone is compared by the config that
    the overrides it records compose now (`compose`: as this command's were); skipped, it let any settings through."""
    if not (run_dir / ".hydra").is_dir():
        return
    saved = run_dir / ".hydra" / "config.yaml"
    continues = "resume=true" if cfg.resume else pasted("ckpt_path", str(cfg.ckpt_path))
    other = "drop resume=true and pass another hydra.run.dir= to start a new run" if cfg.resume else \
        "pass another hydra.run.dir= to continue it with these settings in a run folder of its own"
    try:
        recorded = read_overrides(run_dir)
    except (OSError, ValueError):  # gone or damaged: its config.yaml still says what the run is
        recorded = None
    try:
        theirs, damaged = settings(run_identity(saved_config(saved))), ""
    except (FileNotFoundError, DamagedRecord) as err:
        damaged = f"{saved} is {f'damaged ({err.damage})' if isinstance(err, DamagedRecord) else 'gone'}"
        theirs = settings(run_identity(composed_record(run_dir, recorded, compose, f"{continues}: {damaged}", other)))
    mine = settings(run_identity(cfg))
    key = next((key for key in dict.fromkeys([*mine, *theirs]) if key != TRAINED_FURTHER
                and (key in mine, mine.get(key)) != (key in theirs, theirs.get(key))), None)
    if key is None:
        return
    made, given = ([o for o in found if override_key(o) not in (*NOT_IDENTITY, TRAINED_FURTHER)
                    and not override_key(o).startswith("hydra.")] for found in (recorded or [], overrides))
    if recorded is None or sorted(made) == sorted(given):  # the same overrides: configs/ changed since
        how = f"the settings its {saved} records"
    else:
        # this command's trainer.max_steps (else the run's own), and its own Hydra settings but the folder
        further = [o for o in overrides if override_key(o) == TRAINED_FURTHER] or \
            [o for o in recorded if override_key(o) == TRAINED_FURTHER]
        hydra = [o for o in overrides if override_key(o).startswith("hydra.") and override_key(o) != "hydra.run.dir"]
        command = ["python train.py", *(shlex.quote(o) for o in [*made, *further, *hydra]),
                   pasted("hydra.run.dir", str(run_dir)), continues]
        how = f"the overrides it was made with ({' '.join(command)})"
    there, here = chosen_options(cfg, run_dir, key, recorded or [], overrides, theirs, compose) or \
        (setting(theirs, key), setting(mine, key))
    read_from = f" (by the overrides in {run_dir / OVERRIDES}: {damaged})" if damaged else ""
    raise ValueError(f"{continues}: the run in {run_dir} was made with {there}{read_from}, and this command has "
                     f"{here}; {'resume' if cfg.resume else 'continue'} it with {how}, or {other}")


def composed_record(run_dir: Path, recorded: list[str] | None, compose: Callable[[list[str]], DictConfig],
                    damaged: str, other: str) -> DictConfig:
    """The config the overrides a run's folder records (`recorded`) compose, for a run whose config.yaml is
    `damaged` (a refusal's start, naming it); one line naming the way on where they cannot say what the run was made
    with."""
    if recorded is None:
        raise ValueError(f"{damaged}, and {run_dir / OVERRIDES} cannot be read either: nothing says which settings "
                         f"the run was made with; write {run_dir / OVERRIDES} again from hydra.overrides.task in the "
                         f"hydra.yaml beside it, or {other}")
    try:
        return compose(recorded)
    except HydraException as err:
        raise ValueError(f"{damaged}, and the overrides in {run_dir / OVERRIDES} no longer compose "
                         f"({first_line(err)}): nothing says which settings the run was made with; {other}") from None


def chosen_options(cfg: DictConfig, run_dir: Path, key: str, recorded: list[str], overrides: list[str],
                   theirs: dict[str, Any], compose: Callable[[list[str]], DictConfig]) -> tuple[str, str] | None:
    """Where a group picked on either command line (the run's `recorded` overrides, this command's `overrides`) sets
    `key` and the run and this command picked other options of it, the two as typed (attention=mha, attention=gqa):
    the composed key (model.attention) is not what either command said. A group sets the key or section of its name
    (group_setting), and one outside it where this command with the run's option (`compose`d) has the run's value
    of `key` (`theirs`: the run's settings): data=copy sets model.block_size. None where `key` is given itself, or
    no such group sets it."""
    given = {override_key(o) for o in [*recorded, *overrides]}
    if key in given:
        return None
    try:
        their_options = OmegaConf.load(run_dir / ".hydra" / "hydra.yaml").hydra.runtime.choices
    except (OSError, yaml.YAMLError, ValueError, AttributeError):  # no record of its options: the key says it
        return None
    mine = cfg.hydra.runtime.choices
    differ = [group for group in mine if group in given and their_options.get(group) != mine[group]]
    own = [group for group in differ if key == group_setting(group) or key.startswith(f"{group_setting(group)}.")]
    if own:
        group = max(own, key=lambda g: len(group_setting(g)))  # model.attention: attention=, not model=
    else:
        group = next((group for group in differ if option_sets(
            compose, overrides, f"{group}={quoted(their_options.get(group))}", key, (key in theirs, theirs.get(key)))),
            None)
    if group is None:
        return None
    return f"{group}={their_options.get(group)}", f"{group}={mine[group]}"


def option_sets(compose: Callable[[list[str]], DictConfig], overrides: list[str], option: str, key: str,
                value: tuple[bool, Any]) -> bool:
    """Whether the command line `overrides` with `option` (data=calculator) in place of their own option of its group
    compose `value` (whether there is a `key`, and its value as written)."""
    group = override_key(option)
    try:
        values = settings(run_identity(compose([*(o for o in overrides if override_key(o) != group), option])))
    except HydraException:  # a setting of this command's option that the other lacks: not the one that differs
        return False
    return (key in values, values.get(key)) == value
