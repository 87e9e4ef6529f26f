"""Qwen3 (Qwen team 2025): Llama's layout with QK-norm, an RMSNorm over each head's queries and keys before
RoPE (tinygpt's model.qk_norm), and attention biases only as an option."""
from __future__ import annotations

from typing import Any

from gpt.hf.family import refuse
from gpt.hf.llama import Llama, grouped_heads
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT


class Qwen3(Llama):
    model_type = "qwen3"
    config_class = "Qwen3Config"
    parts = {**Llama.parts, "qk_norm": (True,), "bias": (False,)}

    def attention(self, c: Any) -> dict[str, Any]:
        if c.attention_bias:
            refuse("attention_bias", True, "Qwen3's MLP has no biases, and tinygpt's model.bias sets both")
        # layer_types names the layers that slide: none where max_window_layers reaches num_hidden_layers, and a window
        # as long as the context hides nothing.
        sliding = c.layer_types.count("sliding_attention")
        if not sliding or (c.sliding_window or 0) >= c.max_position_embeddings:
            return {**grouped_heads(c), "bias": False, "qk_norm": True}
        if c.sliding_window is None:
            refuse("sliding_window", None, f"layer_types slides {sliding} layers, over no window")
        if sliding < c.num_hidden_layers:
            refuse("use_sliding_window", True, f"Qwen3 slides the window in {sliding} of {c.num_hidden_layers} "
                   "layers; tinygpt in all or none")
        if c.num_key_value_heads != c.num_attention_heads:
            refuse("num_key_value_heads", c.num_key_value_heads, f"with sliding_window={c.sliding_window} in every "
                   "layer: tinygpt's sliding_window attention has one key/value head per query head")
        return dict(attention="sliding_window", window=c.sliding_window, bias=False, qk_norm=True)

    def hf_config(self, model: GPT) -> dict[str, Any]:
        return {**super().hf_config(model), "use_sliding_window": False}

    def biases(self, cfg: ModelConfig) -> dict[str, Any]:
        return {"attention_bias": False}
