"""The kinds data.tokenizer=<name> learns from a corpus, by name: a module below hf.py, whose refusal of a folder
lists them, and below the package's KINDS, which adds that folder kind."""
from __future__ import annotations

from typing import Any

from gpt.data.tokenizers.bpe import BPETokenizer
from gpt.data.tokenizers.gpt2 import GPT2Tokenizer
from gpt.data.tokenizers.vocab import CharTokenizer, WordTokenizer

# data.tokenizer=<name> learns one of these from the corpus; data.tokenizer=<folder> takes a folder's HFTokenizer.
TOKENIZERS: dict[str, Any] = {"char": CharTokenizer, "word": WordTokenizer, "gpt2": GPT2Tokenizer,
                              "bpe": BPETokenizer}
