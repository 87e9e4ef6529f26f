"""Multi-head latent attention (DeepSeek-V2, 2024): keys and values are rebuilt from one low-rank
latent per position, so the cache holds that latent (plus one small rotary key) instead of every
head's keys and values."""
from __future__ import annotations

import torch
from torch import nn

from gpt.model.attention.base import Attention, KVCache
from gpt.model.config import ModelConfig
from gpt.model.positional import Positional


class MultiHeadLatentAttention(Attention):
    """Queries as usual; keys/values up-projected from a `latent_dim` latent. Position enters through
    a decoupled part: each query head carries `rope_dim` extra features and all heads share one
    extra key of that width, rotated once and cached, so the latent itself stays position-free."""

    def __init__(self, dim: int, heads: int, latent_dim: int, dropout: float = 0.0, bias: bool = False,
                 qk_norm: bool = False, norm_eps: float = 1e-5) -> None:
        super().__init__(heads, heads, dim // heads, dropout, qk_norm, norm_eps)
        self.rope_dim = max(2, self.head_dim // 4 * 2)  # half a head, kept even for RoPE's feature pairs
        self.query = nn.Linear(dim, heads * (self.head_dim + self.rope_dim), bias=bias)
        self.down = nn.Linear(dim, latent_dim, bias=bias)
        self.key_rope = nn.Linear(dim, self.rope_dim, bias=bias)
        self.key_up = nn.Linear(latent_dim, dim, bias=bias)
        self.value_up = nn.Linear(latent_dim, dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> MultiHeadLatentAttention:
        return cls(cfg.dim, cfg.heads, cfg.kv_latent_dim, cfg.dropout, cfg.bias, cfg.qk_norm, cfg.norm_eps)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if cfg.kv_latent_dim < 1:
            raise ValueError(f"kv_latent_dim={cfg.kv_latent_dim} must be a positive integer: set model.kv_latent_dim")

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> KVCache:
        # The "keys" slot holds the shared rotary key, the "values" slot the latent.
        return KVCache(batch, 1, max_len, self.rope_dim, device, dtype, value_dim=self.down.out_features)

    def forward(self, x: torch.Tensor, pos: Positional, cache: KVCache | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        H, D, R = self.heads, self.head_dim, self.rope_dim
        start = cache.length if cache is not None else 0
        q = self.query(x).view(B, T, H, D + R).transpose(1, 2)  # (B, H, T, D + R)
        q_content, q_rope = q.split([D, R], dim=-1)  # (B, H, T, D), (B, H, T, R)
        latent = self.down(x).unsqueeze(1)  # (B, 1, T, L)
        k_rope = self.key_rope(x).unsqueeze(1)  # (B, 1, T, R): one rotary key for all heads
        q_rope, k_rope = pos.rotate(q_rope, k_rope, start)
        if cache is not None:
            k_rope, latent = cache.append(k_rope, latent)  # (B, 1, S, R), (B, 1, S, L)
        S = latent.shape[2]
        k_content = self.key_up(latent.squeeze(1)).view(B, S, H, D).transpose(1, 2)  # (B, H, S, D)
        v = self.value_up(latent.squeeze(1)).view(B, S, H, D).transpose(1, 2)  # (B, H, S, D)
        q = torch.cat([self.q_norm(q_content), q_rope], dim=-1)  # (B, H, T, D + R)
        k = torch.cat([self.k_norm(k_content), k_rope.expand(B, H, S, R)], dim=-1)  # (B, H, S, D + R)
        y = self.attend(q, k, v, pos).transpose(1, 2).reshape(B, T, H * D)  # (B, H, T, D) -> (B, T, C)
        return self.resid_dropout(self.proj(y))
