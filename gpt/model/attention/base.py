"""What every attention variant shares: the causal mask, the preallocated KV cache and `Attention`, the
project -> rotate -> cache -> attend -> project-back pipeline whose `attend` is softmax attention written out.

Every variant maps (B, T, C) -> (B, T, C), takes the model's positional encoding (which may rotate
queries/keys or bias scores) and an optional cache from `new_cache`; its output projection into the
residual stream is named `proj` so the model can scale its init by depth."""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from gpt.model.config import ModelConfig
from gpt.model.norm import RMSNorm
from gpt.model.positional import Positional


def causal_mask(q_len: int, k_len: int, start: int, device: torch.device) -> torch.Tensor:
    """(q_len, k_len) bool, True where query start+i may see key j (j <= start+i)."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=start)


class KVCache:
    """Preallocated key/value buffers of one layer; `append` writes in place, so decoding one token
    costs no reallocation. Values may be wider or narrower than keys (MLA caches a latent there)."""

    def __init__(self, batch: int, heads: int, max_len: int, head_dim: int,
                 device: torch.device, dtype: torch.dtype, value_dim: int | None = None) -> None:
        self.k = torch.zeros(batch, heads, max_len, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros(batch, heads, max_len, value_dim or head_dim, device=device, dtype=dtype)
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


class Attention(nn.Module):
    """What the softmax variants share: project, rotate, cache, attend, project back. A variant
    supplies `project` (and a `proj`); `attend` below is the maths they all compute."""

    # False for variants whose ordinary forward never forms the (T, S) weight matrix; with keep_weights
    # every variant computes it (or, for linear attention, its implied weights) the explicit way.
    has_weights = True

    def __init__(self, heads: int, kv_heads: int, head_dim: int, dropout: float = 0.0,
                 qk_norm: bool = False, norm_eps: float = 1e-5) -> None:
        super().__init__()
        self.keep_weights = False  # when True, forward stores its attention weights (B, H, T, S) in .weights
        self.weights: torch.Tensor | None = None
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        # QK-norm (Henry et al. 2020; Dehghani et al. 2023) bounds the logits, which steadies training.
        self.q_norm = RMSNorm(head_dim, norm_eps) if qk_norm else nn.Identity()
        self.k_norm = RMSNorm(head_dim, norm_eps) if qk_norm else nn.Identity()
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        """Raise ValueError naming the fix when cfg's parameters or positional encoding do not suit this variant."""

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> KVCache:
        return KVCache(batch, self.kv_heads, max_len, self.head_dim, device, dtype)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, T, C) -> queries (B, H, T, D), keys and values (B, H_kv, T, D)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, pos: Positional, cache: KVCache | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        start = cache.length if cache is not None else 0
        q, k, v = self.project(x)
        q, k = pos.rotate(self.q_norm(q), self.k_norm(k), start)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H_kv, S, D): every key up to and including this chunk's
        y = self.attend(q, k, v, pos)  # (B, H, T, D)
        y = y.transpose(1, 2).reshape(B, T, -1)  # (B, T, H * D)
        return self.resid_dropout(self.proj(y))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: Positional) -> torch.Tensor:
        """softmax(q k^T / sqrt(D) + bias, causal) v for queries (B, H, T, D), keys/values (B, H_kv, S, D)."""
        T, S = q.shape[2], k.shape[2]
        # Compiled, the maths below fuses with the layers around it into a few loops: a decode step of the
        # 4x4x128 model ran 1.2-1.3x faster so than through torch's fused kernel for one query.
        if T == 1 and self.decoding() and not torch.compiler.is_compiling():
            return self.attend_newest(q, k, v, pos)
        offset = S - T  # keys end where the queries end, so query i sits at key position offset + i
        if k.shape[1] != q.shape[1]:  # grouped keys/values: each serves heads // kv_heads query heads
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (B, H, S, D)
            v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)  # (B, H, S, D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, S)
        bias = self.score_bias(pos, T, S, offset, q.device)
        if bias is not None:
            scores = scores + bias.to(scores.dtype)
        scores = scores.masked_fill(~self.mask(T, S, offset, q.device), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        if self.keep_weights:
            self.weights = weights.detach()
        return self.attn_dropout(weights) @ v  # (B, H, T, D)

    def decoding(self) -> bool:
        """True when no weights are kept and no dropout applies: the fused kernel may then stand in."""
        return not self.keep_weights and not (self.training and self.attn_dropout.p > 0)

    def attend_newest(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: Positional) -> torch.Tensor:
        """`attend` for one query (B, H, 1, D) at the newest position, the KV-cached decode step. Causality
        hides no cached key from it, so torch's fused kernel needs a mask only for a score bias (ALiBi) or a
        variant's own limit (a window); the maths is `attend`'s, in one call instead of ten."""
        S = k.shape[2]
        mask = self.newest_mask(S, q.device)  # (1, S) or None
        bias = self.score_bias(pos, 1, S, S - 1, q.device)  # (H, 1, S) or None
        if bias is not None:
            mask = bias.to(q.dtype) if mask is None else bias.to(q.dtype).masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=k.shape[1] != q.shape[1])

    def newest_mask(self, k_len: int, device: torch.device) -> torch.Tensor | None:
        """Which of k_len keys the newest position may see, or None for all of them (plain causality)."""
        return None

    def score_bias(self, pos: Positional, q_len: int, k_len: int, offset: int,
                   device: torch.device) -> torch.Tensor | None:
        return pos.score_bias(q_len, k_len, offset, self.heads, device)

    def mask(self, q_len: int, k_len: int, offset: int, device: torch.device) -> torch.Tensor:
        # Looked up at call time so a test can swap in a leaky mask and see causality tests fail.
        return causal_mask(q_len, k_len, offset, device)

