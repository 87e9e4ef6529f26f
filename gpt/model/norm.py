"""Normalisation layers: RMSNorm (Zhang & Sennrich, 2019) and LayerNorm for comparison."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    """Scale by the root mean square; no mean subtraction and no bias."""

    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = False) -> None:
        # `bias` only keeps one signature for every norm: RMSNorm's point is no centring and no shift.
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in float32 so bf16 activations do not lose the small variances; torch's rms_norm is
        # x * rsqrt(mean(x^2) + eps) in one call rather than five.
        normed = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return normed.type_as(x) * self.weight


class LayerNorm(nn.LayerNorm):
    """torch's LayerNorm with the (dim, eps, bias) signature every norm here shares; a shift only with
    bias, as the linear layers (model.bias), so bias=false is nanoGPT's and bias=true GPT-2's."""

    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = False) -> None:
        super().__init__(dim, eps=eps, bias=bias)


NORM: dict[str, type[nn.Module]] = {"rmsnorm": RMSNorm, "layernorm": LayerNorm}
