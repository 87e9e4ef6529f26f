"""Mistral 7B (Jiang et al. 2023): Llama's layout without biases, with an optional sliding window. Its mask
keeps keys k > q - window, which is tinygpt's sliding_window: the query and the window - 1 before it."""
from __future__ import annotations

from typing import Any

from gpt.hf.family import refuse
from gpt.hf.llama import Llama, grouped_heads
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT


class Mistral(Llama):
    model_type = "mistral"
    config_class = "MistralConfig"
    # A Mistral without a window is a Llama; tinygpt's mha/gqa models export as Llama.
    parts = {**Llama.parts, "attention": ("sliding_window",), "bias": (False,)}

    def attention(self, c: Any) -> dict[str, Any]:
        if c.sliding_window is None:
            return {**grouped_heads(c), "bias": False}
        if c.num_key_value_heads != c.num_attention_heads:
            # A window at least as long as the context hides no key a query could see: full attention.
            if c.sliding_window >= c.max_position_embeddings:
                return {**grouped_heads(c), "bias": False}
            refuse("num_key_value_heads", c.num_key_value_heads, f"with sliding_window={c.sliding_window}: tinygpt's "
                   "sliding_window attention has one key/value head per query head")
        return dict(attention="sliding_window", window=c.sliding_window, bias=False)

    def hf_config(self, model: GPT) -> dict[str, Any]:
        return {**super().hf_config(model), "sliding_window": model.blocks[0].attn.window}

    def biases(self, cfg: ModelConfig) -> dict[str, Any]:
        return {}  # Mistral has no bias settings: none anywhere
