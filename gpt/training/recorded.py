"""A run's config read once, never resolved a second time: the command line's overrides as Hydra records them
(hydra.overrides.task), read back as typed, and the objects a section names by its _target_."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.utils import get_class
from omegaconf import ListConfig, OmegaConf


def as_typed(task: ListConfig | Sequence[str]) -> list[str]:
    """The overrides of a hydra.overrides.task as the command line typed them: each is a string Hydra parses again,
    and read from the config a ${...} in it was resolved first (an escaped \\${ came out as an interpolation, an
    unknown one failed with no key named)."""
    return OmegaConf.to_container(task, resolve=False) if isinstance(task, ListConfig) else list(task)


def built(values: dict[str, Any], **extra: Any) -> Any:
    """The object a resolved section names by its _target_, from its other values and `extra`. Built here, not by
    Hydra's instantiate: that resolves the values a second time, reading the literal ${ of an escaped setting
    (data.path='a\\${b}/corpus.txt') as an interpolation, and it wraps the object's own one-line ValueError in many
    lines."""
    values = dict(values)
    return get_class(values.pop("_target_"))(**values, **extra)
