"""model.pt: a self-describing export (format version, model config, tokenizer, weights, metadata)
that loads with torch.load(weights_only=True) and is all that generation needs."""
from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any, Literal, overload

import torch
from torch import nn

from gpt.atomic import atomic_open
from gpt.data.tokenizers import tokenizer_from_dict
from gpt.data.tokenizers.base import InstallError, Tokenizer
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT, without_foreign_settings
from gpt.overrides import path_argument, pasted
from gpt.validate import first_line

FORMAT = "tinygpt"
VERSION = 1
# Debugging switches are for the run that set them: a saved model never carries them into later generations.
RUN_ONLY = {"trace_shapes": False}
DEVICES = "cpu, cuda, cuda:<index> or mps"  # what check_device takes
DEVICE_HELP = f"{DEVICES} (default: cpu)"  # the --device help of each command that loads a model.pt


class CheckpointError(ValueError):
    """A checkpoint a user pointed at is missing, foreign or unsafe; the message is one line."""


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module under torch.compile's wrapper, so saved names carry no `_orig_mod.` prefix."""
    return getattr(model, "_orig_mod", model)


def save_model(path: str | Path, model: GPT, tokenizer: Tokenizer, meta: dict[str, Any] | None = None) -> None:
    plain = unwrap(model)
    with atomic_open(path) as f:
        torch.save({
            "format": FORMAT,
            "version": VERSION,
            "model_config": {**plain.cfg.to_dict(), **RUN_ONLY},
            "tokenizer": tokenizer.to_dict(),
            "state_dict": {k: v.detach().cpu() for k, v in plain.state_dict().items()},
            "meta": meta or {},
        }, f)


def safe_load(path: Path, reads: str, map_location: Any = "cpu") -> Any:
    """torch.load with weights_only=True: plain tensors and containers only, so a crafted pickle cannot
    run code. Every stored file's CRC-32 is checked first, so a flipped bit is found rather than loaded as a
    weight. Any failure is a CheckpointError of one line saying what is wrong with the file; one that is no torch
    file at all is told to point at what the caller `reads` instead (model.pt, checkpoints/last.ckpt)."""
    try:
        readable = zipfile.is_zipfile(path)  # torch.save writes a zip; anything else is not a checkpoint at all
        if readable:
            with zipfile.ZipFile(path) as archive:
                damaged = archive.testzip()
                folders = [info.filename for info in archive.infolist() if info.external_attr & 0x10]
    except Exception as err:  # a flipped bit in the zip's own records, which no CRC covers, raises many types
        raise CheckpointError(f"{path} is damaged ({err}): train it again, or copy it again") from None
    if not readable:
        raise CheckpointError(f"{path} is not a readable torch file (not written by torch.save, or cut short): "
                              f"point at a {reads} that training wrote, or train it again")
    if damaged:
        raise CheckpointError(f"{path} is damaged: its {damaged} does not match its checksum: train it again, or "
                              "copy it again")
    if folders:  # MS-DOS's folder bit: torch's reader then reads the member as empty, its weights whatever memory held
        raise CheckpointError(f"{path} is damaged: its {folders[0]} is marked as a folder: train it again, or copy "
                              "it again")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError(f"{path} holds objects outside plain tensors and containers; refusing to "
                              "unpickle it (weights_only=True) because it could run code") from None
    except Exception as err:  # a torn or corrupt file raises many types; all mean "not loadable"
        raise CheckpointError(f"{path} is not a readable torch file ({type(err).__name__})") from None


def runs_below(folder: Path) -> list[Path]:
    """The model.pt files of the runs under `folder` at the first depth that has any: a sweep's runs one level down,
    outputs/<date>/<time> two, multirun/<date>/<time>/<job> three. No deeper, so a home folder given by mistake is
    not searched whole."""
    for pattern in ("*/model.pt", "*/*/model.pt", "*/*/*/model.pt"):
        if found := sorted(folder.glob(pattern)):
            return found
    return []


def run_holding(path: Path) -> Path | None:
    """The run folder `path` lies in, up to three levels down (csv/version_0/metrics.csv): the nearest folder above it
    holding a model.pt, or a checkpoints/last.ckpt of a run stopped before writing one; None outside any run."""
    for folder in list(path.parents)[:3]:
        if (folder / "model.pt").is_file() or (folder / "checkpoints" / "last.ckpt").is_file():
            return folder.absolute() if folder == Path(".") else folder  # "." named in a message reads as nothing
    return None


def stopped_run(run: Path) -> str:
    """The way on from a run folder that holds a checkpoints/last.ckpt but no model.pt. Its last.ckpt is named by its
    path: resume=true takes the newest run of the same config, which may be a later one."""
    last = pasted("ckpt_path", str((run / "checkpoints" / "last.ckpt").resolve()))
    return ("its run stopped before writing one, and its checkpoints/last.ckpt is there: continue it with the command "
            f"that started it (its .hydra/overrides.yaml) plus {last} (its model.pt goes to the new run folder)")


