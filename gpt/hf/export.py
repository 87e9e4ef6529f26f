"""Export a model.pt as a Hugging Face folder (config.json + model.safetensors, plus GPT-2's tokenizer files
when the model reads GPT-2's full BPE, or the tokenizer.json of the Hugging Face folder it was trained with) that
`transformers.AutoModelForCausalLM.from_pretrained` loads.

    python -m gpt export --ckpt outputs/<date>/<time>/model.pt --to my-model
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any

from gpt.atomic import file_mode
from gpt.data.tokenizers.base import Tokenizer
from gpt.data.tokenizers.gpt2 import GPT2Tokenizer, gpt2_files
from gpt.data.tokenizers.hf import HFTokenizer
from gpt.hf import to_hf
from gpt.inference.checkpoint import load_checkpoint, newest_checkpoint
from gpt.inference.text import TextModel
from gpt.model.gpt import GPT

ENDOFTEXT_ID = 50256
# tokenizer.json post-processors that add special tokens (Llama's BOS, BERT's CLS and SEP); ByteLevel's only trims
# offsets and stays.
ADDS_TOKENS = {"TemplateProcessing", "BertProcessing", "RobertaProcessing"}


def save_hf(model: GPT, tokenizer: Tokenizer, folder: Path, meta: dict[str, Any] | None = None) -> str:
    """Write the Hugging Face folder; returns what was written, in words (and why no tokenizer, if so).
    `meta` is model.pt's: on a line-based corpus transformers' generate stops at the end of the line too."""
    hf = to_hf(model)
    # Where tinygpt's text API stops (end-of-text, or the end of the line on a line-based corpus): transformers'
    # generate stops there too, rather than answering on into lines of its own.
    end = TextModel(model, tokenizer, meta or {}).end
    stops = list(dict.fromkeys(t for t in (tokenizer.eot_id, end) if t is not None))
    if stops:
        hf.config.eos_token_id = hf.generation_config.eos_token_id = stops if len(stops) > 1 else stops[0]
    full_gpt2 = isinstance(tokenizer, GPT2Tokenizer) and tokenizer.vocab is None
    if full_gpt2:  # GPT-2's own convention: its end-of-text token is its BOS too
        hf.config.bos_token_id = hf.generation_config.bos_token_id = ENDOFTEXT_ID
    hf.save_pretrained(folder)
    wrote = f"a Hugging Face {hf.config.model_type} model"
    if isinstance(tokenizer, HFTokenizer):  # a Hugging Face folder's own tokenizer.json: it travels back out
        (folder / "tokenizer.json").write_text(without_added_tokens(tokenizer.spec), encoding="utf-8")
        eos = {} if tokenizer.eot_id is None else {"eos_token": tokenizer.backend.id_to_token(tokenizer.eot_id)}
        (folder / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": model.cfg.block_size, **eos}, indent=2))
        return f"{wrote} and the tokenizer.json it was trained with"
    if not full_gpt2:
        return (f"{wrote}, no tokenizer files: transformers has no equal of this model's "
                f"{tokenizer.to_dict()['kind']} tokenizer (GPT-2's full BPE has one: data.tokenizer=gpt2 "
                "data.compact_vocab=false)")
    write_gpt2_tokenizer(folder, model.cfg.block_size)
    return f"{wrote} and GPT-2's tokenizer files"


def without_added_tokens(spec: str) -> str:
    """A tokenizer.json whose post-processor adds no special tokens, so that transformers' tokenizer(text) gives
    the ids tinygpt trained on: HFTokenizer encodes without them (a Llama folder's would start every text with BOS)."""
    tokenizer = json.loads(spec)
    post = tokenizer.get("post_processor") or {}
    if post.get("type") == "Sequence":
        tokenizer["post_processor"] = {**post, "processors": [p for p in post["processors"]
                                                              if p.get("type") not in ADDS_TOKENS]}
    elif post.get("type") in ADDS_TOKENS:
        tokenizer["post_processor"] = None
    return json.dumps(tokenizer, ensure_ascii=False)


def write_gpt2_tokenizer(folder: Path, max_length: int) -> None:
    """GPT-2's BPE in the layout transformers' GPT2Tokenizer reads: the same two files tinygpt builds it from."""
    files = gpt2_files()
    shutil.copyfile(files["encoder.json"], folder / "vocab.json")
    shutil.copyfile(files["vocab.bpe"], folder / "merges.txt")
    special = "<|endoftext|>"
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GPT2Tokenizer", "model_max_length": max_length, "add_prefix_space": False,
         "bos_token": special, "eos_token": special, "unk_token": special}, indent=2))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt", type=Path,
                        help="model.pt to export (default: the newest under outputs/ or multirun/)")
    parser.add_argument("--to", type=Path, required=True,
                        help="folder to create, in one that exists (must be new or empty)")


def run(args: argparse.Namespace) -> None:
    """`python -m gpt export`: model.pt -> a Hugging Face folder."""
    if args.to.exists() and (not args.to.is_dir() or any(args.to.iterdir())):
        raise ValueError(f"--to {args.to} already exists and is not an empty folder: name a new one")
    # Made only in a folder that exists, as generate.py writes its files: a mistyped parent became a tree of folders.
    if not args.to.parent.is_dir():
        raise ValueError(f"--to {args.to}: there is no folder {args.to.parent} to make it in: create that first, or "
                         "name a new folder in one that exists")
    model, tokenizer, meta = load_checkpoint(args.ckpt or newest_checkpoint(), with_meta=True,
                                             purpose="to export")
    # Written beside --to and renamed into place once whole: an export that fails half-way (a full disk) or is killed
    # leaves no folder of weights without the rest, which init_from= and transformers would read, and which refused
    # the same export run again as a folder that is not empty.
    tmp = args.to.parent / f".{args.to.name}.tmp-{os.getpid()}"
    try:
        wrote = save_hf(model, tokenizer, tmp, meta)
        # transformers writes model.safetensors private (0600) through a temporary file: on a shared machine no one
        # else could load the export. Every file gets the permissions the others have.
        mode = file_mode()
        for file in tmp.rglob("*"):
            if file.is_file():
                file.chmod(mode)
        tmp.rename(args.to)
    except OSError as err:  # a --to under a file, or where nothing may be written: one line, not a traceback
        raise ValueError(f"--to {args.to}: cannot write there ({err.strerror}: {err.filename}): name a new folder "
                         "in one that exists") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {args.to}: {wrote}")
