"""Alternated rounds (A B A B ...) over every engine at every batch and depth, after one untimed call of each,
each combination summarised as one row: medians over rounds, and speed ratios against the first engine and the
first Hugging Face one, paired within each round so a machine others share stretches both sides of a ratio alike."""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

import torch

from gpt.inference.depth import Engine, HFEngine, measure

MIB = 2 ** 20


def run_rounds(engines: list[Engine], args: argparse.Namespace, vocab_size: int) -> list[dict[str, Any]]:
    """Every engine at every batch and depth, rounds alternating over the engines; one result row per combination."""
    rows, total, done, start = [], len(args.batch) * len(args.depths) * args.repeats * len(engines), 0, time.time()
    device = torch.device(args.device)
    for batch in args.batch:
        for depth in args.depths:
            runs: dict[str, list] = {e.name: [] for e in engines}
            # Untimed: an engine's first call at a shape pays one-time costs (lazy initialisation, kernel choice, the
            # allocator growing), which were in the first round's figures; one decoded token warms the steps too.
            for engine in engines:
                measure(engine, batch, depth, 1, vocab_size, device)
            for _ in range(args.repeats):
                for engine in engines:
                    runs[engine.name].append(measure(engine, batch, depth, args.new_tokens, vocab_size, device))
                    done += 1
                    last = runs[engine.name][-1]
                    print(f"[{done}/{total} {time.time() - start:,.0f} s] batch {batch} depth {depth:,} {engine.name}: "
                          f"prefill {last.prefill_s:.2f} s, decode {1000 * last.decode_s / args.new_tokens:.2f} "
                          "ms/token", flush=True)
            # Speeds relative to the first row and to the first Hugging Face row, paired within each round.
            references = {name: runs[name] for name in (engines[0].name, next(
                (e.name for e in engines if isinstance(e, HFEngine)), engines[0].name))}
            for engine in engines:
                rows.append(summarise(engine, runs[engine.name], references, batch, depth, args.new_tokens))
    return rows


def summarise(engine: Engine, runs: list, references: dict[str, list], batch: int, depth: int,
              new_tokens: int) -> dict[str, Any]:
    prefill, decode = statistics.median(r.prefill_s for r in runs), statistics.median(r.decode_s for r in runs)

    def ratios(key: str) -> dict[str, float]:  # median over rounds of the reference's time over this one's
        return {name: statistics.median(getattr(a, key) / getattr(b, key) for a, b in zip(ref, runs))
                for name, ref in references.items()}

    return {"name": engine.name, "batch": batch, "depth": depth,
            "prefill_x": ratios("prefill_s") if depth else {}, "decode_x": ratios("decode_s"),
            "prefill_tokens_per_s": batch * depth / prefill if depth else None,
            "decode_tokens_per_s": batch * new_tokens / decode, "decode_ms_per_token": 1000 * decode / new_tokens,
            "prefill_peak_mib": statistics.median(r.peak_bytes for r in runs) / MIB,
            "cache_bytes": runs[0].cache_bytes, "cache_mib": runs[0].cache_bytes / MIB,
            "formula_bytes": (formula := engine.formula_bytes(batch, max(depth, 1) + new_tokens)),
            "formula_mib": None if formula is None else formula / MIB,
            "rounds": [dataclasses.asdict(r) for r in runs]}
