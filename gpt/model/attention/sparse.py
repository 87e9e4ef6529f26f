"""Attention that stores less: grouped-query attention (Ainslie et al. 2023) and multi-query
attention (Shazeer 2019) share key/value heads between query heads; sliding-window attention
(Beltagy et al. 2020; Mistral 2023) sees only the last `window` positions and caches only those."""
from __future__ import annotations

import torch

from gpt.model.attention.mha import MultiHeadAttention
from gpt.model.config import ModelConfig


class GroupedQueryAttention(MultiHeadAttention):
    """`kv_heads` key/value heads, each shared by heads // kv_heads query heads: a cache that many
    times smaller. kv_heads == heads is `mha`; kv_heads == 1 is `mqa`."""

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> GroupedQueryAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, kv_heads=cfg.kv_heads,
                   norm_eps=cfg.norm_eps)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if cfg.kv_heads < 1 or cfg.heads % cfg.kv_heads:
            raise ValueError(f"kv_heads={cfg.kv_heads} must divide heads={cfg.heads}: pick model.kv_heads from "
                             f"{[h for h in range(1, cfg.heads + 1) if cfg.heads % h == 0]}")


class MultiQueryAttention(MultiHeadAttention):
    """One key/value head shared by every query head."""

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> MultiQueryAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, kv_heads=1, norm_eps=cfg.norm_eps)


class WindowCache:
    """A rolling cache of the last window - 1 positions' keys/values: all that a later query sees
    besides its own. `length` still counts every position seen, which is where the next one sits."""

    def __init__(self, batch: int, heads: int, window: int, head_dim: int,
                 device: torch.device, dtype: torch.dtype) -> None:
        self.keep = window - 1
        self.k = torch.zeros(batch, heads, 0, head_dim, device=device, dtype=dtype)
        self.v = self.k
        self.length = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys/values (B, H, T, D) -> the kept ones followed by these (B, H, kept + T, D)."""
        k = torch.cat([self.k, k], dim=2)  # (B, H, S, D)
        v = torch.cat([self.v, v], dim=2)
        self.length += k.shape[2] - self.k.shape[2]
        S = k.shape[2]
        self.k, self.v = k[:, :, S - min(self.keep, S):], v[:, :, S - min(self.keep, S):]
        return k, v

    def reset(self) -> None:
        self.k, self.v, self.length = self.k[:, :, :0], self.v[:, :, :0], 0


class SlidingWindowAttention(MultiHeadAttention):
    """Each position attends to itself and the window - 1 positions before it."""

    def __init__(self, dim: int, heads: int, window: int, dropout: float = 0.0, bias: bool = False,
                 qk_norm: bool = False, norm_eps: float = 1e-5) -> None:
        super().__init__(dim, heads, dropout, bias, qk_norm, norm_eps=norm_eps)
        self.window = window

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> SlidingWindowAttention:
        return cls(cfg.dim, cfg.heads, cfg.window, cfg.dropout, cfg.bias, cfg.qk_norm, cfg.norm_eps)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if cfg.window < 1:
            raise ValueError(f"window={cfg.window} must be at least 1 (a position always sees itself): "
                             "set model.window")

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> WindowCache:
        return WindowCache(batch, self.kv_heads, self.window, self.head_dim, device, dtype)

    def newest_mask(self, k_len: int, device: torch.device) -> torch.Tensor | None:
        # The window cache keeps at most window keys, all visible; a longer key list needs the window cut.
        return None if k_len <= self.window else self.mask(1, k_len, k_len - 1, device)

    def mask(self, q_len: int, k_len: int, offset: int, device: torch.device) -> torch.Tensor:
        # Causal, minus every key window or more positions back.
        return super().mask(q_len, k_len, offset, device) & ~super().mask(q_len, k_len, offset - self.window, device)
