"""Compiled decoding (generate.py --compile): the one-token KV-cached step exported and compiled ahead of time by
AOTInductor, called with no Dynamo guards or Python graph wrapper; torch.compile where a step does not export."""
from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections.abc import Callable
from typing import Any
from unittest import mock

import torch
from torch import nn

from gpt.model.attention.base import Cache, KVCache
from gpt.model.gpt import GPT, claim_caches


# Inductor's `decompose_mm_pass` writes a multiply of a few rows (a decode step's batch) as an elementwise
# product and a sum, which it fuses with the norms and activations beside it, instead of calling a BLAS kernel
# built for big matrices that costs more per call than this model's layer computes. On the 2-core dev CPU it
# cut a compiled decode step of the 4x4x128 model from 0.43 to 0.32 ms at batch 1; frozen weights and
# max_autotune, tried with it, gained nothing.
DECODE_INDUCTOR_OPTIONS = {"post_grad_fusion_options": {"decompose_mm_pass": {}}}
DECODE_MAX_ROWS_DECOMPOSED = 8  # inductor's own CPU limit is 1 row; batch 8 measured faster decomposed too


def _decomposing_decode_rows() -> contextlib.AbstractContextManager:
    """Inductor decomposes CPU multiplies of one row only, a limit kept in a module variable rather than its
    config, so it is raised to DECODE_MAX_ROWS_DECOMPOSED while a decode step compiles."""
    # Imported here: inductor takes seconds to import, and only compiling needs it.
    from torch._inductor.fx_passes import decompose_mem_bound_mm

    return mock.patch.object(decompose_mem_bound_mm, "cpu_max_first_dimension_decomposition",
                             DECODE_MAX_ROWS_DECOMPOSED)


def _decode_backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """Inductor with DECODE_INDUCTOR_OPTIONS, for torch.compile."""
    from torch._inductor.compile_fx import compile_fx

    with _decomposing_decode_rows():
        return compile_fx(graph, example_inputs, config_patches=DECODE_INDUCTOR_OPTIONS)


