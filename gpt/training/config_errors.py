"""Hydra's multi-line composition errors of train.py's config made one line: what is unknown (a typo'd key, an
unknown option) and what there is instead, with a "did you mean" where a name is close and the option that has a key
the command's options lack."""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ValidationError

from gpt.overrides import override_key, override_value
from gpt.training.composition import compose_train, groups, not_an_option, parsed, preset_sweeps, swept_options
from gpt.validate import closest, did_you_mean, first_line


@lru_cache(maxsize=256)
def read_option(file: Path) -> tuple[str, list]:
    """An option file's text and its defaults list; remembered for one explanation, which reads each file for every
    key it looks for."""
    return file.read_text(), list(OmegaConf.load(file).get("defaults") or [])


class Check(Protocol):
    """train.py's checks of a composed config before any work; `sweep`: the overrides of the sweep the config is a
    job of, which the advice of a refusal repeats; `lightning=False`: the sections Lightning builds from are left
    unchecked, and Lightning unimported."""

    def __call__(self, cfg: DictConfig, *, sweep: Sequence[str] = (), lightning: bool = True) -> None: ...


def names(file: Path, mentions: re.Pattern[str]) -> bool:
    """Whether an option's file, or an option of its group that its defaults list pulls in, writes a key that
    `mentions` finds: data=tasks names recall's keys in configs/data/recall.yaml alone."""
    text, defaults = read_option(file)
    if mentions.search(text):
        return True
    return any(names(file.parent / f"{entry}.yaml", mentions) for entry in defaults
               if isinstance(entry, str) and (file.parent / f"{entry}.yaml").is_file())


def chosen(cfg: DictConfig, overrides: list[str], group: str) -> str | None:
    """The group's option as a command line writes it (attention=mha), or its list (data=[recall,distance]), which
    Hydra does not record among its choices; None where the command has none."""
    choice = cfg.hydra.runtime.choices.get(group)
    if choice:
        return f"{group}={choice}"
    given = next((o for o in parsed(overrides) if o.key_or_group == group), None)
    return f"{group}=[{','.join(given.value())}]" if given and isinstance(given.value(), list) else None


def mixture(config_dir: Path, before: DictConfig, overrides: list[str], has: str, owner: str, section: str,
            check: Check) -> str | None:
    """The option list that adds `owner` to the command's option `has` (data=[recall,copy]), where a list of the
    group's options composes as a mixture that `check` accepts: `section` (data.tasks) keeps everything it had in
    `before` (the config `overrides` compose) and gains the owner's. None where a later option replaces an earlier
    one's values (attention=[mha,gqa] is gqa; data=[text,copy] is copy's data module) or the mixture is refused
    (length runs alone)."""
    group, _, options = has.partition("=")
    together = f"{group}=[{options.strip('[]')},{owner.partition('=')[2]}]"
    rest = [o for o in overrides if override_key(o) != group]
    try:
        after = compose_train(config_dir, [*rest, together])
    except HydraException:
        return None
    kept = [OmegaConf.to_container(OmegaConf.select(cfg, section) if section else cfg, resolve=False)
            for cfg in (before, after)]
    if not (isinstance(kept[0], dict) and isinstance(kept[1], dict) and kept[0].items() <= kept[1].items()):
        return None
    try:
        check(after, lightning=False)  # the mixture changes no section Lightning builds from: not worth its import
    except ValueError:
        return None
    return together


def builder(cfg: DictConfig, key: str) -> tuple[str, str] | None:
    """The nearest section above `key` that builds a class (data, for data.tasks.copy.length), and that class."""
    parts = key.split(".")[:-1]
    for end in range(len(parts), 0, -1):
        section = ".".join(parts[:end])
        target = OmegaConf.select(cfg, f"{section}._target_")
        if target is not None:
            return section, target
    return None


