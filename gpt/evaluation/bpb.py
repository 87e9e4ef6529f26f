"""Bits per byte: the summed loss in bits over the UTF-8 bytes of the text predicted. Loss per token depends
on the tokenizer (a char model's and a BPE model's are not comparable); bits per byte does not."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.nn import functional as F

from gpt.data.tokenizers.base import Tokenizer
from gpt.model.gpt import GPT


def byte_counts(tokenizer: Tokenizer) -> torch.Tensor:
    """(vocab_size,) UTF-8 bytes of each token id: indexed by a batch's targets, the bytes it predicts."""
    return torch.tensor(tokenizer.token_bytes(), dtype=torch.long)


def bits_per_byte(nats: float | torch.Tensor, n_bytes: int | torch.Tensor) -> float | torch.Tensor:
    return nats / math.log(2) / n_bytes


@torch.no_grad()
def text_loss(model: GPT, ids: np.ndarray, token_bytes: torch.Tensor, batch_size: int = 64) -> tuple[float, float]:
    """(loss in nats per token, bits per byte) of `model` predicting every token of `ids` after the first once:
    consecutive windows of block_size + 1 tokens that share their edge token (the last may be shorter)."""
    block = model.cfg.block_size
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    nats, tokens, n_bytes = 0.0, 0, 0
    starts = list(range(0, len(ids) - 1, block))
    for i in range(0, len(starts), batch_size):
        rows = [torch.as_tensor(np.asarray(ids[s:s + block + 1], dtype=np.int64)) for s in starts[i:i + batch_size]]
        for length in sorted({len(r) for r in rows}):  # the short last window goes alone
            batch = torch.stack([r for r in rows if len(r) == length]).to(device)  # (B, T + 1)
            logits = model(batch[:, :-1])  # (B, T, V)
            nats += float(F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten(), reduction="sum"))
            tokens += batch[:, 1:].numel()
            n_bytes += int(token_bytes.to(device)[batch[:, 1:]].sum())
    model.train(was_training)
    return nats / tokens, bits_per_byte(nats, n_bytes)
