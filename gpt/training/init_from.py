"""Start training from pretrained weights (`python train.py init_from=<Hugging Face folder, model.pt or run folder>`):
their architecture and weights, this run's block_size and dropout, and the tokenizer they came with."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from gpt.data.tokenizers.base import Tokenizer
from gpt.data.tokenizers.gpt2 import GPT2Tokenizer
from gpt.inference.checkpoint import load_checkpoint, model_file
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT
from gpt.model.positional import table_size
from gpt.overrides import as_override, pasted

# What init_from takes from the run, not the pretrained model: how long a context to train, how to regularise it,
# how to compute attention and whether to print shapes; none of them changes a weight's shape or meaning.
TUNABLE = ("block_size", "dropout", "kernel", "trace_shapes")


def check_init_from(init_from: str | None) -> None:
    """Refuse a path that holds no weights, before any data work."""
    if init_from is None:
        return
    path = Path(init_from)
    if not model_file(path).is_file() and not (path / "config.json").is_file():
        raise ValueError(f"init_from={init_from} is neither a model.pt (or a run folder holding one) nor a Hugging "
                         "Face folder with config.json")


def load_pretrained(path: Path) -> tuple[GPT, Tokenizer, dict[str, Any]]:
    """A model.pt (or the run folder holding it) with its meta, or a Hugging Face folder (gpt.hf.from_hf) with its
    tokenizer (GPT-2's BPE from this project's offline files for a gpt2 folder with GPT-2's vocabulary, the folder's
    own for the others) and no meta."""
    if model_file(path).is_file():
        return load_checkpoint(path, with_meta=True, purpose="for init_from")
    from gpt.hf import folder_tokenizer, from_hf  # transformers is optional: only Hugging Face folders need it
    model = from_hf(path)
    # What `python -m gpt export` writes for tinygpt's own char, word and bpe tokenizers: the weights alone.
    no_tokenizer = ValueError(f"init_from={path} holds no tokenizer, so which text its ids stand for is unknown: "
                              "give init_from the model.pt it was exported from, or a folder with its tokenizer.json")
    try:
        tokenizer = folder_tokenizer(path)
    except ValueError:
        if (path / "tokenizer.json").is_file():  # a damaged one: its own line says so
            raise
        raise no_tokenizer from None
    # A gpt2 folder without tokenizer files is read as GPT-2's BPE: one of fewer ids came from another tokenizer.
    if isinstance(tokenizer, GPT2Tokenizer) and tokenizer.vocab_size > model.cfg.vocab_size \
            and not any((path / name).is_file() for name in ("tokenizer.json", "vocab.json")):
        raise no_tokenizer
    if tokenizer.vocab_size > model.cfg.vocab_size:
        raise ValueError(f"init_from={path} has vocab_size={model.cfg.vocab_size}, fewer than its tokenizer's "
                         f"{tokenizer.vocab_size} ids: every id needs an embedding row")
    return model, tokenizer, {}


def data_setting(tokenizer: Tokenizer, init_from: str, meta: dict[str, Any]) -> str:
    """The data overrides that give a corpus this tokenizer: for a model of tasks (its model.pt's meta), the tasks
    and their knobs, which decide a task's vocabulary; no tokenizer setting does."""
    if "tasks" in meta:
        knobs = " ".join(pasted(f"data.tasks.{task}.{knob}", value)
                         for task, settings in meta["tasks"].items() for knob, value in settings.items())
        return f"{pasted('data', meta['corpus'])} {knobs} (what it was trained on)"
    kind = tokenizer.to_dict()["kind"]
    if isinstance(tokenizer, GPT2Tokenizer) and tokenizer.vocab is None:
        # A prepared folder keeps its own vocabulary: the setting alone would be refused, naming the same setting.
        return "data.tokenizer=gpt2 data.compact_vocab=false (a folder from `python -m gpt prepare`: prepare it " \
            "again with --tokenizer gpt2 --compact-vocab false)"
    if kind == "hf":
        return pasted("data.tokenizer", init_from)
    if kind == "bpe":  # trained to a size: on the same text, another data.vocab_size is another vocabulary
        return f"data.tokenizer=bpe data.vocab_size={tokenizer.vocab_size} on the text it was trained on"
    return f"data.tokenizer={kind} on the text it was trained on"


def start_from(init_from: str | None, cfg: ModelConfig, tokenizer: Tokenizer,
               given: dict[str, Any] | None = None) -> tuple[ModelConfig, dict[str, Any] | None, dict[str, Any]]:
    """(config, weights, meta) to train: `cfg` and fresh weights without init_from; otherwise init_from's
    architecture and weights with cfg's settings of how to run (TUNABLE), if the corpus's tokenizer is the one it came
    with, and its model.pt's meta (what it trained on). `given`: the model fields the command line sets, refused
    where init_from's architecture has another value."""
    if init_from is None:
        return cfg, None, {}
    model, its_tokenizer, meta = load_pretrained(Path(init_from))
    for name, value in (given or {}).items():
        if name not in TUNABLE and getattr(model.cfg, name) != value:
            raise ValueError(f"model.{name}={as_override(value)}: init_from={init_from} keeps its model's "
                             f"{name}={as_override(getattr(model.cfg, name))}; drop it (init_from takes "
                             f"{', '.join(f'model.{field}' for field in TUNABLE)} from the run)")
    if its_tokenizer.to_dict() != tokenizer.to_dict():
        raise ValueError(f"init_from={init_from} reads {describe(its_tokenizer)} but this corpus is tokenized "
                         f"with {describe(tokenizer)}: set {data_setting(its_tokenizer, init_from, meta)}")
    state = model.state_dict()
    table = state.get("pos.table.weight")  # learned positions: one row per position
    if table is not None and table.shape[0] < cfg.block_size:
        raise ValueError(f"init_from={init_from} learned {table.shape[0]} positions: set model.block_size="
                         f"{table.shape[0]} or less")
    tuned = ModelConfig.from_dict({**model.cfg.to_dict(), **{field: getattr(cfg, field) for field in TUNABLE}})
    if table is not None:  # cut to the rows the tuned model's table has: more than its block with random_positions
        state["pos.table.weight"] = table[:table_size(tuned)].clone()
    print(f"init_from={init_from}: {model.num_params():,} pretrained parameters; "
          f"{', '.join(f'model.{field}={as_override(getattr(cfg, field))}' for field in TUNABLE)} apply, the other "
          "model fields come from it")
    return tuned, state, meta


def describe(tokenizer: Tokenizer) -> str:
    return f"a {tokenizer.to_dict()['kind']} tokenizer of {tokenizer.vocab_size:,} ids"
