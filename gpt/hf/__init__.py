"""Convert between tinygpt and Hugging Face transformers: GPT-2, Llama, Mistral and Qwen3, one module per
family behind FAMILIES (keyed by the Hugging Face config's model_type). Needs the optional `transformers`
(`pip install tinygpt[hf]`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gpt.data.tokenizers.base import Tokenizer
from gpt.hf.family import Family
from gpt.hf.gpt2 import GPT2
from gpt.hf.llama import Llama
from gpt.hf.mistral import Mistral
from gpt.hf.qwen3 import Qwen3
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT
from gpt.overrides import as_override, model_setting
from gpt.validate import first_line

FAMILIES: dict[str, Family] = {family.model_type: family for family in (GPT2(), Llama(), Mistral(), Qwen3())}


def transformers_module() -> Any:
    try:
        import transformers
    except ImportError:
        raise ValueError("Hugging Face conversion needs transformers: pip install 'tinygpt[hf]'") from None
    return transformers


def family_of(hf_config: Any) -> Family:
    """The family of a Hugging Face config, by its model_type."""
    family = FAMILIES.get(hf_config.model_type)
    if family is None:
        raise ValueError(f"model_type={hf_config.model_type} has no tinygpt conversion; "
                         f"supported: {', '.join(FAMILIES)}")
    return family


def family_for(cfg: ModelConfig) -> Family:
    """The first family that expresses every part of a tinygpt config, or ValueError saying what the nearest
    families (fewest parts to change) would need."""
    misses = {name: family.mismatches(cfg, model_setting) for name, family in FAMILIES.items()}
    fewest = min(len(m) for m in misses.values())
    nearest = [name for name, m in misses.items() if len(m) == fewest]
    if fewest:
        needs = "; ".join(f"{name} needs {', '.join(misses[name])}" for name in nearest)
        added = " ".join(f"{model_setting(field)}={as_override(allowed[0])}"
                         for field, allowed in FAMILIES[nearest[0]].needs(cfg).items())
        raise ValueError(f"no Hugging Face family has this model's parts: {needs}: train one with {nearest[0]}'s "
                         f"parts: add {added} to its train.py command")
    return FAMILIES[nearest[0]]


def folder_tokenizer(folder: Path) -> Tokenizer:
    """The tokenizer that comes with a Hugging Face folder, as its family reads it."""
    config = transformers_module().AutoConfig.from_pretrained(folder, local_files_only=True)
    return family_of(config).tokenizer(folder)


def from_hf(model_or_folder: Any) -> GPT:
    """A transformers causal LM (GPT-2, Llama, Mistral, Qwen3), or a folder it was `save_pretrained` into,
    -> an equal tinygpt GPT in eval mode. A config field tinygpt cannot express is refused before any weights
    load."""
    transformers = transformers_module()
    hf = model_or_folder
    if isinstance(model_or_folder, (str, Path)):
        folder = Path(model_or_folder)
        if not (folder / "config.json").is_file():
            raise ValueError(f"{folder} holds no config.json: pass a folder written by save_pretrained")
        try:
            config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
        except OSError as err:  # a config.json that is not JSON: a traceback through train.py init_from=
            raise ValueError(f"{folder}/config.json does not load: {err}") from None
        family_of(config).model_config(config)
        try:
            hf, loading = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True,
                                                                            output_loading_info=True)
        except Exception as err:  # noqa: BLE001 - no weights file (OSError), a torn one (SafetensorError), ...
            raise ValueError(f"{folder} holds no weights that load ({first_line(err)}): copy the "
                             "model.safetensors (or pytorch_model.bin) that goes with its config.json again") from None
        # transformers starts a tensor the file lacks at random (a base model saved without its untied LM head):
        # converted, the model would answer at random, differently at every load.
        if missing := sorted(loading["missing_keys"]):
            raise ValueError(f"{folder} lacks {len(missing)} of its model's weights ({', '.join(missing[:3])}"
                             f"{', ...' if len(missing) > 3 else ''}): save the whole causal LM "
                             "(AutoModelForCausalLM, with its LM head) there, or copy its weights file again")
    elif not hasattr(hf, "config") or not hasattr(hf, "state_dict"):  # was "'GPT' object has no attribute 'config'"
        hint = ": it is tinygpt's already, and to_hf converts it to transformers" if isinstance(hf, GPT) else ""
        raise ValueError(f"from_hf takes a transformers causal LM or a folder it was save_pretrained into, not a "
                         f"{type(hf).__name__}{hint}")
    family = family_of(hf.config)
    cfg = family.model_config(hf.config)
    theirs = hf.state_dict()
    names = list(family.names(cfg))
    # A base model (AutoModel) has no LM head, and its tensors lack the causal LM's prefix: a KeyError otherwise.
    if lacking := [name for _, name, _ in names if name not in theirs]:
        raise ValueError(f"this {type(hf).__name__} has no {lacking[0]}: pass a causal LM "
                         "(transformers.AutoModelForCausalLM), whose LM head tinygpt converts too")
    model = GPT(cfg)
    model.load_state_dict({ours: theirs[name].t() if transposed else theirs[name]
                           for ours, name, transposed in names})
    return model.eval()


def to_hf(model: GPT) -> Any:
    """A tinygpt GPT whose parts a family expresses (chosen by `family_for`) -> an equal transformers model,
    float32, eval mode."""
    if not isinstance(model, GPT):  # gpt.load's TextModel was "'TextModel' object has no attribute 'cfg'"
        raise ValueError(f"to_hf takes a tinygpt GPT, not a {type(model).__name__}: pass a TextModel's .model "
                         "(gpt.load(path).model)")
    transformers = transformers_module()
    family = family_for(model.cfg)
    config = getattr(transformers, family.config_class)(**family.hf_config(model))
    hf = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    ours = model.state_dict()
    with torch.no_grad():
        hf.load_state_dict({name: ours[key].t() if transposed else ours[key]
                            for key, name, transposed in family.names(model.cfg)})
    return hf.eval()
