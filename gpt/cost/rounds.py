"""Alternated rounds (A B A B ...) over every engine at every batch and depth, after one untimed call of each,
each combination summarised as one row: medians over rounds, and speed ratios against the first engine and the
first Hugging Face one, paired within each round so a machine others share stretches both sides of a ratio alike.
An engine that runs out of memory at a batch and depth gets a row saying so there, and the rest are measured.
Every engine stays in memory while one is measured: a row's peak memory holds its own weights and state, not the
others'."""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

import torch
from torch import nn

from gpt.inference.depth import Engine, HFEngine, Measure, measure

MIB = 2 ** 20


def run_rounds(engines: list[Engine], args: argparse.Namespace, vocab_size: int) -> list[dict[str, Any]]:
    """Every engine at every batch and depth, rounds alternating over the engines; one result row per combination."""
    rows, total, done, start = [], len(args.batch) * len(args.depths) * args.repeats * len(engines), 0, time.time()
    device = torch.device(args.device)
    for batch in args.batch:
        for depth in args.depths:
            runs: dict[str, list[Measure]] = {e.name: [] for e in engines}
            failed: set[str] = set()  # out of memory at this batch and depth: not tried again in its later rounds
            # Untimed: an engine's first call at a shape pays one-time costs (lazy initialisation, kernel choice, the
            # allocator growing), which were in the first round's figures; one decoded token warms the steps too.
            for engine in engines:
                attempt(engine, batch, depth, 1, vocab_size, device, failed, engines)
            for _ in range(args.repeats):
                for engine in engines:
                    last = attempt(engine, batch, depth, args.new_tokens, vocab_size, device, failed, engines)
                    done += 1
                    if last is None:
                        print(f"[{done}/{total} {time.time() - start:,.0f} s] batch {batch} depth {depth:,} "
                              f"{engine.name}: out of memory", flush=True)
                        continue
                    runs[engine.name].append(last)
                    print(f"[{done}/{total} {time.time() - start:,.0f} s] batch {batch} depth {depth:,} {engine.name}: "
                          f"prefill {last.prefill_s:.2f} s, decode {1000 * last.decode_s / args.new_tokens:.2f} "
                          "ms/token", flush=True)
            # Speeds relative to the first row and to the first Hugging Face row, paired within each round. A reference
            # out of memory in a later round is shown out of memory: its earlier rounds would give ratios against it.
            references = {name: [] if name in failed else runs[name] for name in (engines[0].name, next(
                (e.name for e in engines if isinstance(e, HFEngine)), engines[0].name))}
            for engine in engines:
                rows.append(summarise(engine, runs[engine.name], references, batch, depth, args.new_tokens,
                                      out_of_memory=engine.name in failed))
    return rows


def held_bytes(model: nn.Module) -> int:
    """Bytes a model holds, each storage once (tied weights share one): its weights and buffers, and the tensors its
    modules keep in plain attributes (RoPE's angle tables, grown with the longest prompt it has seen)."""
    tensors = [*model.parameters(), *model.buffers()]
    for module in model.modules():
        tensors += [t for name, value in vars(module).items() if name not in MODULE_REGISTRIES
                    for t in tensors_in(value)]
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


MODULE_REGISTRIES = ("_parameters", "_buffers", "_modules")  # counted above, or walked as modules of their own


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors in a value, through dicts, lists and tuples."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    return []


def attempt(engine: Engine, batch: int, depth: int, new_tokens: int, vocab_size: int, device: torch.device,
            failed: set[str], engines: list[Engine]) -> Measure | None:
    """One measure, its peak less what the other engines hold (their weights, and what their earlier prompts left
    them holding), or None where the engine ran out of memory now or earlier at this shape (named in `failed`): a
    long prompt that does not fit one engine (Hugging Face's Mistral builds its whole mask) must not end the run and
    lose every other row's figures."""
    if engine.name in failed:
        return None
    # What the others hold now, not at the start: each of tinygpt's RoPE engines keeps its angle tables after a
    # prompt (32 MiB after 64k tokens at the default shape), and mha's 64k prefill read 713 MiB measured before the
    # other engines' prompts and 857 after them (an H200, bf16).
    others = sum(held_bytes(e.model) for e in engines if e is not engine)
    try:
        result = measure(engine, batch, depth, new_tokens, vocab_size, device)
        return dataclasses.replace(result, peak_bytes=result.peak_bytes - others)
    except RuntimeError as err:  # torch.OutOfMemoryError on a GPU; the CPU allocator raises a plain RuntimeError
        if not isinstance(err, torch.OutOfMemoryError) and "can't allocate memory" not in str(err):
            raise
    failed.add(engine.name)
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the failed prefill's blocks would count against the next engine's peak
    return None


def summarise(engine: Engine, runs: list[Measure], references: dict[str, list[Measure]], batch: int, depth: int,
              new_tokens: int, out_of_memory: bool = False) -> dict[str, Any]:
    """One row: medians over the rounds, ratios against each reference (None where either side ran out of memory),
    the cache's bytes from its tensors beside the formula's; figures None and out_of_memory true where it did not
    fit, in any round (`out_of_memory`: the rounds before it stay in "rounds", but medians of the rounds that fitted
    would read as the shape's figures)."""
    formula = engine.formula_bytes(batch, max(depth, 1))  # the prompt's, as measured: a prompt is at least one token
    measured = runs if not out_of_memory else []

    def ratios(key: str) -> dict[str, float | None]:  # median over rounds of the reference's time over this one's
        return {name: statistics.median(getattr(a, key) / getattr(b, key) for a, b in zip(ref, measured))
                if ref and measured else None for name, ref in references.items()}

    row = {"name": engine.name, "batch": batch, "depth": depth, "out_of_memory": not measured,
           "prefill_x": ratios("prefill_s") if depth else {}, "decode_x": ratios("decode_s"),
           "prefill_tokens_per_s": None, "decode_tokens_per_s": None, "decode_ms_per_token": None,
           "prefill_peak_mib": None, "cache_bytes": None, "cache_mib": None, "formula_bytes": formula,
           "formula_mib": None if formula is None else formula / MIB, "rounds": [dataclasses.asdict(r) for r in runs]}
    if measured:
        prefill, decode = statistics.median(r.prefill_s for r in runs), statistics.median(r.decode_s for r in runs)
        row.update(prefill_tokens_per_s=batch * depth / prefill if depth else None,
                   decode_tokens_per_s=batch * new_tokens / decode, decode_ms_per_token=1000 * decode / new_tokens,
                   prefill_peak_mib=statistics.median(r.peak_bytes for r in runs) / MIB,
                   cache_bytes=runs[0].cache_bytes, cache_mib=runs[0].cache_bytes / MIB)
    return row
