"""Generation speed: new tokens/s of greedy decoding, with and without the KV cache, for each attention
variant, against Hugging Face `GPT2LMHeadModel.generate` at the same shape (random weights).

    OMP_NUM_THREADS=1 python bench/generate_speed.py                       # every variant, batch 1 and 8
    OMP_NUM_THREADS=1 python bench/generate_speed.py --attention mha gqa --new-tokens 200 --batch 1
    python bench/generate_speed.py --attention mha mha_fused --compiled mha mha_fused
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from gpt import GPT, ModelConfig, generate  # noqa: E402
from gpt.inference.compiled import compile_for_decoding  # noqa: E402
from gpt.model.attention import ATTENTION  # noqa: E402
from gpt.model.gpt import check_parts  # noqa: E402
from gpt.machine import cpu_description  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attention", nargs="+", default=list(ATTENTION), choices=list(ATTENTION))
    parser.add_argument("--uncached", nargs="*",
                        help="of the --attention variants, those also timed without the cache (slow: a full "
                             "forward per token); 'all' for every one (default: mha)")
    parser.add_argument("--compiled", nargs="*",
                        help="of the --attention variants, those also timed through compile_for_decoding "
                             "(compiled in the untimed warm-up run; default: mha)")
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--new-tokens", type=int, default=500)
    parser.add_argument("--prompt-len", type=int, default=1)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=65, help="65: Tiny Shakespeare's characters")
    parser.add_argument("--block-size", type=int, default=1024,
                        help="GPT-2's; longer than prompt + new, so no window slides")
    parser.add_argument("--pos", default="learned", help="learned, like GPT-2")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds over all rows; medians are reported")
    parser.add_argument("--no-hf", action="store_true", help="skip the Hugging Face reference rows")
    args = parser.parse_args(argv)
    if min(args.repeats, args.new_tokens, args.prompt_len, *args.batch) < 1:
        parser.error("--repeats, --new-tokens, --prompt-len and --batch must be at least 1")
    if args.prompt_len + args.new_tokens > args.block_size:
        parser.error(f"--prompt-len + --new-tokens = {args.prompt_len + args.new_tokens} exceeds --block-size "
                     f"{args.block_size}: the window would slide; raise --block-size")
    for attention in args.attention:  # checked before any model is built, whose refusal was a traceback
        try:
            check_parts(model_config(args, attention))
        except ValueError as err:
            parser.error(str(err))
    return args


def model_config(args: argparse.Namespace, attention: str) -> ModelConfig:
    return ModelConfig(vocab_size=args.vocab, layers=args.layers, heads=args.heads, dim=args.dim,
                       block_size=args.block_size, attention=attention, pos=args.pos)


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """(wall, process CPU) seconds of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def tinygpt_runner(args: argparse.Namespace, attention: str, batch: int, cache: bool,
                   compiled: bool = False) -> Callable[[], object]:
    torch.manual_seed(0)
    model = GPT(model_config(args, attention)).eval()
    if compiled:
        model = compile_for_decoding(model)  # as generate.py --compile
    idx = torch.randint(0, args.vocab, (batch, args.prompt_len))
    return lambda: generate(model, idx, args.new_tokens, temperature=0, use_cache=cache)


