"""Positional encodings. Each one acts where it belongs: added to the token embeddings (absolute),
rotating queries and keys (RoPE, Su et al. 2021), or biasing attention scores; `start` is the
absolute position of the first token, which is how they stay correct with a KV cache."""
from __future__ import annotations

import torch
from torch import nn

from gpt.config import ModelConfig


class Positional(nn.Module):
    """No positional information: the base every encoding overrides where it acts."""

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> Positional:
        return cls()

    def embed(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """Token embeddings (B, T, C) -> embeddings with absolute positions added."""
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries (B, H, T, D) and keys (B, H_kv, T, D) of positions start..start+T-1."""
        return q, k

    def score_bias(self, q_len: int, k_len: int, start: int) -> torch.Tensor | None:
        """An additive (H, q_len, k_len) bias on attention scores, or None."""
        return None


class LearnedPositional(Positional):
    """GPT-2's learned absolute position embeddings."""

    def __init__(self, block_size: int, dim: int) -> None:
        super().__init__()
        self.table = nn.Embedding(block_size, dim)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> LearnedPositional:
        return cls(cfg.block_size, cfg.dim)

    def embed(self, x: torch.Tensor, start: int) -> torch.Tensor:
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        return x + self.table(positions)


class RotaryPositional(Positional):
    """RoPE: rotate each feature pair (i, i + D/2) of queries and keys by a position-dependent angle,
    so that q.k depends only on the distance between positions."""

    def __init__(self, head_dim: int, block_size: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got head_dim={head_dim}: change model.dim or model.heads")
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(block_size).float(), inv_freq)  # (block_size, D/2)
        angles = torch.cat([angles, angles], dim=-1)  # (block_size, D)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> RotaryPositional:
        return cls(cfg.head_dim, cfg.block_size, cfg.rope_base)

    def _rotate_half_pairs(self, x: torch.Tensor, start: int) -> torch.Tensor:
        T = x.shape[-2]
        cos = self.cos[start:start + T].to(x.dtype)  # (T, D)
        sin = self.sin[start:start + T].to(x.dtype)
        first, second = x.chunk(2, dim=-1)
        rotated = torch.cat([-second, first], dim=-1)
        return x * cos + rotated * sin

    def rotate(self, q: torch.Tensor, k: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._rotate_half_pairs(q, start), self._rotate_half_pairs(k, start)


POSITIONAL: dict[str, type[Positional]] = {
    "none": Positional,
    "learned": LearnedPositional,
    "rope": RotaryPositional,
}
