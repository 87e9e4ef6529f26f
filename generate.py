"""Stream text from a trained tinygpt model.pt (the newest under outputs/ unless --ckpt is given).

    python generate.py --prompt "two plus three equals"
    python generate.py --prompt "seven times six equals" --temperature 0.8 --top-k 5 --num-samples 3
    python generate.py --prompt "seven times six equals" --attention-map maps.png
    python generate.py --prompt "seven times six equals" --attention-html view.html
"""
from __future__ import annotations

import argparse
import sys

import torch

from gpt.checkpoint import CheckpointError, load_checkpoint, newest_checkpoint
from gpt.generation import check_sampling, compile_for_decoding, stream
from gpt.model import GPT
from gpt.tokenizers import Tokenizer


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", default="", help="text to continue (default: start of a line)")
    parser.add_argument("--ckpt", help="model.pt to load (default: the newest under outputs/ or multirun/)")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="tokens to generate (default: up to the end of the line on line-based corpora, else 200)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 means greedy (argmax)")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--num-samples", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the model for decoding: tens of seconds once on a small CPU, then "
                             "several times faster per token; worth it for long generations")
    parser.add_argument("--attention-map", metavar="PATH",
                        help="draw every layer and head's attention over the prompt into this PNG (no generation)")
    parser.add_argument("--attention-html", metavar="PATH",
                        help="generate with the settings above, then write an interactive, offline viewer of every "
                             "layer and head's attention over the prompt and the new tokens into this HTML file")
    return parser.parse_args(argv)


def draw_attention_map(model: GPT, tokenizer: Tokenizer, ids: list[int], path: str) -> int:
    """Save the layer x head grid of attention heatmaps over `ids` to `path`; the exit status."""
    from gpt.plots import attention_map  # matplotlib only when a map is asked for

    try:
        if not ids:
            raise ValueError("the prompt is empty: pass --prompt TEXT to draw attention over")
        attention_map(model, ids, tokenizer).savefig(path)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: cannot write {path} ({err.strerror}): pass --attention-map a path in an existing folder",
              file=sys.stderr)
        return 2
    print(f"wrote {path}: attention of every layer (rows) and head (columns) over {len(ids)} tokens")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.num_samples < 1:
            raise ValueError(f"--num-samples={args.num_samples} must be at least 1")
        max_new_tokens = 200 if args.max_new_tokens is None else args.max_new_tokens
        check_sampling(args.temperature, args.top_k, args.top_p, max_new_tokens)
        model, tokenizer, meta = load_checkpoint(args.ckpt or newest_checkpoint(), device=args.device, with_meta=True)
        prompt_ids = tokenizer.encode(args.prompt)
        if not prompt_ids and not meta.get("one_example_per_line"):
            prompt_ids = tokenizer.encode("\n")  # running text with no prompt: start as after a line break
    except (ValueError, CheckpointError) as err:
        print(f"error: {str(err).replace('max_new_tokens', '--max-new-tokens').replace('top_p', '--top-p')}",
              file=sys.stderr)
        return 2
    # A one-line-per-example corpus (the calculator) starts each line after a newline and ends it with
    # one: prompt the same way, and stop at the end of the line unless a length is asked for.
    newline = tokenizer.encode("\n")[0] if meta.get("one_example_per_line") else None
    stop = newline if args.max_new_tokens is None else None
    if args.attention_map:
        return draw_attention_map(model, tokenizer, prompt_ids if newline is None else [newline, *prompt_ids],
                                  args.attention_map)
    if args.attention_html:
        from gpt.text import TextModel
        from gpt.viewer import write_for_cli

        return write_for_cli(args.attention_html, TextModel(model, tokenizer, meta), args.prompt,
                             max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                             top_p=args.top_p, seed=args.seed)
    if args.compile:
        model = compile_for_decoding(model)
    generator = torch.Generator(device=args.device).manual_seed(args.seed)
    for sample in range(args.num_samples):
        ids = list(prompt_ids) if newline is None else [newline, *prompt_ids]
        idx = torch.tensor([ids], device=args.device)
        print(args.prompt, end="", flush=True)
        shown = tokenizer.decode(ids)
        for token in stream(model, idx, max_new_tokens, args.temperature, args.top_k, args.top_p,
                            stop_token=stop, generator=generator):
            if stop is not None and token.item() == stop:
                break
            ids.append(token.item())
            text = tokenizer.decode(ids)
            print(text[len(shown):], end="", flush=True)  # decode the whole so BPE pieces print whole
            shown = text
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
