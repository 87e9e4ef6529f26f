"""GPT-2 (Radford et al. 2019): with learned positions, LayerNorm, the GELU MLP, fused multi-head attention
and biases, tinygpt *is* GPT-2's architecture. GPT-2 stores its linear layers (in, out) (its Conv1D)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpt.data.tokenizers.base import Tokenizer
from gpt.data.tokenizers.gpt2 import GPT2Tokenizer, gpt2_files
from gpt.data.tokenizers.hf import HFTokenizer
from gpt.hf.family import Family, mlp_ratio_for, refuse
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT

# (tinygpt name, GPT-2 name, a Conv1D stored transposed?) inside block i
_BLOCK = [("attn_norm", "ln_1", False), ("attn.qkv", "attn.c_attn", True), ("attn.proj", "attn.c_proj", True),
          ("mlp_norm", "ln_2", False), ("mlp.fc", "mlp.c_fc", True), ("mlp.proj", "mlp.c_proj", True)]
# transformers' names of the tanh GELU, the one tinygpt's gelu MLP computes
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_python_tanh", "gelu_fast")


class GPT2(Family):
    model_type = "gpt2"
    config_class = "GPT2Config"
    parts = {"pos": ("learned",), "norm": ("layernorm",), "mlp": ("gelu",), "attention": ("mha_fused",),
             "bias": (True,), "qk_norm": (False,), "random_positions": (None,)}  # GPT-2's table is the block

    def model_config(self, c: Any) -> ModelConfig:
        if c.activation_function not in TANH_GELUS:
            refuse("activation_function", c.activation_function, "tinygpt's gelu MLP uses the tanh GELU (gelu_new)")
        if not c.scale_attn_weights:
            refuse("scale_attn_weights", False, "tinygpt always scales attention scores by 1/sqrt(head width)")
        if c.scale_attn_by_inverse_layer_idx:
            refuse("scale_attn_by_inverse_layer_idx", True, "tinygpt scales every layer's scores alike")
        if getattr(c, "add_cross_attention", False):
            refuse("add_cross_attention", True, "tinygpt is decoder-only")
        for field in ("embd_pdrop", "attn_pdrop"):
            if getattr(c, field) != c.resid_pdrop:
                refuse(field, getattr(c, field), "tinygpt's model.dropout is GPT-2's resid_pdrop, embd_pdrop and "
                       f"attn_pdrop at once, and resid_pdrop={c.resid_pdrop}")
        return ModelConfig(vocab_size=c.vocab_size, layers=c.n_layer, heads=c.n_head, dim=c.n_embd,
                           block_size=c.n_positions, dropout=c.resid_pdrop, norm_eps=c.layer_norm_epsilon,
                           mlp_ratio=mlp_ratio_for(c.n_inner or 4 * c.n_embd, c.n_embd),
                           tie_embeddings=c.tie_word_embeddings, pos="learned", norm="layernorm", mlp="gelu",
                           attention="mha_fused", bias=True)

    def hf_config(self, model: GPT) -> dict[str, Any]:
        cfg = model.cfg
        return dict(vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.dim, n_layer=cfg.layers,
                    n_head=cfg.heads, n_inner=model.blocks[0].mlp.fc.out_features, activation_function="gelu_new",
                    layer_norm_epsilon=cfg.norm_eps, resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,
                    attn_pdrop=cfg.dropout, tie_word_embeddings=cfg.tie_embeddings,
                    bos_token_id=None, eos_token_id=None, pad_token_id=None)

    def tokenizer(self, folder: Path) -> Tokenizer:
        """GPT-2's BPE, from this project's offline copy of its files; the folder's own tokenizer where its vocabulary
        is another (GPT-2's layout trained on another language): read as GPT-2's, its ids were other words."""
        vocab = folder_vocab(Path(folder))
        if vocab is not None and vocab != json.loads(gpt2_files()["encoder.json"].read_bytes()):
            return HFTokenizer.from_folder(folder)
        return GPT2Tokenizer()

    def names(self, cfg: ModelConfig) -> Iterator[tuple[str, str, bool]]:
        yield "tok_emb.weight", "transformer.wte.weight", False
        yield "head.weight", "lm_head.weight", False
        yield "pos.table.weight", "transformer.wpe.weight", False
        for i in range(cfg.layers):
            for ours, theirs, is_conv in _BLOCK:
                yield f"blocks.{i}.{ours}.weight", f"transformer.h.{i}.{theirs}.weight", is_conv
                yield f"blocks.{i}.{ours}.bias", f"transformer.h.{i}.{theirs}.bias", False
        yield "norm.weight", "transformer.ln_f.weight", False
        yield "norm.bias", "transformer.ln_f.bias", False


def folder_vocab(folder: Path) -> dict[str, int] | None:
    """The token -> id map of a folder's BPE: its vocab.json, or the one inside its tokenizer.json; None without."""
    if (folder / "vocab.json").is_file():
        return json.loads((folder / "vocab.json").read_bytes())
    if (folder / "tokenizer.json").is_file():
        return json.loads((folder / "tokenizer.json").read_bytes()).get("model", {}).get("vocab")
    return None
