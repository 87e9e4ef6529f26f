"""Loss past the trained length (Press et al. 2022, "Train Short, Test Long", ALiBi): a running-text model scored
on windows of several lengths, each position's loss averaged over the windows. An encoding with nothing learned
per position runs at any length (the model is rebuilt at the longer block with the same weights); learned positions
stop where their table does, and a length past it is refused with one line."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from gpt.model.gpt import GPT
from gpt.model.positional import POSITIONAL

POSITION_BINS = 64  # a length's per-position losses are kept as at most this many averages of neighbours


def longest(model: GPT) -> int | None:
    """The longest sequence the model's positions can place (None: any)."""
    return POSITIONAL[model.cfg.pos].longest(model.cfg)


def too_long(length: int, tokens: int | None) -> bool:
    """Whether `tokens` of text (None: unknown) hold no window of `length` + 1 tokens to score a length on."""
    return tokens is not None and tokens < length + 1


def check_length(model: GPT, length: int, tokens: int | None = None) -> None:
    """Refuse, in one line, a length the model's positions cannot place, or, given how many `tokens` the text
    scored holds, one that no window of length + 1 of them fits."""
    limit = longest(model)
    if limit is not None and length > limit:
        raise ValueError(f"length {length}: pos={model.cfg.pos} has learned positions for {limit} tokens only; "
                         f"evaluate at lengths up to {limit} (or train with model.random_positions={length})")
    if too_long(length, tokens):
        raise ValueError(f"length {length}: the validation text has only {tokens} tokens; evaluate at shorter "
                         "lengths")


def at_length(model: GPT, length: int) -> GPT:
    """The model, able to run `length` tokens: itself, or the same weights in a model whose block is `length`."""
    if length <= model.cfg.block_size:
        return model
    check_length(model, length)
    # Drawn positions only shape training, but the config requires their range to cover the block: widened to it
    # (a learned table keeps its size, since length stays within it), a rotary or sinusoidal model runs past it.
    drawn = model.cfg.random_positions and max(model.cfg.random_positions, length)
    longer = GPT(replace(model.cfg, block_size=length, random_positions=drawn)).to(next(model.parameters()).device)
    longer.load_state_dict(model.state_dict())
    return longer.eval()


@torch.no_grad()
def loss_by_position(model: GPT, ids: np.ndarray, length: int, windows: int = 128,
                     batch_size: int = 16) -> tuple[torch.Tensor, int]:
    """((length,) loss in nats at each position, averaged over windows; how many windows): up to `windows`
    windows of length + 1 tokens, evenly spread over `ids` without overlapping."""
    check_length(model, length, len(ids))
    count = min(windows, len(ids) // (length + 1))
    model = at_length(model, length)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    starts = np.linspace(0, len(ids) - length - 1, count).astype(np.int64)
    total = torch.zeros(length, dtype=torch.float64)
    for i in range(0, count, batch_size):
        rows = np.stack([np.asarray(ids[s:s + length + 1], dtype=np.int64) for s in starts[i:i + batch_size]])
        batch = torch.from_numpy(rows).to(device)  # (B, T + 1)
        logits = model(batch[:, :-1]).float()  # (B, T, V)
        losses = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")  # (B, T)
        total += losses.sum(0).double().cpu()
    model.train(was_training)
    return total / count, count


def binned(losses: torch.Tensor, bins: int = POSITION_BINS) -> tuple[list[float], int]:
    """Per-position losses as averages of `width` neighbours (at most `bins` of them) and that width."""
    width = -(-len(losses) // bins)
    return [float(losses[i:i + width].mean()) for i in range(0, len(losses), width)], width


def extrapolation(model: GPT, ids: np.ndarray, lengths: Sequence[int], windows: int = 128) -> dict[str, Any]:
    """summary.json's record of the model at each length it can run: mean loss, binned loss per position and
    windows scored; the lengths its positions cannot place, and why."""
    record: dict[str, Any] = {"trained": model.cfg.block_size, "lengths": {}}
    limit = longest(model)
    for length in sorted(lengths):
        if limit is not None and length > limit:
            record["refused"] = f"pos={model.cfg.pos} has learned positions for {limit} tokens only"
            continue
        losses, count = loss_by_position(model, ids, length, windows)
        by_position, width = binned(losses)
        record["lengths"][str(length)] = {"loss": float(losses.mean()), "by_position": by_position,
                                          "bin": width, "windows": count}
    return record
