"""The vocabularies of whole pieces of text: one token per character (char) or per word and punctuation mark
(word), learned as every piece of the corpus."""
from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import numpy as np
import regex

from gpt.data.tokenizers.base import EOT, Corpus, check_distinct, concatenate, decodable, unknown_pieces_error


class CharTokenizer:
    """One token per character of a fixed alphabet."""

    kind = "char"
    split_pattern = None

    def __init__(self, chars: list[str]) -> None:
        self.chars = list(chars)
        self.ids = {c: i for i, c in enumerate(self.chars)}
        check_distinct(self.kind, self.chars, self.ids)
        self.vocab_size = len(self.chars)
        self.eot_id = self.ids.get(EOT)  # EOT is one entry, never matched by a single character of text

    @classmethod
    def fit(cls, text: str) -> CharTokenizer:
        return cls(sorted(set(text)))

    @classmethod
    def learn(cls, corpus: Corpus, vocab_size: int) -> CharTokenizer:
        """Every character of the corpus (all of it, so no text is unknown), then EOT."""
        return cls([*sorted(set().union(*corpus.map(_chars))), EOT])

    def encode(self, text: str) -> list[int]:
        unknown = [c for c in text if c not in self.ids]
        if unknown:
            raise unknown_pieces_error("character(s)", unknown, self.ids)
        return [self.ids[c] for c in text]

    def encode_many(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        points = np.frombuffer("".join(texts).encode("utf-32-le"), np.uint32)  # one code point per character
        ids = self._by_point[np.minimum(points, len(self._by_point) - 1)]
        if (ids < 0).any():
            self.encode("".join(texts))  # raises, naming the unknown characters
        return ids.astype(np.uint32), np.fromiter(map(len, texts), np.int64, len(texts))

    @functools.cached_property
    def _by_point(self) -> np.ndarray:
        """The id of each code point up to the largest one in the alphabet (then one past it), -1 where unknown."""
        points = {ord(c): i for c, i in self.ids.items() if len(c) == 1}
        table = np.full(max(points, default=0) + 2, -1, np.int64)
        table[list(points)] = list(points.values())
        return table

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in decodable(ids, self.vocab_size))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.chars}

    def token_bytes(self) -> list[int]:
        """UTF-8 bytes of the text each id stands for (for bits per byte); the end-of-text between documents is
        no text: 0, as in the byte-level vocabularies."""
        return [0 if c == EOT else len(c.encode()) for c in self.chars]


class WordTokenizer:
    """One token per word (apostrophes, ' or ’, in or before a word kept: "o'er", "’tis") or punctuation mark;
    a newline is a token of its own (end of line). Decoding joins words with one space, none before .,;:!?"""

    kind = "word"
    split_pattern = None
    NEWLINE = "\n"
    # regex's \w is Unicode's word characters, combining marks included: re's leaves out the vowel signs of Hindi
    # or Thai and an accent written as a mark (NFD), so their words were cut apart and decoded with spaces between.
    _pieces = regex.compile(r"\n|['’]?\w+(?:['’]\w+)*|[^\w\s]")
    _closing = frozenset(".,;:!?")

    def __init__(self, words: list[str]) -> None:
        self.words = list(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        check_distinct(self.kind, self.words, self.ids)
        self.vocab_size = len(self.words)
        self.eot_id = self.ids.get(EOT)  # "<|endoftext|>" in text splits into punctuation and a word: never EOT
        # The words the pattern reads as one piece each: a text of them one space apart is those pieces, as no piece
        # takes in a space (most of a task's lines, whose encoding was a third of a data=tasks run's start).
        self.piece_ids = {w: i for w, i in self.ids.items() if self._pieces.findall(w) == [w]}

    @classmethod
    def fit(cls, text: str) -> WordTokenizer:
        return cls(sorted(set(cls._pieces.findall(text)) | {cls.NEWLINE}))

    @classmethod
    def learn(cls, corpus: Corpus, vocab_size: int) -> WordTokenizer:
        """Every word of the corpus, then EOT."""
        return cls([*sorted(set().union({cls.NEWLINE}, *corpus.map(_words))), EOT])

    def encode(self, text: str) -> list[int]:
        try:
            return [self.piece_ids[w] for w in text.split(" ")]
        except KeyError:  # anything else: punctuation beside a word, other spacing, an unknown word
            pass
        pieces = self._pieces.findall(text)
        unknown = [p for p in pieces if p not in self.ids]
        if unknown:
            raise unknown_pieces_error("word(s)", unknown, self.ids)
        return [self.ids[p] for p in pieces]

    def encode_many(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return concatenate([self.encode(text) for text in texts])

    def decode(self, ids: list[int]) -> str:
        out: list[str] = []
        for i in decodable(ids, self.vocab_size):
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
        word; the spacing of the original text (dropped by encode) is not known. The end-of-text between documents
        is no text: 0."""
        return [0 if w in (self.NEWLINE, EOT) else len(w.encode()) + (w not in self._closing) for w in self.words]


def _chars(texts: Iterable[str]) -> set[str]:
    chars: set[str] = set()
    for text in texts:
        chars.update(text)
    return chars


def _words(texts: Iterable[str]) -> set[str]:
    words: set[str] = set()
    for text in texts:
        words.update(WordTokenizer._pieces.findall(text))
    return words
