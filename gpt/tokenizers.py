"""Tokenizers behind one interface: encode(text) -> ids, decode(ids) -> text, vocab_size, and a
plain dict form that travels inside model.pt."""
from __future__ import annotations

import re
from typing import Any, Protocol


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
    """One token per whitespace-separated word; a newline is a token of its own (end of line)."""

    kind = "word"
    NEWLINE = "\n"
    _pieces = re.compile(r"\n|[^\s]+")

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
            if word != self.NEWLINE and out and out[-1] != self.NEWLINE:
                out.append(" ")
            out.append(word)
        return "".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.words}


TOKENIZERS: dict[str, Any] = {"char": CharTokenizer, "word": WordTokenizer}


def tokenizer_from_dict(state: dict[str, Any]) -> Tokenizer:
    kind = state.get("kind")
    if kind not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; known: {', '.join(sorted(TOKENIZERS))}")
    return TOKENIZERS[kind](state["vocab"])
