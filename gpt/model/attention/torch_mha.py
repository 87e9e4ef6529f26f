"""torch.nn.MultiheadAttention behind tinygpt's attention interface: torch's own projections and kernels."""
from __future__ import annotations

import torch
from torch import nn

from gpt.model.attention.base import Attention, KVCache
from gpt.model.config import ModelConfig
from gpt.model.positional import POSITIONAL, Positional


class TorchMultiheadAttention(Attention):
    """torch.nn.MultiheadAttention with a causal mask. It projects queries, keys and values inside,
    so RoPE and QK-norm cannot reach them, and its cache holds the block's inputs, not keys/values.
    Asked to keep weights, it has torch return them per head (torch's slower, written-out path); model.kernel
    does not reach inside torch either."""

    has_weights = False

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__(heads, heads, dim // heads, dropout)
        self.mha = nn.MultiheadAttention(dim, heads, dropout=dropout, bias=bias, batch_first=True)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> TorchMultiheadAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if POSITIONAL[cfg.pos].rotates:
            others = " or ".join(name for name, encoding in POSITIONAL.items() if not encoding.rotates)
            raise ValueError(f"attention=torch_mha projects queries/keys inside torch, where pos={cfg.pos} cannot "
                             f"rotate them: use pos={others}, or attention=mha")
        if cfg.qk_norm:
            raise ValueError("attention=torch_mha projects queries/keys inside torch, where model.qk_norm cannot "
                             "reach them: set model.qk_norm=false or use attention=mha")

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> KVCache:
        # The inputs stand in for both keys and values (torch projects them), so they are kept once.
        return KVCache(batch, 1, max_len, self.mha.embed_dim, device, dtype, value_dim=0)

    def cache_bytes(self, batch: int, positions: int, element_size: int) -> int:
        """One input vector of model width per position."""
        return batch * positions * self.mha.embed_dim * element_size

    def forward(self, x: torch.Tensor, pos: Positional, cache: KVCache | None = None) -> torch.Tensor:
        B, T, C = x.shape
        context = x
        if cache is not None:  # the inputs stand in for both keys and values: torch projects them
            context = cache.append(x.unsqueeze(1), x[:, None, :, :0])[0].squeeze(1)  # (B, S, C)
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
