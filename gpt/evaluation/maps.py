"""Attention maps: a grid of heatmaps (layer x head) of a model's attention over token ids, labelled with the tokens.
Built on matplotlib's Figure directly (no pyplot state), so it draws on headless machines."""
from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from gpt.data.tokenizers import Tokenizer
from gpt.model.gpt import GPT


def token_label(text: str) -> str:
    """A token as a readable tick label: whitespace made visible (a space as ␣, which repr leaves blank)."""
    return repr(text)[1:-1].replace(" ", "\u2423") if not text.strip() else text


def attention_figure(maps: list[np.ndarray], labels: list[str]) -> Figure:
    """One heatmap per layer (rows) and head (columns); `maps[layer]` is (H, T, T), query rows x key columns."""
    layers, heads, T = len(maps), maps[0].shape[0], len(labels)
    panel = max(2.5, 0.3 * T + 1.2)  # inches: room for T tick labels
    fig = Figure(figsize=(panel * heads, panel * layers), layout="constrained")
    axes = fig.subplots(layers, heads, squeeze=False)
    for layer, weights in enumerate(maps):
        for head in range(heads):
            ax = axes[layer, head]
            image = ax.imshow(weights[head], vmin=0.0, vmax=1.0, cmap="viridis")
            ax.set_title(f"layer {layer} head {head}", fontsize="small")
            ax.set_xticks(range(T), labels, rotation=90, fontsize="x-small")
            ax.set_yticks(range(T), labels, fontsize="x-small")
    for ax in axes[-1]:
        ax.set_xlabel("key")
    for ax in axes[:, 0]:
        ax.set_ylabel("query")
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    return fig


def attention_map(model: GPT, ids: list[int], tokenizer: Tokenizer) -> Figure:
    """The attention of every layer and head of `model` over the token ids, drawn by `attention_figure`.
    Raises ValueError for ids longer than block_size."""
    # long even when empty: torch.tensor([[]]) is float, and the model would name the dtype, not the missing ids
    idx = torch.tensor([ids], dtype=torch.long, device=next(model.parameters()).device)  # (1, T)
    maps = [m[0].float().cpu().numpy() for m in model.attention_maps(idx)]  # per layer (H, T, T)
    return attention_figure(maps, [token_label(tokenizer.decode([i])) for i in ids])
