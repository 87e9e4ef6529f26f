"""Position-wise feed-forward networks."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class GeluMLP(nn.Module):
    """GPT-2's MLP: expand, GELU, project back."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, hidden, bias=bias)
        self.proj = nn.Linear(hidden, dim, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x), approximate="tanh")))


MLP: dict[str, type[nn.Module]] = {"gelu": GeluMLP}
