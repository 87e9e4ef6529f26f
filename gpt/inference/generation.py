"""Autoregressive decoding: sampling rules and the KV-cached loop (gpt/inference/compiled.py compiles its step)."""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.nn import functional as F

from gpt.model.gpt import GPT, check_ids, outside_vocabulary
from gpt.validate import check_kind


def check_sampling(temperature: float, top_k: int | None, top_p: float | None, max_new_tokens: int,
                   choosable: int, greedy: str = "temperature=0 decodes greedily") -> None:
    """Refuse settings a user can get wrong, naming the fix; `choosable` is how many ids decoding chooses among, and
    `greedy` says why decoding is greedy where temperature is 0 (the text API names its corpus's default)."""
    # Types first: a wrong one failed later in Python or torch ("'<' not supported between NoneType and int",
    # range() or torch.topk of a float), naming neither the setting nor what it takes.
    check_kind("max_new_tokens", max_new_tokens, numbers.Integral)
    check_kind("temperature", temperature, numbers.Real)
    check_kind("top_k", top_k, numbers.Integral, optional=True)
    check_kind("top_p", top_p, numbers.Real, optional=True)
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be 0 or more")
    if not 0 <= temperature < math.inf:  # nan and inf too
        raise ValueError(f"temperature={temperature} must be a finite number >= 0 (0 means greedy)")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k={top_k} must be at least 1")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p={top_p} must be in (0, 1]")
    # Greedy decoding would ignore it, silently; one that keeps every id (top_p=1, top_k of them all) narrows nothing.
    narrowing = [f"{name}={value}" for name, value, every in (("top_k", top_k, choosable), ("top_p", top_p, 1))
                 if value is not None and value < every]
    if temperature == 0 and narrowing:
        raise ValueError(f"{narrowing[0]} narrows sampling, but {greedy}: pass a temperature > 0, such as 0.8")


def check_generator(generator: torch.Generator | None, model: GPT) -> None:
    """Refuse a generator that is not a torch.Generator, or is one on another device than the model's: torch's
    TypeError at the first sample (none at all under greedy decoding, which ignored it) or "Expected a 'cuda' device
    type for generator" named neither the setting nor the fix."""
    if generator is None:
        return
    device = next(model.parameters()).device.type
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator={generator!r} must be a torch.Generator: for a seed, pass "
                         f"generator=torch.Generator(device={device!r}).manual_seed(seed)")
    if generator.device.type != device:
        raise ValueError(f"the generator is on {generator.device.type} and the model on {device}: pass a "
                         f"torch.Generator(device={device!r})")


@contextmanager
def evaluating(model: GPT) -> Iterator[None]:
    """`model` in evaluation mode (no dropout, positions 0..T-1) while the block runs, then in its own again."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Last-position logits (B, V) -> next token ids (B, 1). temperature=0 is greedy (argmax)."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    # From the largest logit down, so a tiny temperature makes the others -inf rather than every logit inf (nan);
    # in float64, where a temperature such as 1e-300 is not 0.
    logits = logits.double()
    logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        sorted_probs = F.softmax(sorted_logits, dim=-1)
        # Drop a token when the tokens ranked above it already hold top_p of the mass; the top one always stays.
        drop_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs > top_p
        logits = logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    probs = F.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)


@torch.inference_mode()
def stream(model: GPT, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None, use_cache: bool = True,
           stop_token: int | None = None, generator: torch.Generator | None = None,
           vocab_size: int | None = None) -> Iterator[torch.Tensor]:
    """Yield each new token batch (B, 1) as soon as it is chosen; with `vocab_size`, only ids below it (a
    tokenizer with fewer ids than the embedding, padded to a round size, has no text for the ids past its own).

    The context is the last block_size tokens, so decoding runs past block_size. Once the cache is
    full the window slides: the cache is refilled from the cropped window, which is exactly what the
    uncached model sees, so both paths choose the same tokens. Until then a cached step feeds the
    model only the new token: no copy of the context, and no host sync unless a stop token is set. The model decodes
    in evaluation mode (no dropout) until the stream ends or is closed, then is back in its own."""
    if not hasattr(model, "cfg"):  # gpt.load's TextModel was "'TextModel' object has no attribute 'cfg'"
        raise ValueError(f"generate takes a GPT, not a {type(model).__name__}: pass the GPT (a TextModel's .model), or "
                         "call the TextModel's complete or stream with text")
    check_generator(generator, model)
    check_ids(idx)
    vocab = model.cfg.vocab_size
    # Checked once here, before any work: a forward on a GPU has no IndexError to turn into this line (gpt.py).
    if not (0 <= int(idx.min()) and int(idx.max()) < vocab):
        raise outside_vocabulary(idx, vocab)
    # 0 left no logit to choose from (torch's "Expected reduction dim -1 to have non-zero size"); more than the model
    # has kept nothing out, silently.
    if vocab_size is not None and not 1 <= vocab_size <= vocab:
        raise ValueError(f"vocab_size={vocab_size} must be in 1..{vocab}, this model's vocabulary: pass the "
                         "tokenizer's vocab_size, or None to choose among every id")
    check_kind("stop_token", stop_token, numbers.Integral, optional=True)
    # One that is never chosen never stopped decoding: it ran to max_new_tokens, silently.
    choosable = vocab if vocab_size is None else vocab_size
    if stop_token is not None and not 0 <= stop_token < choosable:
        raise ValueError(f"stop_token={stop_token} is no id this model can choose (0..{choosable - 1}): pass one of "
                         "its tokenizer's, such as tokenizer.eot_id or tokenizer.encode('\\n')[0]")
    check_sampling(temperature, top_k, top_p, max_new_tokens, choosable)
    if max_new_tokens == 0:
        return
    # In training mode dropout made a greedy answer differ from call to call (gpt.generate on a model being trained).
    with evaluating(model):
        block_size = model.cfg.block_size
        context = idx[:, -block_size:]
        caches = model.new_caches(idx.shape[0]) if use_cache else None
        logits = model(context, caches)[:, -1]
        unseen: list[torch.Tensor] = []  # tokens the cache holds but `context` does not yet: joined only if it slides
        finished = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
        for step in range(max_new_tokens):
            token = sample_next(logits[:, :vocab_size], temperature, top_k, top_p, generator)  # (B, 1)
            yield token
            if stop_token is not None:
                finished |= token[:, 0] == stop_token
                if bool(finished.all()):
                    return
            if step == max_new_tokens - 1:
                return
            if caches is not None and caches[0].length < block_size:
                unseen.append(token)
                logits = model(token, caches)[:, -1]
                continue
            context = torch.cat([context, *unseen, token], dim=1)[:, -block_size:]  # (B, <= block_size)
            unseen.clear()
            for cache in caches or ():
                cache.reset()
            logits = model(context, caches)[:, -1]


def generate(model: GPT, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, use_cache: bool = True,
             stop_token: int | None = None, generator: torch.Generator | None = None,
             vocab_size: int | None = None) -> torch.Tensor:
    """Prompt ids (B, T) -> (B, T + new); new < max_new_tokens only when every row hit stop_token; new ids are
    below `vocab_size` when it is given (see `stream`).

    Ids in, ids out, nothing added: a line-based model (the calculator) expects its prompt to start after a
    newline token and says it is done with one, so pass stop_token; `gpt.load(path).complete(text)` does both."""
    new = list(stream(model, idx, max_new_tokens, temperature, top_k, top_p, use_cache, stop_token, generator,
                      vocab_size))
    return torch.cat([idx, *new], dim=1)
