"""Stream text from a trained tinygpt model.pt (the newest under outputs/ unless --ckpt is given), exactly
as `gpt.load(path).complete(prompt, ...)` returns it, after the prompt.

    python generate.py --prompt "thirty five plus eighty six equals"
    python generate.py --prompt "seven times six equals" --temperature 0.8 --top-k 5 --num-samples 3
    python generate.py --prompt "seven times six equals" --attention-map maps.png
    python generate.py --prompt "seven times six equals" --attention-html view.html
"""
from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gpt.inference.checkpoint import DEVICE_HELP, CheckpointError, describe, model_file, newest_checkpoint
from gpt.inference.compiled import compile_for_decoding
from gpt.inference.text import SEEDS, PromptWarning, TextModel, load
from gpt.pipe import exit_with
from gpt.validate import OneLineParser

SEPARATOR = "---"  # printed between --num-samples outputs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="python generate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt", default="", help="text to continue (default: start of a line)")
    parser.add_argument("--ckpt", help="model.pt, or a run folder holding one (default: the newest model.pt "
                                       "under outputs/ or multirun/)")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="tokens to generate at most (default: up to the end of the line on line-based "
                             "corpora, else 200; running text stops at its end-of-text token)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="0 means greedy (argmax); default: 0 on line-based corpora (one right answer), else 0.8")
    parser.add_argument("--top-k", type=int, default=None,
                        help="sample only among the k likeliest tokens (default: all)")
    parser.add_argument("--top-p", type=float, default=None,
                        help="sample only among the likeliest tokens holding this much probability, in (0, 1] "
                             "(default: all)")
    parser.add_argument("--num-samples", type=int, default=1, help=f"samples to draw, separated by a "
                                                                   f"'{SEPARATOR}' line (default: 1)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the sampling random stream; same seed, same samples (default: 0)")
    parser.add_argument("--device", default="cpu", help=DEVICE_HELP)
    parser.add_argument("--compile", action="store_true",
                        help="compile the decode step (AOTInductor, or torch.compile): tens of seconds once on a "
                             "small CPU, then several times faster per token; worth it for long generations")
    # Both given, the map was drawn and the viewer left out without a word.
    attention = parser.add_mutually_exclusive_group()
    attention.add_argument("--attention-map", metavar="PATH",
                           help="draw every layer and head's attention over the prompt into this PNG (no generation)")
    attention.add_argument("--attention-html", metavar="PATH",
                           help="generate with the settings above, then write an interactive, offline viewer of "
                                "every layer and head's attention over the prompt and the new tokens into this .html "
                                "file")
    return parser.parse_args(argv)


def check_attention_options(args: argparse.Namespace) -> None:
    """Refuse, naming the flag, an option the attention output asked for never reads: each was dropped without a
    word and the file written as if it had acted."""
    if args.attention_map:
        generating = {"--max-new-tokens": args.max_new_tokens, "--temperature": args.temperature, "--top-k": args.top_k,
                      "--top-p": args.top_p, "--num-samples": args.num_samples if args.num_samples > 1 else None}
        if given := [flag for flag, value in generating.items() if value is not None]:
            raise ValueError(f"{given[0]} sets the generation, but --attention-map draws the attention over the "
                             "prompt alone, without generating: drop it, or pass --attention-html to see the "
                             "generated tokens too")
    if args.attention_html and args.num_samples > 1:
        raise ValueError(f"--num-samples={args.num_samples}: --attention-html shows the attention of one generation; "
                         "drop --num-samples, or vary --seed for another")


