"""Multi-head attention (Vaswani et al. 2017), the reference every other variant is proven equal to, and the
same maths with one fused query/key/value projection (GPT-2's layout)."""
from __future__ import annotations

import torch
from torch import nn

from gpt.model.attention.base import Attention
from gpt.model.config import ModelConfig


class MultiHeadAttention(Attention):
    """Vaswani et al. (2017) multi-head attention with separate query, key and value projections
    viewed into heads; the reference the other variants match. With kv_heads < heads it is
    grouped-query attention (the `gqa` and `mqa` entries)."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, bias: bool = False,
                 qk_norm: bool = False, kv_heads: int | None = None, norm_eps: float = 1e-5,
                 kernel: str = "math") -> None:
        kv_heads = kv_heads or heads
        super().__init__(heads, kv_heads, dim // heads, dropout, qk_norm, norm_eps, kernel)
        self.query = nn.Linear(dim, dim, bias=bias)
        self.key = nn.Linear(dim, kv_heads * self.head_dim, bias=bias)
        self.value = nn.Linear(dim, kv_heads * self.head_dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> MultiHeadAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, norm_eps=cfg.norm_eps, kernel=cfg.kernel)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, T, _ = x.shape
        # Head widths as the projections give them (linear attention narrows queries and keys).
        q = self.query(x).view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, D)
        k = self.key(x).view(B, T, self.kv_heads, -1).transpose(1, 2)  # (B, H_kv, T, D)
        v = self.value(x).view(B, T, self.kv_heads, -1).transpose(1, 2)  # (B, H_kv, T, D)
        return q, k, v


class FusedMultiHeadAttention(Attention):
    """One (C -> 3C) matrix multiply gives queries, keys and values at once, then a view into heads."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, bias: bool = False, qk_norm: bool = False,
                 norm_eps: float = 1e-5, kernel: str = "math") -> None:
        super().__init__(heads, heads, dim // heads, dropout, qk_norm, norm_eps, kernel)
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> FusedMultiHeadAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, cfg.norm_eps, cfg.kernel)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # Split along the channels, then a view per tensor: backward joins the three gradients with one
        # concatenation, where unbinding a (3, B, H, T, D) view stacks them and then copies them into place.
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # each (B, T, C)
        return tuple(t.view(B, T, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
