"""The one interface every tokenizer kind gives (encode(text) -> ids, decode(ids) -> text, vocab_size, the end-of-text
id, a plain dict form that travels inside model.pt), what a kind learns from, and the checks and helpers the kinds
share."""
from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator
from typing import Any, Protocol, TypeVar

import numpy as np
import regex
import tiktoken
from tiktoken_ext.openai_public import r50k_pat_str


EOT = "<|endoftext|>"  # the token between documents; GPT-2's name for it
GPT2_SPLIT = regex.compile(r50k_pat_str)  # GPT-2's pre-tokenizer: the pieces BPE merges within
T = TypeVar("T")


class Corpus(Protocol):
    """What a tokenizer learns its vocabulary from (gpt/data/workers.py gives one)."""

    def map(self, fn: Callable[[Iterator[str]], T]) -> Iterator[T]:
        """fn applied to the texts of each work unit, in parallel processes: fn must be a module-level function."""

    def texts(self, max_bytes: int) -> Iterator[str]:
        """The corpus's texts in order, up to about max_bytes of UTF-8."""


class Tokenizer(Protocol):
    vocab_size: int
    eot_id: int | None  # the end-of-text id, None in vocabularies learned without one (the calculator's)
    # What a byte-level BPE cuts text by before it merges (no token spans two pieces); None where tokens follow no
    # such cut
    split_pattern: regex.Pattern[str] | None

    def encode(self, text: str) -> list[int]: ...

    def encode_many(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(the ids of all texts, one after the other, as uint32; how many ids each text gave): what `encode`
        gives for each, in far fewer calls (corpus preparation encodes millions of documents)."""

    def decode(self, ids: list[int]) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...

    def token_bytes(self) -> list[int]: ...


class InstallError(ValueError):
    """What a tokenizer needs is missing or damaged on this machine: the fault of no model.pt that names it."""


SMALL_VOCAB = 64  # a vocabulary this size fits in an error line, so the line can say what to write instead


def lowercase_hint(unknown: Iterable[str], known: Container[str]) -> str:
    """"; the vocabulary has 'two': try lowercase" where `known` has the lowercase form of a piece it lacks, else ''."""
    lower = list(dict.fromkeys(p.lower() for p in unknown if p.lower() != p and p.lower() in known))
    return f"; the vocabulary has {', '.join(map(repr, lower))}: try lowercase" if lower else ""


def unknown_pieces_error(kind: str, unknown: list[str], known: dict[str, int]) -> ValueError:
    """One line listing every piece of a text the vocabulary lacks, with a hint where it has the lowercase form."""
    unknown = list(dict.fromkeys(unknown))
    hint = lowercase_hint(unknown, known)
    if not hint and len(known) <= SMALL_VOCAB:  # "2+2=" to the calculator: the fix is to write its words
        hint = f"; use its own: {', '.join(map(repr, known))}"
    return ValueError(f"{kind} {', '.join(map(repr, unknown))} not in the vocabulary of this model{hint}")


def decodable(ids: Iterable[int], vocab_size: int) -> list[int]:
    """The ids of one sequence (a list, tensor or array) as a list of ints, or ValueError naming an id outside
    0..vocab_size-1 (a list-backed vocabulary read -1 as its last entry, silently, and a past-the-end id was an
    IndexError, KeyError or OverflowError by tokenizer), a batch of sequences or an id that is no integer (the
    (B, T) tensor gpt.generate returns was "Boolean value of Tensor with more than one value is ambiguous")."""
    # A tensor's or an array's scalars (or a list of them) as Python ints, and a batch's rows as lists.
    ids = ids.tolist() if hasattr(ids, "tolist") else [i.tolist() if hasattr(i, "tolist") else i for i in ids]
    bad = next((i for i in ids if type(i) is not int or not 0 <= i < vocab_size), None)
    if bad is None:
        return ids
    if isinstance(bad, (list, tuple)):
        raise ValueError(f"decode takes the ids of one sequence, not a batch of {len(ids)}: decode each row, such as "
                         "decode(ids[0])")
    if type(bad) is not int:
        raise ValueError(f"id {bad!r} is not an integer: decode integer token ids, such as gpt.generate returns")
    raise ValueError(f"id {bad} is outside this tokenizer's {vocab_size} ids (0..{vocab_size - 1}): decode the "
                     "ids of a model that uses it (gpt.generate's vocab_size= keeps new ids below its size)")


def utf8_text(text: str) -> str:
    """`text`, refused in one line where it holds a lone surrogate (a \\ud800 escape, or a byte that is not UTF-8
    in a command-line argument, which Python reads as one): tiktoken encodes it as U+FFFD without a word, and the
    tokenizers library raises a TypeError."""
    try:
        text.encode()
    except UnicodeEncodeError as err:
        raise ValueError(f"the text holds {text[err.start]!r} at character {err.start}, half of a UTF-16 surrogate "
                         "pair or a byte that is not UTF-8 (not a character): write it as UTF-8") from None
    return text


def check_distinct(kind: str, entries: list[str], ids: dict[str, int]) -> None:
    """Refuse, in one line, a vocabulary that lists an entry twice: it loaded, and the entry encoded to its later
    id, a row the model learned as another token."""
    if len(ids) < len(entries):
        twice = next(e for i, e in enumerate(entries) if ids[e] != i)
        raise ValueError(f"its {kind} vocabulary holds {twice!r} twice, at positions {entries.index(twice)} and "
                         f"{ids[twice]}: each entry is one id")


def split_before_a_word(tokenizer: Tokenizer, text: str) -> str:
    """The whitespace `text` ends in where a byte-level BPE (gpt2, bpe) cuts it otherwise once a word follows, as
    in the text it was trained on: 'a ' ends in the lone ' ' token where text has 'a', ' time', and 'end.\\n\\n' in
    '\\n\\n' where text has '\\n', '\\n', 'The'. '' for any other text or tokenizer."""
    if (pattern := tokenizer.split_pattern) is None or not text[-1:].isspace():
        return ""
    pieces = pattern.findall(text)
    if pattern.findall(text + "a")[:len(pieces)] == pieces:
        return ""
    return text[len(text.rstrip()):]


def encode_ordinary_many(enc: tiktoken.Encoding, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each text as `enc.encode_ordinary` encodes it, in one call: the texts joined by end-of-text, where tiktoken
    cuts before its split pattern runs (so no token spans two texts), and the ids cut at its id."""
    if not texts or any(EOT in text for text in texts):  # text that spells the marker: encode it as text
        return concatenate([enc.encode_ordinary(utf8_text(text)) for text in texts])
    ids = enc.encode_to_numpy(utf8_text(EOT.join(texts)), allowed_special={EOT}, disallowed_special=())
    cuts = np.flatnonzero(ids == enc.eot_token)  # ordinary text never gives the end-of-text id
    lengths = np.diff(cuts, prepend=-1, append=len(ids)) - 1
    return np.delete(ids, cuts), lengths


def concatenate(encoded: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """encode_many's result from each text's ids."""
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    return np.fromiter((i for ids in encoded for i in ids), np.uint32, int(lengths.sum())), lengths
