"""A Hugging Face model folder's own tokenizer (data.tokenizer=<folder>), computed by the `tokenizers` library."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import tokenizers

from gpt.data.tokenizers.base import EOT, concatenate, decodable, utf8_text
from gpt.data.tokenizers.learned import TOKENIZERS


class HFTokenizer:
    """A Hugging Face folder's own tokenizer (its tokenizer.json, computed by the `tokenizers` library that
    transformers brings); the JSON travels in model.pt. Special tokens (BOS, EOS) are not added: tinygpt trains
    on running text, as with GPT-2's BPE."""

    kind = "hf"
    split_pattern = None

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
