"""Command-line overrides as Hydra writes them (`model.dim=64`, `+data.x=1`, `~callbacks.sample`): the key one
sets, the value it gives, and a value written as one; and a path written as a shell command's argument."""
from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# A string Hydra reads back as itself unquoted: ASCII letters, digits and ./_- not starting as a number would, and
# not a word Hydra reads as null, a bool or a float.
PLAIN = re.compile(r"(?!\.\d)[A-Za-z_./][\w./-]*", re.ASCII)
WORDS = {"null", "true", "false", "nan", "inf"}


# The groups whose option is written into the model's section under the group's name (# @package model): attention=gqa
# sets model.attention. Every other group's option sets the section of its own name (data=calculator: data).
MODEL_GROUPS = ("attention", "pos")


def model_setting(field: str) -> str:
    """How train.py's command line sets a model field: by its group (attention=gqa, pos=rope), else model.mlp=swiglu."""
    return field if field in MODEL_GROUPS else f"model.{field}"


def override_key(override: str) -> str:
    """The key a command-line override sets: `+data.x=1`, `++data.x=1` and `~data.x` all name data.x."""
    return override.split("=", 1)[0].lstrip("+~")


def override_value(overrides: Sequence[str], key: str, default: str) -> str:
    """The value the overrides give `key` as written (`4,8` for a sweep of it), or `default`."""
    return next((o.split("=", 1)[1] for o in overrides if "=" in o and override_key(o) == key), default)


def as_override(value: Any) -> str:
    """A value as a command line writes it: true, false and null as YAML spells them, not Python's True, False and
    None (which Hydra reads back as the string 'None')."""
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


def quoted(value: Any) -> str:
    """A value as an override writes it for Hydra to read back unchanged: a list (or the tuple a config made of one)
    as [a,b], a mapping as {a:1}, a string of other characters (a space, a comma Hydra reads as a sweep, an =, a
    quote, a bracket, a ${ it escapes) or one Hydra would read as another type ('64', 'true') quoted as Hydra's
    grammar quotes. The spelling of every value a refusal names, so that it reads as the user typed it, not as
    Python prints it."""
    if isinstance(value, (list, tuple)):
        return f"[{','.join(quoted(item) for item in value)}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{quoted(key)}:{quoted(item)}" for key, item in value.items()) + "}"
    if not isinstance(value, str):
        return as_override(value)
    if PLAIN.fullmatch(value) and value.lower() not in WORDS:
        return value
    quote = "'" if '"' in value and "'" not in value else '"'
    # OmegaConf: a ${ is an interpolation unless a backslash escapes it, and backslashes before one pair up.
    escaped = re.sub(r"(\\*)\$\{", lambda m: m[1] * 2 + "\\${", value)
    # Hydra: a backslash escapes a quote, so the backslashes before a quote (or before the closing one) double.
    escaped = re.sub(rf"(\\*){quote}", lambda m: m[1] * 2 + "\\" + quote, escaped)
    return quote + re.sub(r"(\\+)\Z", r"\1\1", escaped) + quote


def pasted(key: str, value: Any) -> str:
    """An override to paste into a shell: `value` quoted for Hydra, then the whole for the shell."""
    return shlex.quote(f"{key}={quoted(value)}")


def command_line(*words: str, overrides: dict[str, Any]) -> str:
    """A command to paste into a shell: `words`, then `overrides` (key: value) as pasted() writes them."""
    return " ".join([shlex.join(words), *(pasted(key, value) for key, value in overrides.items())])


def path_argument(path: Path | str) -> str:
    """A path as a command to paste into a shell names it: quoted, and a relative one starting with '-' (a file
    -notes.txt in the folder it runs in) as ./-notes.txt, which no command reads as an option. Every command suggested
    with a user's path names it so."""
    text = str(path)
    return shlex.quote(f"./{text}" if text.startswith("-") else text)
