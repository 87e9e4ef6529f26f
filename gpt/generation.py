"""Autoregressive decoding: sampling rules and the KV-cached loop. No Lightning here."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from unittest import mock

import torch
from torch.nn import functional as F

from gpt.model import GPT


def check_sampling(temperature: float, top_k: int | None, top_p: float | None, max_new_tokens: int) -> None:
    """Refuse settings a user can get wrong, naming the fix."""
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be 0 or more")
    if temperature < 0:
        raise ValueError(f"temperature={temperature} must be >= 0 (0 means greedy)")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k={top_k} must be at least 1")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p={top_p} must be in (0, 1]")


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Last-position logits (B, V) -> next token ids (B, 1). temperature=0 is greedy (argmax)."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits.float() / temperature
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
           stop_token: int | None = None, generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
    """Yield each new token batch (B, 1) as soon as it is chosen.

    The context is the last block_size tokens, so decoding runs past block_size. Once the cache is
    full the window slides: the cache is refilled from the cropped window, which is exactly what the
    uncached model sees, so both paths choose the same tokens. Until then a cached step feeds the
    model only the new token: no copy of the context, and no host sync unless a stop token is set."""
    check_sampling(temperature, top_k, top_p, max_new_tokens)
    if max_new_tokens == 0:
        return
    block_size = model.cfg.block_size
    context = idx[:, -block_size:]
    caches = model.new_caches(idx.shape[0]) if use_cache else None
    logits = model(context, caches)[:, -1]
    unseen: list[torch.Tensor] = []  # tokens the cache holds but `context` does not yet: joined only if it slides
    finished = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
    for step in range(max_new_tokens):
        token = sample_next(logits, temperature, top_k, top_p, generator)  # (B, 1)
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


# Inductor's `decompose_mm_pass` writes a multiply of a few rows (a decode step's batch) as an elementwise
# product and a sum, which it fuses with the norms and activations beside it, instead of calling a BLAS kernel
# built for big matrices that costs more per call than this model's layer computes. On the 2-core dev CPU it
# cut a compiled decode step of the 4x4x128 model from 0.43 to 0.32 ms at batch 1; frozen weights and
# max_autotune, tried with it, gained nothing.
DECODE_INDUCTOR_OPTIONS = {"post_grad_fusion_options": {"decompose_mm_pass": {}}}
DECODE_MAX_ROWS_DECOMPOSED = 8  # inductor's own CPU limit is 1 row; batch 8 measured faster decomposed too


def _decode_backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    """Inductor with DECODE_INDUCTOR_OPTIONS. Inductor decomposes CPU multiplies of one row only, a limit
    kept in a module variable rather than its config, so it is raised here for this compile alone."""
    # Imported here: inductor takes seconds to import, and only compiling needs it.
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.fx_passes import decompose_mem_bound_mm

    with mock.patch.object(decompose_mem_bound_mm, "cpu_max_first_dimension_decomposition",
                           DECODE_MAX_ROWS_DECOMPOSED):
        return compile_fx(graph, example_inputs, config_patches=DECODE_INDUCTOR_OPTIONS)


def compile_for_decoding(model: GPT) -> GPT:
    """`model` through torch.compile for sampling. Per-token Python and kernel-call overhead is most of a tiny
    model's decode step, and this removes most of it. Shapes start static (the batch stays so, which the
    decomposition above needs) and the cache length turns dynamic at its first change, so the compiles are one
    for the prompt, one for the first step and one for every later step (tens of seconds on a small CPU), not
    one per length."""
    return torch.compile(model, backend=_decode_backend)


def generate(model: GPT, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, use_cache: bool = True,
             stop_token: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Prompt ids (B, T) -> (B, T + new); new < max_new_tokens only when every row hit stop_token.

    Ids in, ids out, nothing added: a line-based model (the calculator) expects its prompt to start after a
    newline token and says it is done with one, so pass stop_token; `gpt.load(path).complete(text)` does both."""
    new = list(stream(model, idx, max_new_tokens, temperature, top_k, top_p, use_cache, stop_token, generator))
    return torch.cat([idx, *new], dim=1)