def way_to(run: Path) -> str:
    """What to give instead of a folder or file inside `run`, which is no model.pt."""
    if (run / "model.pt").is_file():
        return f"give the run folder {run} or {run / 'model.pt'}"
    return f"it has no model.pt; {stopped_run(run)}"


def model_file(path: str | Path) -> Path:
    """`path` itself, or the model.pt inside it when it is a run folder. A leading ~ is the home folder, as a shell
    would read it: quoted, or after --ckpt=, or from Python, it was looked for as a folder named ~."""
    path = Path(path)
    if not path.exists() and path.parts[:1] == ("~",):
        path = path.expanduser()
    return path / "model.pt" if path.is_dir() else path


def read_checkpoint(path: str | Path, purpose: str = "to generate") -> dict[str, Any]:
    """Load a model.pt's dict safely (given a run folder, the model.pt inside it), or raise CheckpointError
    naming what is wrong with the file. `purpose` says what the caller reads it for ("to export", "for init_from"),
    so that a Lightning checkpoint given instead is told the way on for that command, not another's."""
    path = model_file(path)
    if not path.is_file():
        # A run killed before it wrote model.pt; another name beside last.ckpt is a path mistyped, not that.
        if path.name == "model.pt" and (path.parent / "checkpoints" / "last.ckpt").is_file():
            raise CheckpointError(f"no model.pt in {path.parent}: {stopped_run(path.parent)}")
        # A sweep's folder or a folder of runs: "train one" sent a user who had trained several away.
        runs = runs_below(path.parent) if path.name == "model.pt" else []
        if runs:
            raise CheckpointError(f"no model.pt in {path.parent}: it holds {len(runs)} run folder(s) with one, such "
                                  f"as {runs[0].parent}: give one of them (python -m gpt report "
                                  f"{path_argument(path.parent)} compares them)")
        if path.name == "model.pt" and (path.parent / "config.json").is_file():  # what python -m gpt export writes
            raise CheckpointError(f"{path.parent} is a Hugging Face folder, not a tinygpt run: load it with "
                                  f"transformers, or train from it with init_from={path.parent}")
        # Its checkpoints/ or .hydra/: "train one" sent a user who had trained one away.
        if path.name == "model.pt" and path.parent.is_dir() and (run := run_holding(path.parent)):
            raise CheckpointError(f"{path.parent} is a folder inside the run folder {run}: {way_to(run)}")
        raise CheckpointError(f"no checkpoint at {path}: train one with `python train.py`, or give the path of a "
                              "model.pt or of the run folder holding it")
    run = run_holding(path) if path.name != "model.pt" else None  # a run's own model.pt, damaged, is that
    if run and not zipfile.is_zipfile(path):  # its summary.json, say: "train it again" as if it were a model.pt
        raise CheckpointError(f"{path} is a file of the run folder {run}, not a model.pt: {way_to(run)}")
    payload = safe_load(path, "model.pt")
    if isinstance(payload, dict) and "state_dict" in payload and \
            {"optimizer_states", "pytorch-lightning_version"} & payload.keys():  # what Lightning saves
        if run and (run / "model.pt").is_file():  # "the model.pt next to it" was one folder up from checkpoints/
            raise CheckpointError(f"{path} is a Lightning checkpoint for resuming training (python train.py with its "
                                  f"run's overrides plus {pasted('ckpt_path', str(path.resolve()))}), not a model.pt: "
                                  f"{purpose}, {way_to(run)}")
        if run:
            raise CheckpointError(f"{path} is a Lightning checkpoint for resuming training, not a model.pt, and its "
                                  f"run folder {run} has none: {stopped_run(run)}")
        raise CheckpointError(f"{path} is not a tinygpt model.pt (a Lightning .ckpt is for resuming training; "
                              f"{purpose}, give the model.pt next to it)")
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a tinygpt model.pt: give the model.pt that python train.py wrote in its "
                              "run folder")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path} has format version {payload.get('version')}; this tinygpt reads {VERSION}")
    return payload


@overload
def load_checkpoint(path: str | Path, device: str = "cpu", with_meta: Literal[False] = False,
                    purpose: str = "to generate") -> tuple[GPT, Tokenizer]:
    ...


@overload
def load_checkpoint(path: str | Path, device: str = "cpu", *, with_meta: Literal[True],
                    purpose: str = "to generate") -> tuple[GPT, Tokenizer, dict[str, Any]]:
    ...


