"""TextData: running text as a DataModule: files, folders or a downloaded corpus, prepared once into token shards,
read as random windows of block_size + 1 tokens."""
from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from gpt.data.batches import BatchedData, RandomWindows, windows
from gpt.data.download import download
from gpt.data.notes import input_notes, prepared_notes
from gpt.data.prepared import Prepared, check_prepared_as, corpus_record, load
from gpt.data.recipe import DocBytes, Recipe, ShardTokens
from gpt.data.tokenizers.base import Tokenizer
from gpt.validate import Fraction, PositiveInt


def resolved(paths: str | list[str]) -> list[str]:
    """A data.path-style setting (one path, or a list of them) as absolute paths."""
    return [str(Path(p).resolve()) for p in ([paths] if isinstance(paths, str) else paths)]


class TextData(BatchedData):
    """Running text: files (text, JSONL, Parquet, Arrow), folders of them, a saved Hugging Face dataset, a folder that
    `python -m gpt prepare` wrote, or a corpus downloaded once from `url` (checked by `sha256`) into
    <root>/<name>/. Prepared once into token shards under <root>/shards/ (gpt/data/prepare.py); a model sees
    random windows of block_size + 1 tokens, and validation a fixed, seeded set of windows.

    The corpus loads on first use (`vocab_size`, `tokenizer`, ...), not in __init__: building one reads nothing, and
    a mistake in it (a bad path) is a one-line ValueError from the first use.

    `given`: the settings the command line names (train.py passes them), which a prepared folder must have been
    made with even where they equal the default."""

    def __init__(self, block_size: PositiveInt, path: str | list[str] | None = None,
                 val_path: str | list[str] | None = None, name: str = "text",
                 url: str | None = None, sha256: str | None = None, tokenizer: str = "char",
                 vocab_size: PositiveInt = 4096, compact_vocab: bool | None = None, val_fraction: Fraction = 0.1,
                 text_field: str = "text", doc_bytes: DocBytes = 4096, shard_tokens: ShardTokens = 1 << 24,
                 num_proc: PositiveInt | None = None, batch_size: PositiveInt = 64, val_windows: PositiveInt = 512,
                 seed: int = 0, root: str = "data", given: Sequence[str] = ()) -> None:
        super().__init__()
        self.path, self.val_path, self.name, self.url = path, val_path, name, url
        self.sha256, self.root = sha256, Path(root)
        self.tokenizer_name, self.num_proc, self.given = tokenizer, num_proc, given
        self.options = dict(tokenizer=tokenizer, vocab_size=vocab_size, compact_vocab=compact_vocab,
                            val_fraction=val_fraction, text_field=text_field, doc_bytes=doc_bytes,
                            shard_tokens=shard_tokens)
        self.block_size, self.batch_size, self.val_windows, self.seed = block_size, batch_size, val_windows, seed
        self.max_tokens = block_size  # every window is exactly one context long

    @cached_property
    def sources(self) -> list[str]:
        if self.path:
            return resolved(self.path)
        if self.url and self.sha256:
            return [str(download(self.url, self.root / self.name / Path(self.url).name, self.sha256).resolve())]
        raise ValueError(f"data={self.name} needs data.path=<a text, JSONL or Parquet file, or a folder of them>")

    @cached_property
    def val_sources(self) -> list[str]:
        return resolved(self.val_path) if self.val_path else []

    @cached_property
    def corpus(self) -> Prepared:
        corpus = load(Recipe(self.sources, self.val_sources, **self.options), self.root, self.num_proc, self.given)
        # With validation text named (data.val_path, prepare's --val) it is all of validation, and data.path all of
        # training: no data.doc_bytes or data.val_fraction moves text between them.
        val_inputs = corpus.manifest["recipe"]["val_inputs"]
        split_by = "" if val_inputs else " or data.doc_bytes, or another data.val_fraction"
        if not val_inputs and corpus.folder.resolve() == Path(self.sources[0]):  # a prepared folder refuses both
            split_by = ", or delete it and prepare it again with a smaller --doc-bytes or another --val-fraction"
        for split, ids, sources in (("training", corpus.train, self.sources),
                                    ("validation", corpus.val, val_inputs or self.sources)):
            if len(ids) < self.block_size + 1:
                raise ValueError(f"the {split} split of {', '.join(sources)} has {len(ids)} {self.tokenizer_name} "
                                 f"tokens, fewer than model.block_size+1={self.block_size + 1}: use more text, or a "
                                 f"smaller model.block_size{split_by}")
        return corpus

    @property
    def tokenizer(self) -> Tokenizer:
        return self.corpus.tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def meta(self) -> dict[str, Any]:
        return {"corpus": self.name, "path": ", ".join(self.sources),
                "val_path": ", ".join(self.val_sources) or None, "tokenizer": self.tokenizer_name,
                "vocab_size": self.vocab_size, "val_fraction": self.corpus.manifest["recipe"]["val_fraction"],
                "shards": str(self.corpus.folder.resolve()), "seed": self.seed,
                **{key: self.record[key] for key in ("train_tokens", "val_tokens", "shards_sha256")}}

    @property
    def notes(self) -> list[str]:
        return [*input_notes(self.sources, self.val_sources), *prepared_notes(self.corpus)]

    @cached_property
    def record(self) -> dict[str, Any]:
        return corpus_record(self.corpus)

    def state_dict(self) -> dict[str, Any]:
        """Saved in each training checkpoint, so that a run resumed from it checks it continues on this corpus."""
        return self.record

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A resumed run's corpus must be the one its checkpoint trained on (a checkpoint from before this record,
        which Lightning never passes here, resumes unchecked)."""
        check_prepared_as(self.corpus, state_dict, str(self.trainer.ckpt_path),
                          "resume on the text and data settings it trained on, or start afresh without ckpt_path "
                          "and resume=true")

    def setup(self, stage: str | None = None) -> None:
        self.train_set = RandomWindows(self.corpus.train, self.block_size, self.batch_size, self.seed)
        # A seed apart from training's, so the fixed validation windows do not mirror the first batches.
        generator = torch.Generator().manual_seed(self.seed + 1)
        starts = torch.randint(len(self.corpus.val) - self.block_size, (self.val_windows,), generator=generator)
        self.val_set = windows(self.corpus.val, starts.numpy(), self.block_size)