def options_setting(config_dir: Path, overrides: list[str], key: str) -> list[str]:
    """The options (`attention=gqa`) whose config adds `key` to what `overrides` compose, as model.kv_heads is added
    by attention=gqa alone, those whose own file writes it first (data=text before data=shakespeare, which takes
    text's). Presets (experiment=) are left out: they set keys of other options, never their own."""
    parent, _, name = key.rpartition(".")
    mentions = re.compile(rf"^\s*{re.escape(name)}\s*:", re.MULTILINE)
    found = []
    for group in groups(config_dir):
        if group == "experiment":
            continue
        others = [o for o in overrides if override_key(o) != group]
        for file in sorted((config_dir / group).glob("*.yaml")):
            if not names(file, mentions):  # composing only the files that name the key keeps this quick
                continue
            cfg = composed_with(config_dir, (*others, f"{group}={file.stem}"))
            if cfg is None:
                continue
            node = OmegaConf.select(cfg, parent) if parent else cfg
            if isinstance(node, DictConfig) and name in node:
                found.append((not mentions.search(read_option(file)[0]), f"{group}={file.stem}"))
    return [option for _, option in sorted(found)]


@lru_cache(maxsize=128)
def composed_with(config_dir: Path, overrides: tuple[str, ...]) -> DictConfig | None:
    """The config `overrides` compose, or None where Hydra refuses them; remembered for one explanation (read only),
    whose searches for the option that has a key compose the same option again for each part of the key."""
    try:
        return compose_train(config_dir, list(overrides))
    except HydraException:
        return None


def explain(err: HydraException, config_dir: Path, overrides: list[str], sweep: Sequence[str] = (),
            check: Check | None = None) -> str:
    """One line for Hydra's multi-line composition errors: what is unknown, and what there is instead. `sweep`: the
    command line of the sweep the job of `overrides` is one of; `check`: train.py's checks of a composed config, which
    a list of options it offers (data=[recall,copy]) must pass."""
    composed_with.cache_clear()  # the config files may have changed since the last explanation
    read_option.cache_clear()
    missing = re.search(r"Could not (?:find|load) '([^']+)/([^']+)'", str(err))
    if isinstance(err, MissingConfigException) and missing:
        return not_an_option(config_dir, *missing.groups())
    unknown = re.search(r"full_key: (\S+)", str(err.__cause__ or ""))
    if unknown and isinstance(err.__cause__, ValidationError):  # a value of the wrong type for a typed Hydra setting
        return f"{unknown.group(1)}={override_value(overrides, unknown.group(1), '')}: {first_line(err.__cause__)}"
    if unknown:
        key = unknown.group(1)
        parent, _, name = key.rpartition(".")
        # Hydra names the first key the config lacks: data.tasks.copy for data.tasks.copy.length, whose task the
        # composed data has none of
        under = [o for o in overrides if f"{override_key(o)}.".startswith(f"{key}.")]
        rest = [o for o in overrides if o not in under]
        try:
            cfg = compose_train(config_dir, rest)
        except HydraException as other:
            if len(rest) < len(overrides):  # another key the options lack (model.kv_heads beside model.window)
                return explain(other, config_dir, rest, sweep, check)
            return f"{key} is not a setting"
        node = OmegaConf.select(cfg, parent) if parent else cfg
        keys = [k for k in node if k not in ("hydra", "defaults", "_target_")] if isinstance(node, DictConfig) else []
        if name in keys and isinstance(node[name], DictConfig):  # a value given for a whole section
            return f"{key} holds settings ({', '.join(map(str, node[name]))}): set one, e.g. {key}.<setting>=<value>"
        choices = cfg.hydra.runtime.choices
        # the key as written where an option has it, else the longest part of it one has, down to Hydra's key
        # (data.tasks.copy, for a typo'd knob of copy)
        written = (override_key(under[0]) if under else key).split(".")
        setting, owners = owning(config_dir, rest, written, key.count("."))
        if owners:
            return owned(config_dir, cfg, rest, sweep, check, parent, setting, owners, written)
        if not parent:  # a typo'd group (attenton=mha) is a top-level key to Hydra
            return f"{key} is not a setting{top_level_hint(name, keys, groups(config_dir), overrides)}"
        if parent == "trainer" and name in trainer_argument_names():
            value = override_value(overrides, key, "<value>")
            return (f"{key} is a Lightning Trainer argument that configs/trainer/ does not list: add it with "
                    f"+{key}={value}")
        choice = choices.get(parent)
        where = f" of {parent}={choice}" if choice else f" of {parent}"
        # a near name only another option has (data.tasks.copyy, where data=recall has no copy task), where it is
        # nearer than any the command's options have (model.kv_head, where attention=mha has model.heads)
        near = near_setting(config_dir, rest, parent, name, keys)
        if near and closest(name, [*keys, near]) == near:
            at = key.count(".")
            setting, owners = owning(config_dir, rest, [*written[:at], near, *written[at + 1:]], at)
            if owners:
                fix = owned(config_dir, cfg, rest, sweep, check, parent, setting, owners, written)
                return f"{key} is not a setting{where}; did you mean {parent}.{near}? {fix}"
        hint = did_you_mean(name, keys, f"{parent}.") or (f"; its settings: {', '.join(keys)}" if keys else "")
        return f"{key} is not a setting{where}{hint}"
    return first_line(err)