def load_checkpoint(path: str | Path, device: str = "cpu", with_meta: bool = False,
                    purpose: str = "to generate") -> tuple[GPT, Tokenizer] | tuple[GPT, Tokenizer, dict[str, Any]]:
    """model.pt (or its run folder) -> (model in eval mode, tokenizer), plus its metadata dict when with_meta.
    `purpose` is read_checkpoint's."""
    check_device(device)
    payload = read_checkpoint(path, purpose)
    try:
        model = GPT(without_foreign_settings(ModelConfig.from_dict({**payload["model_config"], **RUN_ONLY})))
        mismatch = weights_mismatch(model.state_dict(), payload["state_dict"])
        if mismatch:  # torch's own error is many lines, and its first names nothing
            raise ValueError(f"its weights do not fit its saved model config: {mismatch}; train it again, or copy "
                             "it again")
        model.load_state_dict(payload["state_dict"])
        tokenizer = tokenizer_from_dict(payload["tokenizer"])
        if tokenizer.vocab_size > model.cfg.vocab_size:  # an id past the embedding was an IndexError mid-generation
            raise ValueError(f"its tokenizer has {tokenizer.vocab_size} ids, its model embeds "
                             f"{model.cfg.vocab_size}")
        meta = payload.get("meta", {})
        if not isinstance(meta, dict):
            raise ValueError(f"its meta is a {type(meta).__name__}, not a mapping")
    except InstallError:  # this machine's fault, not the file's: its line says what to install
        raise
    # A section of another type (a list for the config, None for the tokenizer) fails as a TypeError or
    # AttributeError inside the code that reads it.
    except KeyError as err:  # its own text is the key's bare repr, which says nothing of what is wrong
        raise CheckpointError(f"{path} is damaged: it lacks the key {err}") from None
    except (ValueError, RuntimeError, TypeError, AttributeError) as err:
        raise CheckpointError(f"{path} is damaged: {first_line(err)}") from None
    if bad := first_non_finite(model.state_dict()):  # greedy decoding of it says nothing, sampling raises
        raise CheckpointError(f"{path} holds weights that are not finite: {bad}; it cannot generate: train it again "
                              "(a lower optim.lr if its loss diverged), or copy it again")
    model.to(device).eval()
    return (model, tokenizer, meta) if with_meta else (model, tokenizer)


def weights_mismatch(expected: dict[str, torch.Tensor], saved: dict[str, Any]) -> str:
    """The first way `saved` differs from a model's `expected` weights (a tensor missing, one the model has no
    place for, or one of another shape), in a few words; '' when they fit."""
    missing = next((name for name in expected if name not in saved), None)
    if missing:
        return f"{missing} is missing"
    extra = next((name for name in saved if name not in expected), None)
    if extra:
        return f"{extra} has no place in the model"
    for name, tensor in expected.items():
        shape = tuple(getattr(saved[name], "shape", ()))
        if shape != tuple(tensor.shape):
            return f"{name} is {shape} in the file, {tuple(tensor.shape)} in the model it builds"
    return ""


def first_non_finite(weights: dict[str, torch.Tensor]) -> str:
    """The first tensor holding NaN or inf, and how many, in a few words; '' when all are finite. A float32 sum per
    tensor is finite exactly when its values are, unless finite values overflow it: only then is each one tested."""
    for name, tensor in weights.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor.sum(dtype=torch.float32)):
            count = int((~torch.isfinite(tensor)).sum())
            if count:
                return f"{name} has {count:,} NaN or infinite value{'s' * (count != 1)} of {tensor.numel():,}"
    return ""


def check_device(name: str) -> None:
    """Refuse, in one line, a device this torch cannot use (torch's own error is a long assertion). Worded for
    both gpt.load(path, device=...) and the commands' --device, which pass the name through here."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):  # a TypeError of None (a default passed on) listed torch's overloads
        raise ValueError(f"device {name!r} is not a device name: use {DEVICES}") from None
    if device.type not in ("cpu", "cuda", "mps"):  # meta, xla, ...: names torch knows that cannot run a model here
        raise ValueError(f"device {name!r}: tinygpt runs on {DEVICES}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r}: this torch ({torch.__version__}) has no CUDA device it can use; use cpu")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r}: MPS is not available here; use cpu")


def corpus_of(meta: dict[str, Any]) -> str:
    """The corpus a model.pt's meta names, as a message says what a model was trained on; a model.pt saved without
    one (by save_model from Python) still reads as a sentence."""
    return meta.get("corpus", "an unrecorded corpus")


def describe(path: Path, meta: dict[str, Any]) -> str:
    """Which model was loaded, in one line: its path and the corpus it learned (model.pt's meta)."""
    source = f" ({meta['path']})" if meta.get("path") else ""
    return f"model: {path} (trained on {corpus_of(meta)}{source})"


def newest_checkpoint(roots: tuple[str, ...] = ("outputs", "multirun")) -> Path:
    """The most recently written model.pt under Hydra's run and sweep folders."""
    found = [p for root in map(Path, roots) if root.is_dir() for p in root.rglob("model.pt")]
    if not found:
        raise CheckpointError(f"no model.pt under {'/ or '.join(roots)}/: run `python train.py` first, "
                              "or pass --ckpt PATH")
    return max(found, key=lambda p: p.stat().st_mtime)
