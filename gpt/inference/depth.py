"""A model measured at depth: a prompt of `depth` tokens through the model with a cache (prefill), then greedy
cached steps (decode), with the process's peak memory during the prefill and the bytes the cache holds for the
prompt; for tinygpt's GPT and for a Hugging Face causal LM alike (an `Engine` adapts each)."""
from __future__ import annotations

import ctypes
import ctypes.util
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn


def tensor_bytes(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of every distinct tensor reachable from a cache object (attributes, lists, tuples, dicts)."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v, seen) for v in obj)
    if hasattr(obj, "__dict__"):
        return tensor_bytes(vars(obj), seen)
    return 0


def reset_peak_memory(device: torch.device) -> None:
    """Start counting peak memory from now: on CPU, first hand freed heap memory back to the system (glibc keeps
    it otherwise, and a later peak would not show as a rise), then reset the peak resident set size (Linux)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    libc = ctypes.util.find_library("c")
    if libc and sys.platform.startswith("linux"):
        ctypes.CDLL(libc).malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux: resets the peak resident set size (VmHWM)
    except OSError:
        pass  # elsewhere the peak is the process's since it started


def peak_memory_bytes(device: torch.device) -> int:
    """Peak memory since `reset_peak_memory`: allocated tensors on GPU, resident set size of the process on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # reported in kB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


class Engine:
    """A model as the measurement drives it: `prefill` a prompt into a new cache, `step` one token on."""

    name: str
    model: nn.Module

    def prefill(self, prompt: torch.Tensor, max_len: int) -> tuple[Any, torch.Tensor]:
        """Prompt ids (B, T) -> (the cache, the next greedy tokens (B, 1)); the cache may hold max_len positions."""
        raise NotImplementedError

    def step(self, token: torch.Tensor, cache: Any) -> torch.Tensor:
        """Feed tokens (B, 1) after the cached ones; return the next greedy tokens (B, 1)."""
        raise NotImplementedError

    def formula_bytes(self, batch: int, positions: int) -> int | None:
        """What the cache should hold for `positions` tokens by the variant's formula, or None if unknown."""
        return None

    def prompt_bytes(self, cache: Any, batch: int, positions: int) -> int:
        """Bytes of the cache's tensors for a prompt of `positions` tokens, asked right after its prefill: a cache
        that grows as tokens come holds just the prompt's then."""
        return tensor_bytes(cache)


class GPTEngine(Engine):
    def __init__(self, name: str, model: nn.Module) -> None:
        self.name, self.model = name, model

    def prefill(self, prompt: torch.Tensor, max_len: int) -> tuple[Any, torch.Tensor]:
        caches = self.model.new_caches(prompt.shape[0], max_len=max_len)
        return caches, self.model(prompt, caches)[:, -1:].argmax(-1)

    def step(self, token: torch.Tensor, cache: Any) -> torch.Tensor:
        return self.model(token, cache)[:, -1:].argmax(-1)

    def formula_bytes(self, batch: int, positions: int) -> int | None:
        return self.model.cache_bytes(batch, positions)

    def prompt_bytes(self, cache: Any, batch: int, positions: int) -> int:
        # Its caches are allocated whole when made, room for the decoded tokens included: one made for the prompt
        # alone holds what the prompt fills. On the meta device it takes no memory beside the measured cache's.
        return tensor_bytes(self.model.new_caches(batch, torch.device("meta"), max_len=positions))


class HFEngine(Engine):
    """A transformers causal LM with its own cache (a DynamicCache, grown as it goes)."""

    def __init__(self, name: str, model: nn.Module) -> None:
        self.name, self.model = name, model

    def prefill(self, prompt: torch.Tensor, max_len: int) -> tuple[Any, torch.Tensor]:
        out = self.model(input_ids=prompt, use_cache=True)
        return out.past_key_values, out.logits[:, -1:].argmax(-1)

    def step(self, token: torch.Tensor, cache: Any) -> torch.Tensor:
        return self.model(input_ids=token, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)


@dataclass
class Measure:
    prefill_s: float  # wall time
    decode_s: float
    prefill_cpu_s: float  # this process's CPU time: on a machine others share, what contention did not stretch
    decode_cpu_s: float
    peak_bytes: int
    cache_bytes: int  # for the prompt, before the decoded tokens' entries


@torch.inference_mode()
def measure(engine: Engine, batch: int, depth: int, new_tokens: int, vocab_size: int,
            device: torch.device = torch.device("cpu"), seed: int = 0) -> Measure:
    """A prompt of `depth` tokens (at least one) through the engine, then `new_tokens` greedy cached steps, on the
    device the engine's model is on. The cache's bytes are the prompt's: the row reports the cache at its depth."""
    generator = torch.Generator().manual_seed(seed)
    prompt = torch.randint(vocab_size, (batch, max(depth, 1)), generator=generator).to(device)
    reset_peak_memory(device)
    finish(device)
    start, start_cpu = time.perf_counter(), time.process_time()
    cache, token = engine.prefill(prompt, prompt.shape[1] + new_tokens)
    finish(device)
    prefill_s, prefill_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
    peak = peak_memory_bytes(device)
    held = engine.prompt_bytes(cache, batch, prompt.shape[1])
    start, start_cpu = time.perf_counter(), time.process_time()
    for _ in range(new_tokens):
        token = engine.step(token, cache)
    finish(device)
    return Measure(prefill_s, time.perf_counter() - start, prefill_cpu_s, time.process_time() - start_cpu, peak, held)


def finish(device: torch.device) -> None:
    """Wait for the work queued on a GPU: its kernels run after the Python that launched them has moved on."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