def owning(config_dir: Path, overrides: list[str], parts: list[str], least: int) -> tuple[str, list[str]]:
    """The longest key of `parts` (down to `least` + 1 parts) that options add to what `overrides` compose, and
    those options (options_setting); the whole key and none where no option has any of them."""
    candidates = [".".join(parts[:end]) for end in range(len(parts), least, -1)]
    return next(((candidate, found) for candidate in candidates
                 if (found := options_setting(config_dir, overrides, candidate))), (".".join(parts), []))


def owned(config_dir: Path, cfg: DictConfig, overrides: list[str], sweep: Sequence[str],
          check: Check | None, parent: str, setting: str, owners: list[str],
          written: list[str]) -> str:
    """What to add for `setting`, which `owners` (options) have and the command's options lack: one of them, a
    list of options that keeps the command's (data=[recall,copy]), or in a sweep how to give it to every job.
    `written`: the key as the command line writes it, whose value a sweep gives."""
    group = owners[0].split("=")[0]
    current = chosen(cfg, overrides, group)
    has = current or f"no {group}"
    # a sweep over the option that has the key and others that lack it
    if set(owners) & swept_options([*sweep, *preset_sweeps(cfg, sweep)]):
        built = builder(cfg, setting)
        if built is not None:  # each option builds a class of its own (data=), which refuses a key it lacks
            return (f"{setting} is a setting of {' or '.join(owners)}, and this sweep has a job with {has}, "
                    f"whose {built[0]} ({built[1]}) has no such setting: run {owners[0]} in a sweep of its own")
        # The value as the command sweeps it (model.window=4,8), not the job's one: the fix keeps the sweep.
        value = override_value(sweep, ".".join(written[:setting.count(".") + 1]), "<value>")
        return (f"{setting} is a setting of {' or '.join(owners)}, and this sweep has a job with {has}: write "
                f"++{setting}={value} to give it to every job (the jobs without {owners[0]} ignore it)")
    both = mixture(config_dir, cfg, overrides, current, owners[0], parent, check) if current and check else None
    keep = f", or {both} to keep {current} beside it" if both else ""
    return f"{setting} is a setting of {' or '.join(owners)}, and this command has {has}: add {owners[0]}{keep}"


def near_setting(config_dir: Path, overrides: list[str], parent: str, name: str, have: list[str]) -> str | None:
    """The name closest to `name` that an option adds under `parent` and the command's own `have` lacks (copy, for
    data.tasks.copyy where the command's data=recall has no copy task), or None. The options' files are read for
    their keys, and only the close ones composed, nearest first."""
    key_line = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*:", re.MULTILINE)
    left = {found for group in groups(config_dir) if group != "experiment"
            for file in (config_dir / group).glob("*.yaml") for found in key_line.findall(read_option(file)[0])}
    left -= {name, *have}
    while (match := closest(name, left)) is not None:
        if options_setting(config_dir, overrides, f"{parent}.{match}"):
            return match
        left.discard(match)
    return None


def trainer_argument_names() -> set[str]:
    """The arguments of Lightning's Trainer, which trainer.<name> passes on (imported only to explain a mistake)."""
    import inspect

    from lightning import Trainer

    return set(inspect.signature(Trainer.__init__).parameters) - {"self"}


def top_level_hint(name: str, keys: list[str], group_names: list[str], overrides: list[str]) -> str:
    """'; did you mean seed?', or for a group 'did you mean attention=mha?' with the value given; else what
    there is: the settings, and the groups that are not also settings."""
    match = closest(name, keys + group_names)
    if match in group_names:
        value = override_value(overrides, name, "<option>")
        return f"; did you mean {match}={value}?"
    if match:
        return f"; did you mean {match}?"
    others = [g for g in group_names if g not in keys]
    return f"; its settings: {', '.join(keys)}, and the groups {', '.join(others)} (group=option)"
