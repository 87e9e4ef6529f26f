"""The text API: a trained model, its tokenizer and its corpus's conventions, from text to text.

    import gpt
    model = gpt.load("outputs/<date>/<time>/model.pt")
    model.complete("thirty five plus eighty six equals")  # "one hundred twenty one"

Line-based corpora (the calculator, the attention tasks) hold one example per line and were trained with each
line starting after a newline: prompts get that line start, completions stop at the end of the line, and
decoding is greedy by default because each prompt has one right answer. Running text stops at the end-of-text
token between documents, where its vocabulary has one. generate.py, gpt.evaluation.evaluate and the
training callbacks all decode through here, so that convention lives in one place."""
from __future__ import annotations

import numbers
import warnings
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from gpt.data.tokenizers.base import Tokenizer, split_before_a_word
from gpt.inference.checkpoint import load_checkpoint
from gpt.inference.generation import check_sampling, generate, stream
from gpt.model.gpt import GPT
from gpt.validate import check_kind

SEEDS = (-2**63, 2**64 - 1)  # what torch.Generator.manual_seed takes
RUNNING_TEXT_TOKENS = 200  # default length of a continuation of running text
RUNNING_TEXT_TEMPERATURE = 0.8  # running text has no one right answer; greedy decoding of it loops
UNFINISHED = "\ufffd"  # what a byte-level tokenizer decodes the first bytes of a multi-byte character to
TOKENIZER_READS = ("encode", "decode", "vocab_size", "eot_id")  # what TextModel asks of a tokenizer


def line_prompt_ids(tokenizer: Tokenizer, prompt: str) -> list[int]:
    """`prompt`'s ids after the line start a line-based model was trained with; ValueError when it ends its line."""
    newline = tokenizer.encode("\n")[0]
    ids = tokenizer.encode(prompt)
    # A line read from a file keeps its line break: the model then answered a line of its own, not this one.
    if ids and ids[-1] == newline:
        raise ValueError(f"the prompt {prompt!r} ends its line, so this model would write a line of its own rather "
                         "than answer it: drop the line break at its end")
    return [newline, *ids]


def running_prompt_ids(tokenizer: Tokenizer, prompt: str) -> list[int]:
    """`prompt`'s ids in running text; no prompt starts as after a line break, or after the end-of-text token in a
    vocabulary without one; ValueError in a vocabulary with neither."""
    if ids := tokenizer.encode(prompt):
        return ids
    try:
        # A folder's tokenizer that splits on whitespace encodes a line break as nothing
        if newline := tokenizer.encode("\n"):
            return newline
    except ValueError:  # a corpus of one-line documents (JSONL, Parquet) has no line break to start after
        pass
    if tokenizer.eot_id is None:
        raise ValueError("this model's vocabulary has no line break or end-of-text token to start from: pass a prompt")
    return [tokenizer.eot_id]


class PromptWarning(UserWarning):
    """A prompt the model may continue poorly though it encodes; generate.py prints it as a note of its own."""


