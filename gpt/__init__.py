"""tinygpt: a tiny GPT built from parts chosen by config."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpt.attention import ATTENTION
    from gpt.checkpoint import load_checkpoint
    from gpt.config import ModelConfig
    from gpt.generation import generate
    from gpt.model import GPT
    from gpt.text import TextModel, load

# Each public name's module, imported on first use: `python -m gpt.prepare` needs no torch (1-2 s of start-up).
_HOMES = {"ATTENTION": "gpt.attention", "load_checkpoint": "gpt.checkpoint", "ModelConfig": "gpt.config",
          "generate": "gpt.generation", "GPT": "gpt.model", "TextModel": "gpt.text", "load": "gpt.text"}
__all__ = ["ATTENTION", "GPT", "ModelConfig", "TextModel", "generate", "load", "load_checkpoint"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'gpt' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