def write_attention(path: str, flag: str, write: Callable[[], str]) -> int:
    """Run `write` (it writes `path` and says what it holds): one line saying so, or what to fix; the exit status."""
    try:
        holds = write()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except IsADirectoryError:
        print(f"error: {flag} {path} is a folder: name a file in it to write", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: cannot write {path} ({err.strerror}): pass {flag} a path in an existing folder", file=sys.stderr)
        return 2
    print(f"wrote {path}: {holds}")
    return 0


def attention_map_png(text_model: TextModel, prompt: str, path: str) -> str:
    """Save the layer x head grid of attention heatmaps over the prompt's ids to `path`."""
    from gpt.evaluation.maps import attention_map  # matplotlib only when a map is asked for

    if not prompt:
        raise ValueError("the prompt is empty: pass --prompt TEXT to draw attention over")
    ids = text_model.prompt_ids(prompt)
    block = text_model.model.cfg.block_size
    if len(ids) > block:
        raise ValueError(f"--prompt is {len(ids)} tokens to this model, more than the block_size={block} it attends "
                         "over: shorten it")
    # As --attention-html refuses it: a name without a suffix is as likely a file of another kind (a LICENSE, a run's
    # notes) as a new picture, and the map would replace it.
    if not Path(path).suffix:
        raise ValueError(f"--attention-map {path}: the map is a PNG image; end the name in .png (without a suffix it "
                         "could overwrite a file that is not one)")
    figure = attention_map(text_model.model, ids, text_model.tokenizer)
    try:
        figure.savefig(path)
    except ValueError as err:  # a suffix matplotlib cannot draw (maps.txt): its own line named no flag
        raise ValueError(f"--attention-map {path}: {err}; end the name in .png") from None
    return f"attention of every layer (rows) and head (columns) over {len(ids)} tokens"


def attention_html(text_model: TextModel, prompt: str, path: str, **settings: Any) -> str:
    """Generate from `prompt` and write the interactive viewer of every head's attention to `path`."""
    from gpt.evaluation.viewer import write_attention_html  # the viewer's template only when a viewer is asked for

    # Any other name is a file the page would replace: `--attention-html <run>/model.pt` overwrote the model it read.
    if Path(path).suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--attention-html {path}: the viewer is an HTML page; end the name in .html (under another "
                         "name it could overwrite a file that is not one, such as a model.pt)")
    view = write_attention_html(path, text_model, prompt, **settings)
    tokens = len(view["tokens"])
    left_out = f"; the {view['left_out']} before them left out, past block_size" if view["left_out"] else ""
    return (f"{view['layers']} layers x {view['heads']} heads of {view['attention']} attention over {tokens} tokens "
            f"({view['prompt_len']} prompt, {tokens - view['prompt_len']} generated{left_out}); open it in a browser")


def main(argv: list[str] | None = None) -> int:
    chosen = ""  # the model generate.py picked itself, named in an error: the newest run may not be the one meant
    try:
        args = parse_args(argv)
        settings = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                        top_p=args.top_p)
        if args.num_samples < 1:
            raise ValueError(f"--num-samples={args.num_samples} must be at least 1")
        if args.seed is not None and not SEEDS[0] <= args.seed <= SEEDS[1]:
            raise ValueError(f"--seed={args.seed} must be in [{SEEDS[0]}, {SEEDS[1]}]")
        check_attention_options(args)
        path = model_file(args.ckpt or newest_checkpoint())
        text_model = load(path, device=args.device)
        if not args.ckpt:
            chosen = f" [{describe(path, text_model.meta)}, the newest; --ckpt picks another]"
        greedy = text_model.defaults(args.max_new_tokens, args.temperature)[1] == 0
        if args.num_samples > 1 and greedy:
            raise ValueError(f"--num-samples={args.num_samples} would print the same answer {args.num_samples} times, "
                             f"since {text_model.greedy(args.temperature)}: pass --temperature 0.8 to sample")
        if args.seed is not None and greedy:  # no random number is drawn: another seed, the same answer
            raise ValueError(f"--seed={args.seed} seeds sampling, but {text_model.greedy(args.temperature)}: pass "
                             "--temperature 0.8 to sample, or drop --seed")
        seed = args.seed or 0
        if args.num_samples > 1 and args.top_k == 1:  # sampling from the single likeliest token is greedy decoding
            raise ValueError(f"--num-samples={args.num_samples} would print the same answer {args.num_samples} times: "
                             "--top-k 1 keeps only the likeliest token; pass --top-k 2 or more, or drop it")
        if args.attention_map:
            return write_attention(args.attention_map, "--attention-map",
                                   lambda: attention_map_png(text_model, args.prompt, args.attention_map))
        if args.attention_html:
            return write_attention(args.attention_html, "--attention-html", lambda: attention_html(
                text_model, args.prompt, args.attention_html, **settings, seed=seed))
        if args.compile:
            text_model.model = compile_for_decoding(text_model.model)
        generator = torch.Generator(device=args.device).manual_seed(seed)
        for sample in range(args.num_samples):
            pieces = text_model.stream(args.prompt, **settings, generator=generator)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PromptWarning)  # printed below as a note, once
                first = next(pieces, "")  # the prompt's encoding and the settings are checked by here
            if sample:
                print(SEPARATOR)
            else:  # which model answers, on stderr so stdout stays exactly the text
                print(describe(path, text_model.meta), file=sys.stderr)
                # The text printed is all of the prompt, the text answered may not be.
                cut = text_model.cut_note(text_model.prompt_ids(args.prompt))
                for note in (cut, text_model.prompt_note(args.prompt)):
                    if note:
                        print(f"note: {note}", file=sys.stderr)
            print(args.prompt + first, end="", flush=True)
            for piece in pieces:
                print(piece, end="", flush=True)
            print()
    except (ValueError, CheckpointError) as err:
        # The API's names as this command's flags, each alike: "--top-p=1.5", "--temperature=-0.5"; a name written
        # as a flag already stays one ("pass --temperature 0.8" came out "----temperature").
        message = re.sub(r"(?<!-)\b(max_new_tokens|top_p|top_k|temperature)\b", lambda m: "--" + m[1].replace("_", "-"),
                         str(err))
        print(f"error: {message}{chosen}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    exit_with(main)