class TextModel:
    """A GPT with its tokenizer and the conventions of the corpus it was trained on (model.pt's `meta`): what
    `gpt.load` returns. Built from a GPT in hand, `meta` is its model.pt's (`gpt.load_checkpoint(path,
    with_meta=True)`), or `{"one_example_per_line": True}` for a calculator or task model and `{}` for running text."""

    def __init__(self, model: GPT, tokenizer: Tokenizer, meta: Mapping[str, Any]) -> None:
        # Swapped, or a tokenizer of another library, they failed at the first prompt: "'GPT' object has no attribute
        # 'eot_id'". A GPT is known by its cfg, as gpt.generate knows it, so a compiled one passes.
        how = "TextModel(model, tokenizer, meta), as gpt.load_checkpoint(path) returns them"
        if not hasattr(model, "cfg"):
            raise ValueError(f"TextModel takes a GPT first, not a {type(model).__name__}: {how}")
        if not all(hasattr(tokenizer, name) for name in TOKENIZER_READS):
            raise ValueError(f"TextModel takes this project's tokenizer, not a {type(tokenizer).__name__}: {how}")
        # Without it a calculator model was taken for running text: 200 tokens sampled at temperature 0.8.
        if not isinstance(meta, Mapping):
            raise ValueError(f"meta={meta!r} must be a mapping, the corpus's conventions: pass model.pt's (gpt.load, "
                             "or gpt.load_checkpoint(path, with_meta=True)), {'one_example_per_line': True} for a "
                             "calculator or task model, or {} for running text")
        self.model, self.tokenizer, self.meta = model, tokenizer, dict(meta)
        self.line_based = bool(self.meta.get("one_example_per_line"))
        self.newline = tokenizer.encode("\n")[0] if self.line_based else None

    @property
    def device(self) -> torch.device:
        """Where the model's weights are, and so where prompts are put."""
        return next(self.model.parameters()).device

    def prompt_ids(self, prompt: str) -> list[int]:
        """The ids the model is fed for `prompt`: after a line start on line-based corpora; running text with
        no prompt starts as after a line break, or after the end-of-text token in a vocabulary without one."""
        if not isinstance(prompt, str):  # complete(5) was "'int' object is not iterable" from inside the tokenizer
            raise ValueError(f"the prompt is a {type(prompt).__name__}: pass text, e.g. complete(\"one plus two "
                             "equals\")")
        return (line_prompt_ids if self.line_based else running_prompt_ids)(self.tokenizer, prompt)

    def cut_note(self, ids: list[int]) -> str:
        """A line on prompt ids past block_size, whose start the model never sees; '' for any other."""
        block_size = self.model.cfg.block_size
        if len(ids) <= block_size:
            return ""
        return f"the prompt is {len(ids)} tokens, past block_size={block_size}: the model sees its last {block_size}"

    def prompt_note(self, prompt: str) -> str:
        """A line on a prompt whose end the model never saw in training, '' for any other."""
        tail = split_before_a_word(self.tokenizer, prompt)
        if not tail:
            return ""
        return (f"the prompt ends in {tail!r}, which its tokenizer encodes otherwise where a word follows, as in the "
                "text the model learned: the continuation may be off; drop the trailing whitespace")

    @property
    def end(self) -> int | None:
        """The token that ends a completion: the end of the line on line-based corpora, else the end-of-text token
        (a document ended: what follows is another one; Hugging Face's generate stops at it too). Not shown."""
        return self.newline if self.line_based else self.tokenizer.eot_id

    def defaults(self, max_new_tokens: int | None, temperature: float | None) -> tuple[int, float, int | None]:
        """(max_new_tokens, temperature, stop token) with the corpus's defaults filled in. A line-based model
        stops at the end of its line unless a length is asked for; running text always stops at end-of-text."""
        stop = self.end if max_new_tokens is None or not self.line_based else None
        if max_new_tokens is None:
            max_new_tokens = self.model.cfg.block_size if self.line_based else RUNNING_TEXT_TOKENS
        if temperature is None:
            temperature = 0.0 if self.line_based else RUNNING_TEXT_TEMPERATURE
        return max_new_tokens, temperature, stop

    @staticmethod
    def greedy(temperature: float | None) -> str:
        """Why decoding at temperature 0 is greedy, for a refusal of a setting only sampling reads: `temperature` as
        the caller gave it, None where it is the corpus's default."""
        default = " (the default on one-example-per-line corpora)" if temperature is None else ""
        return f"temperature=0 decodes greedily{default}"

    def stream(self, prompt: str, max_new_tokens: int | None = None, temperature: float | None = None,
               top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
               generator: torch.Generator | None = None) -> Iterator[str]:
        """Yield the continuation of `prompt` piece by piece as it is decoded (the prompt itself is not repeated:
        `prompt` and the pieces read as the model's text). Pass `seed` for a reproducible sample, or a `generator`
        to continue one across calls."""
        if seed is not None and generator is not None:  # the seed would be ignored, the sample not the one asked for
            raise ValueError(f"seed={seed} and a generator were both given: pass seed= for a sample of its own, or "
                             "generator= to continue one across calls")
        if generator is not None and not isinstance(generator, torch.Generator):  # greedy decoding ignored it unread
            raise ValueError(f"generator={generator!r} must be a torch.Generator: pass seed={generator!r} for a seed")
        # torch's manual_seed said only "manual_seed expected a long" of seed="1", and overflowed past its range.
        check_kind("seed", seed, numbers.Integral, optional=True)
        if seed is not None and not SEEDS[0] <= seed <= SEEDS[1]:
            raise ValueError(f"seed={seed} must be in [{SEEDS[0]}, {SEEDS[1]}]")
        greedy = self.greedy(temperature)
        max_new_tokens, temperature, stop = self.defaults(max_new_tokens, temperature)
        check_sampling(temperature, top_k, top_p, max_new_tokens, self.tokenizer.vocab_size, greedy)
        ids = self.prompt_ids(prompt)
        # The ids stay as asked: the prompt may mean to end there, and its start is the caller's to drop.
        for note in (self.cut_note(ids), self.prompt_note(prompt)):
            if note:
                warnings.warn(note, PromptWarning, stacklevel=3)
        if generator is None and seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(seed)
        shown = self.tokenizer.decode(ids)
        # A tokenizer that drops whitespace (the word tokenizer's) joins the next word with a space of its own: after
        # a prompt ending in its own space, "two plus two equals " then " four" read with two.
        dropped = prompt[-1:].isspace() and not shown[-1:].isspace()
        idx = torch.tensor([ids], device=self.device)
        for token in stream(self.model, idx, max_new_tokens, temperature, top_k, top_p, stop_token=stop,
                            generator=generator, vocab_size=self.tokenizer.vocab_size):
            if stop is not None and token.item() == stop:
                break
            ids.append(token.item())
            # Decode the whole so a BPE piece that completes a multi-byte character prints whole; one that ends
            # mid-character decodes to U+FFFD until the rest of its bytes come, so that is held back till then.
            ready = self.tokenizer.decode(ids).rstrip(UNFINISHED)
            if dropped and len(ready) > len(shown):  # the first new text: its joining space is the prompt's
                shown += " " * ready.startswith(" ", len(shown))
                dropped = False
            if len(ready) > len(shown):
                yield ready[len(shown):]
                shown = ready
        if len(text := self.tokenizer.decode(ids)) > len(shown):  # bytes that never made a character
            yield text[len(shown):]

    def complete(self, prompt: str, max_new_tokens: int | None = None, temperature: float | None = None,
                 top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                 generator: torch.Generator | None = None) -> str:
        """The continuation of `prompt` as one string: exactly what `stream` yields, joined. On line-based
        corpora the leading space between the prompt and the answer is dropped ("five", not " five")."""
        text = "".join(self.stream(prompt, max_new_tokens, temperature, top_k, top_p, seed, generator))
        return text.lstrip(" ") if self.line_based else text

    @torch.no_grad()
    def complete_batch(self, prompts: list[str], max_new_tokens: int | None = None, batch_size: int = 512
                       ) -> list[str]:
        """Greedy completions of many prompts, batched by token length so no padding is needed; each stops at the
        end of its line on line-based corpora, at end-of-text on running text, or after max_new_tokens (by default
        complete's: block_size on line-based corpora, else 200). Same answers as `complete(prompt, temperature=0)`
        with its default length."""
        # A string is a sequence too: each of its characters was completed as a prompt of its own, without a word.
        if isinstance(prompts, str):
            raise ValueError("complete_batch takes a list of prompts, not one string: complete_batch([prompt]), or "
                             "complete(prompt)")
        check_kind("batch_size", batch_size, numbers.Integral)
        if batch_size < 1:  # range() said "arg 3 must not be zero"
            raise ValueError(f"batch_size={batch_size} must be at least 1")
        max_new_tokens = self.defaults(max_new_tokens, None)[0]
        by_length: dict[int, list[tuple[int, list[int]]]] = defaultdict(list)
        for i, prompt in enumerate(prompts):
            ids = self.prompt_ids(prompt)
            if note := self.cut_note(ids):
                warnings.warn(note, PromptWarning, stacklevel=3)  # past torch.no_grad's wrapper, to the caller
            by_length[len(ids)].append((i, ids))
        outputs = [""] * len(prompts)
        for group in by_length.values():
            for start in range(0, len(group), batch_size):
                chunk = group[start:start + batch_size]
                idx = torch.tensor([ids for _, ids in chunk], device=self.device)  # (B, T)
                new = generate(self.model, idx, max_new_tokens, temperature=0.0, stop_token=self.end,
                               vocab_size=self.tokenizer.vocab_size)[:, idx.shape[1]:].tolist()  # (B, <= new)
                for (i, ids), row in zip(chunk, new):
                    if self.end in row:
                        row = row[:row.index(self.end)]
                    text = self.tokenizer.decode(ids + row)[len(self.tokenizer.decode(ids)):]
                    outputs[i] = text.lstrip(" ") if self.line_based else text
        return outputs


def load(path: str | Path, device: str = "cpu", purpose: str = "to generate") -> TextModel:
    """A model.pt from train.py, or the run folder holding it, as a TextModel on `device` (cpu, cuda, cuda:<index>
    or mps); CheckpointError with a one-line reason if it cannot load, its way on worded for `purpose`."""
    model, tokenizer, meta = load_checkpoint(path, device=device, with_meta=True, purpose=purpose)
    return TextModel(model, tokenizer, meta)
