"""What flash-decoding's slices buy on this CPU: ms per decode step of each variant at a depth, the keys of a step
cut into slices (model.kernel=sdpa as it runs, gpt/model/attention/kernels.py) against one uncut call, alternated
in one process (A B A B), medians over rounds and the median of the per-round ratios. The cost command's default
shape (4 layers x 8 heads x 256 dims, SwiGLU, RoPE, random weights), fp32. Only a step with at most half as many
(sequence, key/value head) pairs as threads is cut (3 threads leave 2 pairs uncut), so on 2 threads `mha` and `gqa`
run the same either way.

    python bench/decode_slices.py                                   # mqa and mla at 16k, batch 1
    python bench/decode_slices.py --depths 2048 4096 --attention mqa mla gqa --rounds 10
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

import gpt.model.attention.kernels as kernels  # noqa: E402
from gpt import GPT  # noqa: E402
from gpt.cost import command as cost  # noqa: E402
from gpt.inference.depth import GPTEngine  # noqa: E402
from gpt.model.attention import ATTENTION  # noqa: E402
from gpt.machine import cpu_description  # noqa: E402

UNCUT = 2 ** 62  # a slice's fewest keys no step reaches: every call uncut
STEPS = 24  # decode steps timed per variant, setting and round


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attention", nargs="+", default=["mqa", "mla"], choices=list(ATTENTION), metavar="VARIANT")
    parser.add_argument("--depths", nargs="+", type=int, default=[16384], help="tokens in the cache")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10, help="alternated rounds; medians reported")
    args = parser.parse_args(argv)
    if min(args.depths) < 1 or args.batch < 1 or args.rounds < 1:
        parser.error("--depths, --batch and --rounds must be at least 1")
    if kernel_less := [a for a in args.attention if not ATTENTION[a].has_weights]:
        parser.error(f"--attention {' '.join(kernel_less)} never calls the softmax kernel whose keys are cut, so "
                     "both settings would run the same code: time a softmax variant, such as mqa or mla")
    return args


def engine(attention: str, positions: int) -> GPTEngine:
    """The variant at the cost command's default shape, random weights."""
    shape = argparse.ArgumentParser()
    cost.add_arguments(shape)
    args = shape.parse_args([])
    cost.settle_shape(args)
    torch.manual_seed(0)
    return GPTEngine(attention, GPT(cost.shape_config(args, attention, "sdpa", positions)).eval())


SETTINGS = {"uncut": UNCUT, "slices": kernels.MIN_SLICE_KEYS}


def progress(message: str) -> None:
    """A line on stderr as a stage of the timing starts, so its minutes (a prefill of 16k tokens, the rounds) are
    not silent; stdout holds the figures alone, for whoever parses them."""
    print(message, file=sys.stderr, flush=True)


def why_uncut(calls: list[tuple[int, int, int]]) -> str | None:
    """None where the `slices` setting cut some step's keys; else why key_slices() never did, from each kernel call's
    (slices, (sequence, key/value head) pairs, keys): then both settings ran the same code and their ratio is noise."""
    if any(slices > 1 for slices, _, _ in calls):
        return None
    if not calls:
        return "the kernel never ran a step that could be cut"
    if kernels.FLASH_WITH_LSE is None:
        return f"this torch {torch.__version__} lacks the flash kernel that slices use"
    pairs, threads = max(p for _, p, _ in calls), torch.get_num_threads()
    if threads // pairs < 2:
        return f"threads already filled ({pairs} (sequence, key/value head) pairs for {threads} threads)"
    return (f"too few keys (at most {max(k for _, _, k in calls):,} in a step; two slices need "
            f"{2 * SETTINGS['slices']:,})")


def step_times(attention: list[str], depth: int, batch: int, rounds: int,
               calls: dict[str, list[tuple[int, int, int]]] | None = None) -> dict[tuple[str, str], list[float]]:
    """ms per decode step of each round, by (variant, setting), the settings alternated within each round; `calls`,
    if given, gets each variant's kernel calls under the `slices` setting, for why_uncut()."""
    positions = depth + 1 + len(SETTINGS) * rounds * STEPS  # the prompt, then every step of every round
    engines = {a: engine(a, positions) for a in attention}
    prompt = torch.randint(0, 256, (batch, depth))
    times: dict[tuple[str, str], list[float]] = {}
    original = kernels.key_slices
    current: list[tuple[int, int, int]] = []  # the calls of the variant and setting being timed

    def recorded(k: torch.Tensor) -> int:
        slices = original(k)
        current.append((slices, k.shape[0] * k.shape[1], k.shape[2]))
        return slices

    kernels.key_slices = recorded
    try:
        with torch.inference_mode():
            states: dict[str, list[Any]] = {}
            for number, (name, e) in enumerate(engines.items(), start=1):
                progress(f"depth {depth:,}: prefilling {name} ({number} of {len(engines)})...")
                states[name] = list(e.prefill(prompt, positions))
            for round_number in range(1, rounds + 1):
                progress(f"depth {depth:,}: timing round {round_number} of {rounds}...")
                for setting, fewest in SETTINGS.items():
                    kernels.MIN_SLICE_KEYS = fewest
                    for name, e in engines.items():
                        cache, token = states[name]
                        current.clear()
                        start = time.perf_counter()
                        for _ in range(STEPS):
                            token = e.step(token, cache)
                        times.setdefault((name, setting), []).append((time.perf_counter() - start) / STEPS * 1e3)
                        states[name][1] = token
                        if calls is not None and setting == "slices":
                            calls.setdefault(name, []).extend(current)
    finally:
        kernels.MIN_SLICE_KEYS = SETTINGS["slices"]
        kernels.key_slices = original
    return times


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"CPU: {cpu_description()}; torch {torch.__version__}, {torch.get_num_threads()} threads; batch {args.batch}")
    for depth in args.depths:
        calls: dict[str, list[tuple[int, int, int]]] = {}
        times = step_times(args.attention, depth, args.batch, args.rounds, calls)
        print(f"depth {depth:,}: ms per decode step, median of {args.rounds} alternated rounds of {STEPS} steps")
        for name in args.attention:
            uncut, sliced = times[(name, "uncut")], times[(name, "slices")]
            if reason := why_uncut(calls.get(name, [])):
                print(f"  {name:15s} uncut {statistics.median(uncut):6.2f}  slices {statistics.median(sliced):6.2f}  "
                      f"keys not cut here: {reason}, so both ran the same code")
                continue
            ratio = statistics.median(u / s for u, s in zip(uncut, sliced))
            print(f"  {name:15s} uncut {statistics.median(uncut):6.2f}  slices {statistics.median(sliced):6.2f}  "
                  f"uncut/slices {ratio:.2f}x (rounds {min(uncut):.2f}-{max(uncut):.2f} "
                  f"against {min(sliced):.2f}-{max(sliced):.2f})")


if __name__ == "__main__":
    main()
