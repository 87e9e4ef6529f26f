"""What every Hugging Face family shares: which tinygpt parts it can express, how its config maps onto
ModelConfig, and which of its tensors is which of ours."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpt.data.tokenizers.base import Tokenizer
from gpt.data.tokenizers.hf import HFTokenizer
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT
from gpt.overrides import as_override


class Family:
    """One `model_type` of transformers. `parts` lists, per tinygpt field, the values the family can express;
    `names` pairs every tinygpt tensor with the family's (and whether it is stored transposed)."""

    model_type: str
    config_class: str  # the transformers config class that builds this family
    parts: dict[str, tuple[Any, ...]]

    def needs(self, cfg: ModelConfig) -> dict[str, tuple[Any, ...]]:
        """The tinygpt fields whose values this family cannot express, with the values it can."""
        return {field: allowed for field, allowed in self.parts.items() if getattr(cfg, field) not in allowed}

    def mismatches(self, cfg: ModelConfig, name: Callable[[str], str] = lambda field: field) -> list[str]:
        """Each field `needs` gives as what the family needs and what the model has, the field written as `name`
        writes it: `pos=rope (this model has learned)`."""
        return [f"{name(field)}={' or '.join(map(as_override, allowed))} (this model has "
                f"{as_override(getattr(cfg, field))})" for field, allowed in self.needs(cfg).items()]

    def model_config(self, hf_config: Any) -> ModelConfig:
        """The equal ModelConfig, or ValueError naming the Hugging Face field that has no tinygpt equal."""
        raise NotImplementedError

    def hf_config(self, model: GPT) -> dict[str, Any]:
        """Keyword arguments of `config_class` for a model whose parts this family expresses."""
        raise NotImplementedError

    def names(self, cfg: ModelConfig) -> Iterator[tuple[str, str, bool]]:
        """(tinygpt name, Hugging Face name, stored transposed?) for every tensor of the model."""
        raise NotImplementedError

    def tokenizer(self, folder: Path) -> Tokenizer:
        """The tokenizer a folder of this family is read with: by default its own (tokenizer.json)."""
        return HFTokenizer.from_folder(folder)


def refuse(field: str, value: Any, why: str) -> None:
    """Raise the one-line error for a Hugging Face config field that tinygpt cannot express."""
    raise ValueError(f"{field}={value} does not map onto tinygpt: {why}")


def mlp_ratio_for(hidden: int, dim: int) -> float:
    """The model.mlp_ratio whose int(mlp_ratio * dim) is exactly `hidden` (the MLP's width)."""
    ratio = hidden / dim
    return ratio if int(ratio * dim) == hidden else (hidden + 0.5) / dim  # the 0.5 outweighs float rounding
