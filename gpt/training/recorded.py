"""The command line's overrides as Hydra records them in a run's config (hydra.overrides.task), read back as
typed."""
from __future__ import annotations

from collections.abc import Sequence

from omegaconf import ListConfig, OmegaConf


def as_typed(task: ListConfig | Sequence[str]) -> list[str]:
    """The overrides of a hydra.overrides.task as the command line typed them: each is a string Hydra parses again,
    and read from the config a ${...} in it was resolved first (an escaped \\${ came out as an interpolation, an
    unknown one failed with no key named)."""
    return OmegaConf.to_container(task, resolve=False) if isinstance(task, ListConfig) else list(task)
