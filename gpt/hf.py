"""Convert between tinygpt and Hugging Face's GPT-2 (Radford et al. 2019). With learned positions,
LayerNorm, the GELU MLP, fused multi-head attention and biases, tinygpt *is* GPT-2's architecture,
so GPT-2-format weights load, sample and fine-tune here. Needs the optional `transformers` (`pip install
tinygpt[hf]`)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from gpt.config import ModelConfig
from gpt.model import GPT

# The parts that make a tinygpt exactly GPT-2.
GPT2_PARTS: dict[str, Any] = {"pos": "learned", "norm": "layernorm", "mlp": "gelu", "attention": "mha_fused",
                              "bias": True, "qk_norm": False}
# GPT-2 names its linear layers' weights (in, out) (its Conv1D); torch's nn.Linear stores (out, in).
_BLOCK_PARTS = [("attn_norm", "ln_1", False), ("attn.qkv", "attn.c_attn", True), ("attn.proj", "attn.c_proj", True),
                ("mlp_norm", "ln_2", False), ("mlp.fc", "mlp.c_fc", True), ("mlp.proj", "mlp.c_proj", True)]


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise ValueError("GPT-2 conversion needs transformers: pip install 'tinygpt[hf]'") from None
    return transformers


def _names(layers: int) -> Iterator[tuple[str, str, bool]]:
    """(tinygpt name, GPT-2 name, transpose?) for every tensor of the model."""
    yield "tok_emb.weight", "transformer.wte.weight", False
    yield "head.weight", "lm_head.weight", False
    yield "pos.table.weight", "transformer.wpe.weight", False
    for i in range(layers):
        for ours, theirs, is_conv in _BLOCK_PARTS:
            yield f"blocks.{i}.{ours}.weight", f"transformer.h.{i}.{theirs}.weight", is_conv
            yield f"blocks.{i}.{ours}.bias", f"transformer.h.{i}.{theirs}.bias", False
    yield "norm.weight", "transformer.ln_f.weight", False
    yield "norm.bias", "transformer.ln_f.bias", False


def from_hf_gpt2(model_or_folder: Any) -> GPT:
    """A GPT2LMHeadModel, or a folder it was `save_pretrained` into, -> an equal tinygpt GPT (eval mode)."""
    transformers = _transformers()
    hf = model_or_folder
    if isinstance(model_or_folder, (str, Path)):
        if not (Path(model_or_folder) / "config.json").is_file():
            raise ValueError(f"{model_or_folder} holds no config.json: pass a GPT2LMHeadModel.save_pretrained folder")
        hf = transformers.GPT2LMHeadModel.from_pretrained(str(model_or_folder), local_files_only=True)
    c = hf.config
    if c.activation_function not in ("gelu_new", "gelu_pytorch_tanh") or not c.scale_attn_weights or \
            c.scale_attn_by_inverse_layer_idx or not c.tie_word_embeddings:
        raise ValueError("only GPT-2's own variant converts: activation gelu_new, scale_attn_weights, "
                         "no scale_attn_by_inverse_layer_idx, tied embeddings")
    cfg = ModelConfig(vocab_size=c.vocab_size, layers=c.n_layer, heads=c.n_head, dim=c.n_embd,
                      block_size=c.n_positions, dropout=c.resid_pdrop, norm_eps=c.layer_norm_epsilon,
                      mlp_ratio=(c.n_inner or 4 * c.n_embd) / c.n_embd, **GPT2_PARTS)
    theirs = hf.state_dict()
    model = GPT(cfg)
    model.load_state_dict({ours: theirs[name].t() if transpose else theirs[name]
                           for ours, name, transpose in _names(cfg.layers)})
    return model.eval()


def to_hf_gpt2(model: GPT) -> Any:
    """A tinygpt GPT with GPT-2's parts -> an equal transformers GPT2LMHeadModel (eval mode)."""
    transformers = _transformers()
    cfg = model.cfg
    wrong = [f"{key}={getattr(cfg, key)}" for key, value in GPT2_PARTS.items() if getattr(cfg, key) != value]
    if wrong:
        needed = " ".join(f"{key}={value}" for key, value in GPT2_PARTS.items())
        raise ValueError(f"GPT-2 needs {needed}; this model has {', '.join(wrong)}")
    hidden = int(cfg.mlp_ratio * cfg.dim)
    hf_cfg = transformers.GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.dim,
                                     n_layer=cfg.layers, n_head=cfg.heads, n_inner=hidden,
                                     activation_function="gelu_new", layer_norm_epsilon=cfg.norm_eps,
                                     resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout)
    hf = transformers.GPT2LMHeadModel(hf_cfg)
    ours = model.state_dict()
    with torch.no_grad():
        hf.load_state_dict({name: ours[key].t() if transpose else ours[key] for key, name, transpose in _names(cfg.layers)})
    return hf.eval()
