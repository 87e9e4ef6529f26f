"""Causal self-attention variants behind one interface, and the KV cache they decode with.

Every variant maps (B, T, C) -> (B, T, C), takes the model's positional encoding (which may rotate
queries/keys or bias scores) and an optional cache from `new_cache`; its output projection into the
residual stream is named `proj` so the model can scale its init by depth."""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from gpt.config import ModelConfig
from gpt.positional import Positional


def causal_mask(q_len: int, k_len: int, start: int, device: torch.device) -> torch.Tensor:
    """(q_len, k_len) bool, True where query start+i may see key j (j <= start+i)."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=start)


class KVCache:
    """Preallocated key/value buffers of one layer; `append` writes in place, so decoding one token
    costs no reallocation."""

    def __init__(self, batch: int, heads: int, max_len: int, head_dim: int,
                 device: torch.device, dtype: torch.dtype) -> None:
        self.k = torch.zeros(batch, heads, max_len, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.length = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store keys/values (B, H, T, D) after those cached; return all of them (B, H, length, D)."""
        end = self.length + k.shape[2]
        if end > self.k.shape[2]:
            raise RuntimeError(f"KV cache overflow: {end} positions > capacity {self.k.shape[2]}")
        self.k[:, :, self.length:end] = k
        self.v[:, :, self.length:end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    def reset(self) -> None:
        self.length = 0


class MultiHeadAttention(nn.Module):
    """Vaswani et al. (2017) multi-head attention with separate query, key and value projections
    viewed into heads; written as the maths so it is the reference the other variants match."""

    has_weights = True  # variants that never form the (T, S) weight matrix set this False

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__()
        self.keep_weights = False  # when True, forward stores its attention weights (B, H, T, S) in .weights
        self.weights: torch.Tensor | None = None
        self.heads = heads
        self.head_dim = dim // heads
        self.query = nn.Linear(dim, dim, bias=bias)
        self.key = nn.Linear(dim, dim, bias=bias)
        self.value = nn.Linear(dim, dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> MultiHeadAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias)

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> KVCache:
        return KVCache(batch, self.heads, max_len, self.head_dim, device, dtype)

    def forward(self, x: torch.Tensor, pos: Positional, cache: KVCache | None = None) -> torch.Tensor:
        B, T, C = x.shape
        start = cache.length if cache is not None else 0
        q = self.query(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        k = self.key(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        v = self.value(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        q, k = pos.rotate(q, k, start)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, S, D), S = start + T
        S = k.shape[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, T, S)
        bias = pos.score_bias(T, S, start)
        if bias is not None:
            scores = scores + bias
        scores = scores.masked_fill(~causal_mask(T, S, start, x.device), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        if self.keep_weights:
            self.weights = weights.detach()
        weights = self.attn_dropout(weights)
        y = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, H, T, D) -> (B, T, C)
        return self.resid_dropout(self.proj(y))


ATTENTION: dict[str, type[nn.Module]] = {
    "mha": MultiHeadAttention,
}
