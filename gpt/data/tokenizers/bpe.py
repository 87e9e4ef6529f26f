"""A byte-level BPE (Sennrich et al. 2016) trained on the user's corpus with Hugging Face `tokenizers`, encoded
through tiktoken."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import tiktoken
import tokenizers
from tiktoken_ext.openai_public import r50k_pat_str

from gpt.data.tokenizers.base import EOT, GPT2_SPLIT, Corpus, decodable, encode_ordinary_many, utf8_text


class BPETokenizer:
    """A byte-level BPE (Sennrich et al. 2016, on bytes as GPT-2 does) trained on the user's corpus by Hugging
    Face `tokenizers`: any text encodes, and decoding gives it back exactly. Id 0 is EOT, then the 256 bytes.
    Encoding runs its merges through tiktoken with GPT-2's split pattern, the pre-tokenizer the training used:
    the same ids, several times faster than the `tokenizers` encoder."""

    kind = "bpe"
    split_pattern = GPT2_SPLIT
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


@functools.cache
def _byte_of_char() -> dict[str, int]:
    """GPT-2's byte-level alphabet read backwards: printable bytes stand for themselves, the other 68 for the
    characters from U+0100 up, in byte order (how `tokenizers`' ByteLevel writes a token's bytes)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
                 *range(ord("\u00ae"), ord("\u00ff") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + i): b for i, b in enumerate(others)}}
