"""Attention maps: a grid of heatmaps (layer x head) of a model's attention over token ids, labelled with the tokens.
Built on matplotlib's Figure directly (no pyplot state), so it draws on headless machines."""
from __future__ import annotations

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from gpt.data.tokenizers.base import Tokenizer
from gpt.model.attention.base import Attention
from gpt.model.gpt import GPT

# A grey no viridis weight has: a key the query may not see must not pass for one it sees and gives weight 0.
HIDDEN = "#d0d0d0"


def token_label(text: str) -> str:
    """A token as a readable tick label: whitespace made visible (a space as ␣, which repr leaves blank)."""
    return repr(text)[1:-1].replace(" ", "\u2423") if not text.strip() else text


def attention_parts(attn: torch.nn.Module) -> list[Attention]:
    """The Attention modules that form a block's weights: the block's own, or each head of a multi-head wrapper."""
    return [m for m in attn.modules() if isinstance(m, Attention)]


def visible_keys(model: GPT, T: int) -> torch.Tensor:
    """Which keys each of T queries may see, (T, T) bool. Every layer uses the same variant, so the first layer's
    mask holds for all."""
    return attention_parts(model.blocks[0].attn)[0].mask(T, T, 0, model.tok_emb.weight.device)


def attention_figure(maps: list[np.ndarray], labels: list[str], visible: np.ndarray) -> Figure:
    """One heatmap per layer (rows) and head (columns); `maps[layer]` is (H, T, T), query rows x key columns, and
    the keys a query may not see, False in `visible` (T, T), are drawn in the HIDDEN grey."""
    layers, heads, T = len(maps), maps[0].shape[0], len(labels)
    panel = max(2.5, 0.3 * T + 1.2)  # inches: room for T tick labels
    fig = Figure(figsize=(panel * heads, panel * layers), layout="constrained")
    axes = fig.subplots(layers, heads, squeeze=False)
    cmap = colormaps["viridis"].with_extremes(bad=HIDDEN)
    for layer, weights in enumerate(maps):
        for head in range(heads):
            ax = axes[layer, head]
            image = ax.imshow(np.ma.masked_array(weights[head], mask=~visible), vmin=0.0, vmax=1.0, cmap=cmap)
            ax.set_title(f"layer {layer} head {head}", fontsize="small")
            ax.set_xticks(range(T), labels, rotation=90, fontsize="x-small")
            ax.set_yticks(range(T), labels, fontsize="x-small")
    for ax in axes[-1]:
        ax.set_xlabel("key")
    for ax in axes[:, 0]:
        ax.set_ylabel("query")
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    fig.legend(handles=[Patch(facecolor=HIDDEN, edgecolor="0.5", label="hidden from the query (masked)")],
               loc="outside lower right", fontsize="small")
    return fig


def attention_map(model: GPT, ids: list[int], tokenizer: Tokenizer) -> Figure:
    """The attention of every layer and head of `model` over the token ids, drawn by `attention_figure`.
    Raises ValueError for ids longer than block_size."""
    # long even when empty: torch.tensor([[]]) is float, and the model would name the dtype, not the missing ids
    idx = torch.tensor([ids], dtype=torch.long, device=next(model.parameters()).device)  # (1, T)
    maps = [m[0].float().cpu().numpy() for m in model.attention_maps(idx)]  # per layer (H, T, T)
    return attention_figure(maps, [token_label(tokenizer.decode([i])) for i in ids],
                            visible_keys(model, len(ids)).cpu().numpy())
