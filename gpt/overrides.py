"""Command-line overrides as Hydra writes them (`model.dim=64`, `+data.x=1`, `~callbacks.sample`): the key one
sets, the value it gives, and a value written as one."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def override_key(override: str) -> str:
    """The key a command-line override sets: `+data.x=1`, `++data.x=1` and `~data.x` all name data.x."""
    return override.split("=", 1)[0].lstrip("+~")


def override_value(overrides: Sequence[str], key: str, default: str) -> str:
    """The value the overrides give `key` as written (`4,8` for a sweep of it), or `default`."""
    return next((o.split("=", 1)[1] for o in overrides if "=" in o and override_key(o) == key), default)


def as_override(value: Any) -> str:
    """A value as a command line writes it: true and false as YAML spells them, not Python's True and False."""
    return str(value).lower() if isinstance(value, bool) else str(value)
