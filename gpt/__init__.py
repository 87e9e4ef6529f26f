"""tinygpt: a tiny GPT built from parts chosen by config."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpt.inference.checkpoint import load_checkpoint
    from gpt.inference.generation import generate
    from gpt.inference.text import TextModel, load
    from gpt.model.attention import ATTENTION
    from gpt.model.config import ModelConfig
    from gpt.model.gpt import GPT

# Each public name's module, imported on first use: `python -m gpt prepare` needs no torch (1-2 s of start-up).
_HOMES = {"ATTENTION": "gpt.model.attention", "GPT": "gpt.model.gpt", "ModelConfig": "gpt.model.config",
          "generate": "gpt.inference.generation", "load_checkpoint": "gpt.inference.checkpoint",
          "TextModel": "gpt.inference.text", "load": "gpt.inference.text"}
__all__ = ["ATTENTION", "GPT", "ModelConfig", "TextModel", "generate", "load", "load_checkpoint"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'gpt' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    """The public names beside the module's own, so `gpt.<Tab>` and dir(gpt) offer them before their first use."""
    return sorted({*globals(), *__all__})
