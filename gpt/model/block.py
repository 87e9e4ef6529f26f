"""A pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""
from __future__ import annotations

import torch
from torch import nn

from gpt.model.attention import ATTENTION
from gpt.model.attention.base import Cache
from gpt.model.config import ModelConfig
from gpt.model.mlp import MLP
from gpt.model.norm import NORM
from gpt.model.positional import Positional


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = NORM[cfg.norm](cfg.dim, cfg.norm_eps, cfg.bias)
        self.attn = ATTENTION[cfg.attention].from_config(cfg)
        self.mlp_norm = NORM[cfg.norm](cfg.dim, cfg.norm_eps, cfg.bias)
        self.mlp = MLP[cfg.mlp](cfg.dim, int(cfg.mlp_ratio * cfg.dim), cfg.dropout, cfg.bias)

    def forward(self, x: torch.Tensor, pos: Positional, cache: Cache | None = None) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), pos, cache)
        return x + self.mlp(self.mlp_norm(x))