class _CacheView(KVCache):
    """A KVCache over given buffers whose length is a traced size, for exporting the one-token step."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor, length: int) -> None:
        self.k, self.v, self.batch, self.length = k, v, k.shape[0], length


class _OneTokenStep(nn.Module):
    """(token (B, 1), positions (L,), every layer's k and v buffers) -> logits (B, V) of a cached decode step;
    the cached length L is a tensor's size, so one export serves every length."""

    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model

    def forward(self, token: torch.Tensor, positions: torch.Tensor, buffers: list[torch.Tensor]) -> torch.Tensor:
        length = positions.shape[0]
        caches = [_CacheView(k, v, length) for k, v in zip(buffers[::2], buffers[1::2])]
        return self.model(token, caches)[:, -1]


Step = Callable[[list[torch.Tensor]], list[torch.Tensor]]  # flat inputs -> flat outputs of a compiled step


class CompiledDecoding:
    """`model` compiled for sampling (generate.py --compile): called as the model is, by `stream`. Per-token
    Python and kernel-call overhead is most of a tiny model's decode step. For the caches of the softmax
    variants (KVCache) the one-token step is exported and compiled ahead of time by AOTInductor, once per
    batch size, into a shared library called with no Dynamo guards and no Python graph wrapper: on the 2-core
    dev CPU a batch-1 step of the 4x4x128 model took 0.42 ms through torch.compile (174 us of it the fused
    kernel, the rest guards and wrappers) and takes 0.18-0.25 ms so. The prompt (and a refill once the window
    slides) runs eagerly. Other caches (a window's, linear attention's state, per-head caches), and a step that
    does not export, go through torch.compile, whose cache length turns dynamic at its first change: one
    compile for the prompt, one for the first step and one for every later step, not one per length."""

    def __init__(self, model: GPT) -> None:
        self.model = model
        self.compiled = torch.compile(model, backend=_decode_backend)
        # batch size -> the compiled step, or None where it did not export
        self.steps: dict[int, Step | None] = {}
        self.positions = torch.empty(model.cfg.block_size, device=model.tok_emb.weight.device)

    def __getattr__(self, name: str) -> object:
        """Everything else is the model's (cfg, new_caches, parameters), as for a torch.compile'd module."""
        return getattr(self.__dict__["model"], name)

    def __call__(self, idx: torch.Tensor, caches: list[Cache] | None = None) -> torch.Tensor:
        if caches:  # as the model does, where the compiled step never reaches its forward
            claim_caches(caches, self.model, idx.shape[0])
        if not caches or not all(type(cache) is KVCache for cache in caches) or self.model.training \
                or self.cfg.block_size < 4:  # too short a context to export the step over a range of lengths
            return self.compiled(idx, caches)
        if idx.shape[1] != 1 or not 0 < caches[0].length <= self.cfg.block_size - 2:
            return self.model(idx, caches)  # the prompt, and the step that fills the cache (see _compile_step)
        batch = idx.shape[0]
        step = self.steps[batch] if batch in self.steps else self._compile_step(batch, caches)
        if step is None:  # the step did not export
            return self.compiled(idx, caches)
        buffers = [t for cache in caches for t in (cache.k, cache.v)]
        logits = step([idx, self.positions[:caches[0].length], *buffers])[0]  # writes k, v at the length
        for cache in caches:
            cache.length += 1
        return logits.unsqueeze(1)  # (B, 1, V)

    def _compile_step(self, batch: int, caches: list[KVCache]) -> Step | None:
        # Imported here: inductor takes seconds to import, and only compiling needs it.
        from torch._inductor import aoti_compile_and_package, aoti_load_package

        # Traced on zeroed stand-ins of the buffers at length 2 (a length of 1 would be specialised on).
        buffers = [torch.zeros_like(t) for cache in caches for t in (cache.k, cache.v)]
        example = (torch.zeros(batch, 1, dtype=torch.long, device=self.positions.device), self.positions[:2], buffers)
        # The step that fills the cache is left out: a slice that ends at the buffer's end is a special case.
        length = torch.export.Dim("length", min=1, max=self.cfg.block_size - 2)
        with torch.no_grad():
            # One eager step at the longest length first: state the model grows as it goes (RoPE's angle table, built
            # for twice a short prompt) would otherwise end inside the range, on a guard export refuses.
            _OneTokenStep(self.model)(example[0], self.positions[:self.cfg.block_size - 2], buffers)
        try:
            with torch.no_grad():
                exported = torch.export.export(_OneTokenStep(self.model), example,
                                               dynamic_shapes=({}, {0: length}, [{}] * len(buffers)))
        except Exception as err:  # noqa: BLE001 (export refuses code in many ways; torch.compile takes any)
            # No variant here is known to (tests/test_generation.py); a new one's code or another torch's export may
            # refuse. torch.compile decodes the same tokens, only slower.
            warnings.warn(f"the decode step did not export ({type(err).__name__}); compiling it with torch.compile")
            self.steps[batch] = None
            return None
        with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(), _decomposing_decode_rows():
            # torch's own packaging copies pytree specs through a check torch deprecates: not the user's to fix.
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
            package = aoti_compile_and_package(exported, package_path=f"{folder}/step.pt2",
                                               inductor_configs=DECODE_INDUCTOR_OPTIONS)
            # boxed_run takes the inputs flat, as (token, positions, buffers) flattens: the package's own
            # __call__ flattens and rebuilds the argument tree on every call, ~15% of a batch-1 step.
            self.steps[batch] = aoti_load_package(package).loader.boxed_run
        return self.steps[batch]


def compile_for_decoding(model: GPT) -> CompiledDecoding:
    """`model` compiled for sampling: see CompiledDecoding."""
    return CompiledDecoding(model)
