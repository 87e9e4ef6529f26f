"""The teaching forms of self-attention, simplest first: no weights at all, one trainable head, and
multi-head attention as a list of independent heads (as in Raschka's "Build a LLM from scratch")."""
from __future__ import annotations

import torch
from torch import nn

from gpt.model.attention.base import Attention, KVCache
from gpt.model.config import ModelConfig
from gpt.model.positional import Positional


class WeightlessAttention(Attention):
    """Each position's output is a softmax-weighted average of the inputs themselves, weighted by
    their dot products with it: queries, keys and values are the inputs, nothing is learned."""

    def __init__(self, dim: int, dropout: float = 0.0, qk_norm: bool = False, norm_eps: float = 1e-5,
                 kernel: str = "math") -> None:
        super().__init__(1, 1, dim, dropout, qk_norm, norm_eps, kernel)
        self.proj = nn.Identity()

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> WeightlessAttention:
        return cls(cfg.dim, cfg.dropout, cfg.qk_norm, cfg.norm_eps, cfg.kernel)

    @classmethod
    def rotated(cls, cfg: ModelConfig) -> tuple[int, str, str]:
        return cfg.dim, "dim", "change model.dim"

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = x.unsqueeze(1)  # (B, 1, T, C): one head as wide as the model
        return x, x, x


class Head(Attention):
    """One causal attention head of width head_dim with its own query/key/value projections.
    As head `index` of `of` heads it takes that head's share of a score bias (ALiBi slopes)."""

    def __init__(self, dim: int, head_dim: int, dropout: float = 0.0, bias: bool = False, qk_norm: bool = False,
                 index: int = 0, of: int = 1, norm_eps: float = 1e-5, kernel: str = "math") -> None:
        super().__init__(1, 1, head_dim, dropout, qk_norm, norm_eps, kernel)
        self.index, self.of = index, of
        self.query = nn.Linear(dim, head_dim, bias=bias)
        self.key = nn.Linear(dim, head_dim, bias=bias)
        self.value = nn.Linear(dim, head_dim, bias=bias)
        self.proj = nn.Identity()  # a head returns its own values; whoever combines heads projects
        self.resid_dropout = nn.Identity()

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # (B, T, D) -> (B, 1, T, D): a single head
        return self.query(x).unsqueeze(1), self.key(x).unsqueeze(1), self.value(x).unsqueeze(1)

    def score_bias(self, pos: Positional, q_len: int, k_len: int, offset: int,
                   device: torch.device) -> torch.Tensor | None:
        bias = pos.score_bias(q_len, k_len, offset, self.of, device)
        return None if bias is None else bias[self.index:self.index + 1]  # (1, T, S)


class SingleHeadAttention(Head):
    """One head as wide as the model, trainable projections, dropout on the attention weights."""

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> SingleHeadAttention:
        return cls(cfg.dim, cfg.dim, cfg.dropout, cfg.bias, cfg.qk_norm, norm_eps=cfg.norm_eps, kernel=cfg.kernel)

    @classmethod
    def rotated(cls, cfg: ModelConfig) -> tuple[int, str, str]:
        return cfg.dim, "dim", "change model.dim"


class HeadCaches(list):
    """One KV cache per independent head, read as one cache by the model and the decode loop."""

    @property
    def batch(self) -> int:
        return self[0].batch

    @property
    def length(self) -> int:
        return self[0].length

    @property
    def form(self) -> str:
        return f"HeadCaches({len(self)} x {self[0].form})"

    def reset(self) -> None:
        for cache in self:
            cache.reset()


class MultiHeadWrapper(nn.Module):
    """Multi-head attention as `heads` independent single-head modules run side by side, their
    outputs concatenated and projected: the same function as `mha`, spelled the slow, obvious way."""

    has_weights = True
    own_settings: tuple[str, ...] = ()  # as mha, it reads none of the settings unset by default

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, bias: bool = False,
                 qk_norm: bool = False, norm_eps: float = 1e-5, kernel: str = "math") -> None:
        super().__init__()
        self.keep_weights = False
        self.weights: torch.Tensor | None = None
        self.heads = nn.ModuleList(Head(dim, dim // heads, dropout, bias, qk_norm, i, heads, norm_eps, kernel)
                                   for i in range(heads))
        self.proj = nn.Linear(dim, dim, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> MultiHeadWrapper:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, cfg.norm_eps, cfg.kernel)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        Attention.validate(cfg)

    @classmethod
    def rotated(cls, cfg: ModelConfig) -> tuple[int, str, str]:
        return Attention.rotated(cfg)

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> HeadCaches:
        return HeadCaches(head.new_cache(batch, max_len, device, dtype) for head in self.heads)

    def cache_bytes(self, batch: int, positions: int, element_size: int) -> int:
        return sum(head.cache_bytes(batch, positions, element_size) for head in self.heads)

    def forward(self, x: torch.Tensor, pos: Positional, cache: list[KVCache] | None = None) -> torch.Tensor:
        outputs = []
        for i, head in enumerate(self.heads):
            head.keep_weights = self.keep_weights
            outputs.append(head(x, pos, cache[i] if cache is not None else None))  # (B, T, D)
        if self.keep_weights:
            self.weights = torch.cat([head.weights for head in self.heads], dim=1)  # (B, H, T, S)
        return self.resid_dropout(self.proj(torch.cat(outputs, dim=-1)))  # (B, T, H * D) -> (B, T, C)