def hf_runner(args: argparse.Namespace, batch: int, cache: bool) -> Callable[[], object] | None:
    """GPT2LMHeadModel.generate at the same shape, or None when transformers is missing."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return None
    config = GPT2Config(vocab_size=args.vocab, n_positions=args.block_size, n_embd=args.dim, n_layer=args.layers,
                        n_head=args.heads, bos_token_id=0, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    idx = torch.randint(1, args.vocab, (batch, args.prompt_len))
    mask = torch.ones_like(idx)

    @torch.inference_mode()
    def run() -> torch.Tensor:
        return model.generate(idx, attention_mask=mask, max_new_tokens=args.new_tokens,
                              min_new_tokens=args.new_tokens, do_sample=False, use_cache=cache)
    return run


HF = "hf GPT2LMHeadModel.generate"


def progress(message: str) -> None:
    """A line on stderr as a stage of the timing starts, so its minutes are not silent; stdout holds the tables
    alone, for whoever parses them."""
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    given = (args.compiled or []) + [a for a in args.uncached or [] if a != "all"]  # 'all' is --uncached's alone
    if stray := sorted(set(given) - set(args.attention)):
        sys.exit(f"error: --compiled/--uncached {' '.join(stray)} not among --attention: add them there")
    default = [a for a in ("mha",) if a in args.attention]
    args.compiled = default if args.compiled is None else args.compiled
    args.uncached = default if args.uncached is None else args.uncached
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"CPU: {cpu_description()}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); shape: {args.layers} layers, "
          f"{args.heads} heads, {args.dim} dims, vocab {args.vocab}, block_size {args.block_size}, pos={args.pos}; "
          f"{args.new_tokens} new tokens after a {args.prompt_len}-token prompt, greedy; rows timed round-robin "
          f"{args.repeats} times after one untimed warm-up run each (which compiles the compiled rows); medians")
    uncached = set(ATTENTION) if "all" in args.uncached else set(args.uncached)
    for batch_index, batch in enumerate(args.batch):
        # Compiled rows start afresh at each batch, as in their own generate.py process: graphs kept from another
        # batch size would make torch.compile treat the batch as dynamic, and no longer specialise for it.
        torch._dynamo.reset()
        runners: dict[tuple[str, bool], Callable[[], object]] = {}  # (name, cache) -> run
        for cache in () if args.no_hf else (True, False) if uncached else (True,):
            run = hf_runner(args, batch, cache)
            if run is None:
                print("transformers is not installed: no Hugging Face rows (pip install -e '.[bench]')")
                break
            runners[(HF, cache)] = run
        for attention in args.attention:
            for cache in (True, False) if attention in uncached else (True,):
                runners[(attention, cache)] = tinygpt_runner(args, attention, batch, cache)
            if attention in args.compiled:
                runners[(f"{attention} compiled", True)] = tinygpt_runner(args, attention, batch, True, True)
        warm_ups = len(args.batch) * len(runners)  # every batch has the same rows
        for number, ((name, cache), run) in enumerate(runners.items(), start=batch_index * len(runners) + 1):
            progress(f"warming up {name}{'' if cache else ' uncached'}, batch {batch} ({number} of {warm_ups})...")
            run()
        # Round-robin, so a machine that speeds up or slows down over the minutes this takes shifts every row
        # alike, and ratios to Hugging Face are taken within a round.
        times: dict[tuple[str, bool], list[tuple[float, float]]] = {key: [] for key in runners}
        for round_number in range(1, args.repeats + 1):
            progress(f"timing batch {batch}, round {round_number} of {args.repeats} ({len(runners)} rows)...")
            for key, run in runners.items():
                times[key].append(timed(run))
        print(f"\nbatch {batch}: new tokens/s by wall time and by process CPU time (x hf: median over rounds of "
              "hf time / this time, same cache setting)")
        print(f"{'model':<28} {'cache':<5} {'wall tok/s':>10} {'x hf':>6} {'cpu tok/s':>10} {'x hf':>6} "
              f"{'cpu ms/step':>11}")
        for (name, cache), rounds in times.items():
            wall, cpu = (statistics.median(r[i] for r in rounds) for i in (0, 1))
            hf = times.get((HF, cache))
            ratio = [f"{statistics.median(h[i] / r[i] for h, r in zip(hf, rounds)):.2f}" if hf else "-" for i in (0, 1)]
            print(f"{name:<28} {'yes' if cache else 'no':<5} {batch * args.new_tokens / wall:>10.0f} {ratio[0]:>6} "
                  f"{batch * args.new_tokens / cpu:>10.0f} {ratio[1]:>6} {1000 * cpu / args.new_tokens:>11.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
