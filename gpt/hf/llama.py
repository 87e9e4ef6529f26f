"""Llama (Touvron et al. 2023): RoPE, RMSNorm, SwiGLU and grouped-query attention, the layout Mistral and
Qwen3 share. Its RoPE rotates feature pairs (i, i + D/2), as tinygpt's does, so no permutation is needed."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpt.hf.family import Family, mlp_ratio_for, refuse
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT

QUERY_HEAD_ATTENTION = ("mha", "gqa", "mqa")  # separate query/key/value projections viewed into heads
_ATTENTION = [("attn.query", "self_attn.q_proj"), ("attn.key", "self_attn.k_proj"), ("attn.value", "self_attn.v_proj"),
              ("attn.proj", "self_attn.o_proj")]
_MLP = [("mlp.gate", "mlp.gate_proj"), ("mlp.fc", "mlp.up_proj"), ("mlp.proj", "mlp.down_proj")]


class Llama(Family):
    model_type = "llama"
    config_class = "LlamaConfig"
    parts = {"pos": ("rope",), "norm": ("rmsnorm",), "mlp": ("swiglu",), "attention": QUERY_HEAD_ATTENTION,
             "qk_norm": (False,)}

    def check(self, c: Any) -> None:
        """Refuse, naming the field, what the family can set but tinygpt cannot compute."""
        if c.hidden_act not in ("silu", "swish"):  # transformers' two names of one function
            refuse("hidden_act", c.hidden_act, "tinygpt's swiglu gates with SiLU")
        if c.head_dim != c.hidden_size // c.num_attention_heads:
            refuse("head_dim", c.head_dim, f"tinygpt's heads split hidden_size={c.hidden_size} into "
                   f"num_attention_heads={c.num_attention_heads} heads of {c.hidden_size // c.num_attention_heads}")
        if c.attention_dropout:
            refuse("attention_dropout", c.attention_dropout, "Llama drops attention weights only, tinygpt's "
                   "model.dropout the embeddings and every residual branch too; set it to 0.0 in the config "
                   "(init_from takes model.dropout from the run)")
        rope = getattr(c, "rope_parameters", None) or {}
        if rope.get("rope_type", "default") != "default":
            refuse("rope_parameters.rope_type", rope["rope_type"], "tinygpt's RoPE has no scaling")
        if rope.get("partial_rotary_factor", 1.0) != 1.0:
            refuse("rope_parameters.partial_rotary_factor", rope["partial_rotary_factor"],
                   "tinygpt's RoPE rotates every feature of a head")

    def model_config(self, c: Any) -> ModelConfig:
        self.check(c)
        return ModelConfig(**self.sizes(c), **self.attention(c))

    def sizes(self, c: Any) -> dict[str, Any]:
        """The fields every family of this layout shares."""
        rope = getattr(c, "rope_parameters", None) or {}
        swiglu_hidden = (3 * c.intermediate_size + 1) // 2  # SwiGLU keeps 2/3 of the width it is given
        return dict(vocab_size=c.vocab_size, layers=c.num_hidden_layers, heads=c.num_attention_heads,
                    dim=c.hidden_size, block_size=c.max_position_embeddings, norm_eps=c.rms_norm_eps,
                    rope_base=float(rope.get("rope_theta", 10000.0)),
                    mlp_ratio=mlp_ratio_for(swiglu_hidden, c.hidden_size), tie_embeddings=c.tie_word_embeddings,
                    pos="rope", norm="rmsnorm", mlp="swiglu")

    def attention(self, c: Any) -> dict[str, Any]:
        """The attention fields: the variant, its key/value heads, biases, QK-norm."""
        if c.attention_bias != c.mlp_bias:
            refuse("attention_bias", c.attention_bias, f"tinygpt's model.bias sets attention and MLP biases "
                   f"together, and mlp_bias={c.mlp_bias}")
        return {**grouped_heads(c), "bias": c.attention_bias}

    def hf_config(self, model: GPT) -> dict[str, Any]:
        # No attention_dropout: it would drop only a part of what model.dropout drops, and be refused on the way back.
        cfg = model.cfg
        return dict(vocab_size=cfg.vocab_size, hidden_size=cfg.dim,
                    intermediate_size=model.blocks[0].mlp.fc.out_features, num_hidden_layers=cfg.layers,
                    num_attention_heads=cfg.heads,
                    num_key_value_heads=model.blocks[0].attn.kv_heads, head_dim=cfg.head_dim, hidden_act="silu",
                    max_position_embeddings=cfg.block_size, rms_norm_eps=cfg.norm_eps,
                    rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_base},
                    tie_word_embeddings=cfg.tie_embeddings,
                    bos_token_id=None, eos_token_id=None, pad_token_id=None, **self.biases(cfg))

    def biases(self, cfg: ModelConfig) -> dict[str, Any]:
        return dict(attention_bias=cfg.bias, mlp_bias=cfg.bias)

    def names(self, cfg: ModelConfig) -> Iterator[tuple[str, str, bool]]:
        yield "tok_emb.weight", "model.embed_tokens.weight", False
        yield "head.weight", "lm_head.weight", False
        kinds = ("weight", "bias") if cfg.bias else ("weight",)
        for i in range(cfg.layers):
            ours, theirs = f"blocks.{i}.", f"model.layers.{i}."
            yield f"{ours}attn_norm.weight", f"{theirs}input_layernorm.weight", False
            for mine, hf in _ATTENTION + _MLP:
                for kind in kinds:
                    yield f"{ours}{mine}.{kind}", f"{theirs}{hf}.{kind}", False
            if cfg.qk_norm:
                yield f"{ours}attn.q_norm.weight", f"{theirs}self_attn.q_norm.weight", False
                yield f"{ours}attn.k_norm.weight", f"{theirs}self_attn.k_norm.weight", False
            yield f"{ours}mlp_norm.weight", f"{theirs}post_attention_layernorm.weight", False
        yield "norm.weight", "model.norm.weight", False


def grouped_heads(c: Any) -> dict[str, Any]:
    """`mha` when every query head has its own key/value head, else `gqa` with the config's count."""
    grouped = c.num_key_value_heads != c.num_attention_heads
    return dict(attention="gqa", kv_heads=c.num_key_value_heads) if grouped else dict(attention="mha")
