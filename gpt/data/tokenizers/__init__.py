"""Tokenizers behind one interface (gpt/data/tokenizers/base.py), one module per kind: char and word (vocab),
`gpt2`, tiktoken's GPT-2 BPE (Radford et al. 2019) built offline from local files, `bpe`, a byte-level BPE trained
on the user's corpus with Hugging Face `tokenizers`, and a Hugging Face folder's own (hf). TOKENIZERS (learned.py)
names what `data.tokenizer=<name>` learns; KINDS, every kind a model.pt's tokenizer may be, rebuilds one from its
dict."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from gpt.data.tokenizers.base import Corpus, Tokenizer
from gpt.data.tokenizers.hf import HFTokenizer
from gpt.data.tokenizers.learned import TOKENIZERS

KINDS: dict[str, Any] = {**TOKENIZERS, HFTokenizer.kind: HFTokenizer}  # what a model.pt's tokenizer may be


def learn_tokenizer(name: str, corpus: Corpus, vocab_size: int) -> Tokenizer:
    """What data.tokenizer=<name> gives: a kind learned from the corpus, or a Hugging Face folder's own tokenizer."""
    return TOKENIZERS[name].learn(corpus, vocab_size) if name in TOKENIZERS else folder_tokenizer(name)


def folder_tokenizer(name: str) -> HFTokenizer:
    if not Path(name).is_dir():
        raise ValueError(f"data.tokenizer={name} is unknown; choose one of {', '.join(TOKENIZERS)} "
                         "or a Hugging Face model folder")
    return HFTokenizer.from_folder(Path(name))


def tokenizer_label(name: str) -> str:
    """A file-name-safe label of data.tokenizer=<name> for the shards' folder: the kind, or `hf-` and a hash of a
    folder's tokenizer (so a changed tokenizer is never read from stale shards)."""
    if name in TOKENIZERS:
        return name
    return f"hf-{hashlib.sha256(folder_tokenizer(name).spec.encode()).hexdigest()[:12]}"


def tokenizer_from_dict(state: dict[str, Any]) -> Tokenizer:
    kind = state.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    return KINDS[kind](state["vocab"])
