"""What preparation and a run say about a corpus before anything trains on it: what the inputs' folders leave out,
a validation share far from val_fraction, a trained vocabulary smaller than asked."""
from __future__ import annotations

from gpt.data.inputs import unread_notes
from gpt.data.prepared import Prepared
from gpt.data.recipe import TRAINING_NAMES, Names


def split_note(prepared: Prepared) -> str | None:
    """A note where the validation split's share of the tokens is under half or over twice what val_fraction asks:
    each document, or ~doc_bytes piece of a long one, goes to a split by the hash of its text, so a corpus of few
    pieces splits far from the fraction (README.md's 11.5 KB at 0.1: 64% held out), and the loss said to be held out
    is of another share than the one set. None with validation files (--val), which the fraction does not split."""
    recipe = prepared.manifest["recipe"]
    total = len(prepared.train) + len(prepared.val)
    if recipe["val_inputs"] or not total:
        return None
    share, asked = len(prepared.val) / total, recipe["val_fraction"]
    if asked / 2 <= share <= 2 * asked:
        return None
    return (f"{share:.0%} of {prepared.folder}'s tokens are validation, where val_fraction={asked} asks for "
            f"{asked:.0%}: each document, or ~{recipe['doc_bytes']:,}-byte piece of a long one, goes to a split by "
            "the hash of its text, and this corpus has few of them; a smaller doc_bytes (data.doc_bytes, prepare's "
            "--doc-bytes) splits it closer to the fraction")


def vocab_note(prepared: Prepared) -> str | None:
    """A note where a trained bpe vocabulary is smaller than the vocab_size asked: a small corpus holds fewer merges,
    and the model's size, its record and a sweep over vocab_size would read the asked size."""
    recipe, size = prepared.manifest["recipe"], prepared.tokenizer.vocab_size
    if recipe["tokenizer"] != "bpe" or size >= recipe["vocab_size"]:
        return None
    return (f"the bpe vocabulary of {prepared.folder} has {size:,} tokens, fewer than "
            f"vocab_size={recipe['vocab_size']:,} asks: its text holds no more merges (models on it embed the smaller "
            "vocabulary)")


def input_notes(inputs: list[str], val_inputs: list[str], names: Names = TRAINING_NAMES) -> list[str]:
    """What the inputs' folders leave out, named as the command gave them (a prepared folder's were named when it was
    prepared)."""
    return [*unread_notes(inputs, names.inputs), *unread_notes(val_inputs, names.val_inputs)]


def prepared_notes(prepared: Prepared) -> list[str]:
    """What a run on `prepared`, and prepare's own command, say before anything trains on it."""
    return [note for note in (split_note(prepared), vocab_note(prepared)) if note]
