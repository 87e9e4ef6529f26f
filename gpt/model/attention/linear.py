"""Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): softmax(q.k) is
replaced by phi(q).phi(k) with the positive feature map phi = elu + 1, so the past folds into a
fixed-size state and generation needs constant memory per token."""
from __future__ import annotations

import torch
from torch.nn import functional as F

from gpt.model.attention.mha import MultiHeadAttention
from gpt.model.config import ModelConfig
from gpt.model.positional import POSITIONAL, Positional


class LinearState:
    """The recurrent state of one layer: sum of phi(k) v^T (B, H, D, D) and of phi(k) (B, H, D)."""

    def __init__(self, batch: int, heads: int, head_dim: int, device: torch.device, dtype: torch.dtype) -> None:
        self.kv = torch.zeros(batch, heads, head_dim, head_dim, device=device, dtype=dtype)
        self.k = torch.zeros(batch, heads, head_dim, device=device, dtype=dtype)
        self.length = 0

    def reset(self) -> None:
        self.kv.zero_()
        self.k.zero_()
        self.length = 0


class LinearAttention(MultiHeadAttention):
    """`mha`'s projections; output_i = sum_j<=i phi(q_i).phi(k_j) v_j / sum_j<=i phi(q_i).phi(k_j).
    A chunk of T new positions is computed in the parallel (masked T x T) form and added to what
    the state already holds; with T = 1 that is exactly the recurrent form. RoPE rotates phi(q) and
    phi(k) in the numerator only (as RoFormer does), so the normaliser stays positive. It never forms
    softmax weights; asked to keep weights, it keeps the implied ones, phi(q_i).phi(k_j) / normaliser_i,
    whose rows sum to 1 unless RoPE rotated the numerator."""

    has_weights = False

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> LinearAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, norm_eps=cfg.norm_eps)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if POSITIONAL[cfg.pos].biases_scores:
            raise ValueError(f"pos={cfg.pos} biases attention scores, which attention=linear never forms: "
                             "use pos=rope, learned, sinusoidal or none")

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> LinearState:
        return LinearState(batch, self.heads, self.head_dim, device, dtype)

    def forward(self, x: torch.Tensor, pos: Positional, cache: LinearState | None = None) -> torch.Tensor:
        B, T, C = x.shape
        start = cache.length if cache is not None else 0
        q, k, v = self.project(x)  # (B, H, T, D) each
        q, k = F.elu(self.q_norm(q)) + 1, F.elu(self.k_norm(k)) + 1  # positive features
        q_rot, k_rot = pos.rotate(q, k, start)
        allowed = self.mask(T, T, 0, x.device)  # (T, T): within the chunk
        products = (q_rot @ k_rot.transpose(-2, -1)).masked_fill(~allowed, 0.0)  # (B, H, T, T)
        numerator = products @ v  # (B, H, T, D)
        normaliser = (q @ k.transpose(-2, -1)).masked_fill(~allowed, 0.0).sum(-1)  # (B, H, T)
        if self.keep_weights:  # the implied weights: what multiplies each value within the chunk
            self.weights = (products / normaliser.unsqueeze(-1)).detach()
        if cache is not None:  # what earlier chunks left in the state
            numerator = numerator + q_rot @ cache.kv  # (B, H, T, D)
            normaliser = normaliser + (q * cache.k.unsqueeze(2)).sum(-1)  # (B, H, T)
            cache.kv = cache.kv + k_rot.transpose(-2, -1) @ v  # (B, H, D, D)
            cache.k = cache.k + k.sum(dim=2)  # (B, H, D)
            cache.length += T
        y = (numerator / normaliser.unsqueeze(-1)).transpose(1, 2).reshape(B, T, C)  # (B, H, T, D) -> (B, T, C)
        return self.resid_dropout(self.proj(y))
