"""Multi-head attention computed faster: one fused query/key/value projection (GPT-2's layout),
torch's fused scaled_dot_product_attention kernels (FlashAttention, Dao et al. 2022, where the
device has them), and torch.nn.MultiheadAttention. All three compute exactly what `mha` computes."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from gpt.model.attention.base import Attention, KVCache
from gpt.model.attention.mha import MultiHeadAttention
from gpt.model.config import ModelConfig
from gpt.model.positional import POSITIONAL, Positional


class FusedMultiHeadAttention(Attention):
    """One (C -> 3C) matrix multiply gives queries, keys and values at once, then a view into heads."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, bias: bool = False, qk_norm: bool = False,
                 norm_eps: float = 1e-5) -> None:
        super().__init__(heads, heads, dim // heads, dropout, qk_norm, norm_eps)
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> FusedMultiHeadAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, cfg.norm_eps)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # Split along the channels, then a view per tensor: backward joins the three gradients with one
        # concatenation, where unbinding a (3, B, H, T, D) view stacks them and then copies them into place.
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # each (B, T, C)
        return tuple(t.view(B, T, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: Positional) -> torch.Tensor:
        # nanoGPT's and GPT-2's layout at its fastest: training and prompts through the fused kernel, except in
        # bf16 on a CPU, where torch's kernel has no fast path (a 4x4x128 training step at context 64 on one
        # Sapphire Rapids thread: fused kernel 1.1x faster than the maths below in fp32, 1.6x slower in bf16).
        # Weights asked for (plots) and the one-query decode step (faster compiled as written) go as in `mha`.
        if self.keep_weights or q.shape[2] == 1 or (q.device.type == "cpu" and q.dtype == torch.bfloat16):
            return super().attend(q, k, v, pos)
        return fused_attend(self, q, k, v, pos)


def fused_attend(attn: Attention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: Positional) -> torch.Tensor:
    """`Attention.attend`'s maths in torch's fused kernel, which never builds the (T, S) weight matrix
    when it needs no explicit mask."""
    T, S = q.shape[2], k.shape[2]
    offset = S - T
    dropout = attn.attn_dropout.p if attn.training else 0.0
    bias = attn.score_bias(pos, T, S, offset, q.device)
    if bias is None and offset == 0:  # the flash kernel's own causal mask: square, top-left aligned
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
    allowed = attn.mask(T, S, offset, q.device)  # (T, S)
    mask = allowed if bias is None else bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)


class SDPAttention(MultiHeadAttention):
    """`mha`'s projections with the attention itself in torch's fused kernel, which never builds
    the (T, S) weight matrix; asked to keep weights, it computes `mha`'s written-out maths instead."""

    has_weights = False

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: Positional) -> torch.Tensor:
        if self.keep_weights:
            return super().attend(q, k, v, pos)
        if q.shape[2] == 1 and self.decoding():
            return self.attend_newest(q, k, v, pos)
        return fused_attend(self, q, k, v, pos)


class TorchMultiheadAttention(Attention):
    """torch.nn.MultiheadAttention with a causal mask. It projects queries, keys and values inside,
    so RoPE and QK-norm cannot reach them, and its cache holds the block's inputs, not keys/values.
    Asked to keep weights, it has torch return them per head (torch's slower, written-out path)."""

    has_weights = False

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__(heads, heads, dim // heads, dropout)
        self.mha = nn.MultiheadAttention(dim, heads, dropout=dropout, bias=bias, batch_first=True)
        # GPT's init, not torch's Xavier; its `out_proj` ends in "proj", so the model scales it by depth.
        nn.init.normal_(self.mha.in_proj_weight, mean=0.0, std=0.02)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> TorchMultiheadAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if POSITIONAL[cfg.pos].rotates:
            raise ValueError(f"attention=torch_mha projects queries/keys inside torch, where pos={cfg.pos} cannot "
                             "rotate them: use pos=learned, sinusoidal, alibi or none, or attention=sdpa")
        if cfg.qk_norm:
            raise ValueError("attention=torch_mha projects queries/keys inside torch, where model.qk_norm cannot "
                             "reach them: set model.qk_norm=false or use attention=sdpa")

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> KVCache:
        return KVCache(batch, 1, max_len, self.mha.embed_dim, device, dtype)

    def forward(self, x: torch.Tensor, pos: Positional, cache: KVCache | None = None) -> torch.Tensor:
        B, T, C = x.shape
        context = x
        if cache is not None:  # the inputs stand in for both keys and values: torch projects them
            context = cache.append(x.unsqueeze(1), x.unsqueeze(1))[0].squeeze(1)  # (B, S, C)
        S = context.shape[1]
        allowed = self.mask(T, S, S - T, x.device)  # (T, S)
        bias = self.score_bias(pos, T, S, S - T, x.device)
        if bias is None:
            mask = ~allowed  # torch's boolean convention: True marks what may NOT be seen
        else:
            mask = bias.to(x.dtype).masked_fill(~allowed, float("-inf"))  # (H, T, S)
            mask = mask.expand(B, -1, -1, -1).reshape(B * self.heads, T, S)  # (B * H, T, S), batch-major
        y, weights = self.mha(x, context, context, attn_mask=mask, need_weights=self.keep_weights,
                              average_attn_weights=False)  # weights (B, H, T, S) or None
        if self.keep_weights:
            self.weights = weights.detach()
        return self.resid_dropout(y)
