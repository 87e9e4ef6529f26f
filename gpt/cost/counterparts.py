"""Hugging Face's implementation of the measured models (`python -m gpt cost --hf`): for each variant a transformers
family computes (Llama: mha, gqa, mqa; Mistral: sliding_window; GPT-2: mha_fused; Qwen3: QK-norm), that family's
model built from the measured model's own parts and sizes, random weights. A ratio against it then compares two
implementations of one architecture; a model whose other parts the family lacks (gelu in a Llama) is refused."""
from __future__ import annotations

from typing import Any

import torch

from gpt.hf import FAMILIES, transformers_module
from gpt.hf.family import Family
from gpt.inference.depth import HFEngine
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT


def computed_by() -> str:
    """Each family and the variants it computes, for --hf's help and its refusal."""
    return "; ".join(f"{name}: {', '.join(family.parts['attention'])}" for name, family in FAMILIES.items())


def counterpart(cfg: ModelConfig, trained: bool = False) -> Family | None:
    """The family that computes this model part for part; None for a variant no family has (mla, linear); ValueError
    naming the parts to change where families have the variant but not the model's other parts (a `trained` model's
    parts are its own: then only leaving out --hf helps)."""
    families = [family for family in FAMILIES.values() if cfg.attention in family.parts["attention"]]
    misses = {family.model_type: family.mismatches(cfg) for family in families}
    exact = [family for family in families if not misses[family.model_type]]
    if exact or not families:
        return exact[0] if exact else None
    needs = "; ".join(f"{name} needs {', '.join(missing)}" for name, missing in misses.items())
    fix = "leave out --hf (a trained model's parts are its own)" if trained else \
        "measure with those parts (the defaults are Llama's), or leave out --hf"
    raise ValueError(f"--hf: no Hugging Face model computes {cfg.attention} with these parts ({needs}): {fix}")


def row_name(family: Family, config: dict[str, Any]) -> str:
    """The table's name for a counterpart: its family and what tells its rows apart."""
    if "sliding_window" in config:
        return f"hf {family.model_type} (window {config['sliding_window']})"
    kv_heads = config.get("num_key_value_heads")
    return f"hf {family.model_type}" + ("" if kv_heads is None else f" ({kv_heads} kv head{'s' * (kv_heads > 1)})")


def hf_engines(models: list[GPT], device: str, dtype: torch.dtype, trained: bool = False) -> list[HFEngine]:
    """One engine per distinct counterpart of the measured models (`trained`: a model.pt's), in their order."""
    try:
        transformers = transformers_module()
    except ValueError:
        raise ValueError("--hf needs transformers: pip install -e '.[hf]' -c constraints.txt") from None
    engines: dict[str, HFEngine] = {}
    for model in models:
        family = counterpart(model.cfg, trained)
        if family is None:
            continue
        config = family.hf_config(model)
        name = row_name(family, config)
        if name not in engines:
            torch.manual_seed(0)
            hf = transformers.AutoModelForCausalLM.from_config(getattr(transformers, family.config_class)(**config),
                                                               attn_implementation="sdpa")
            engines[name] = HFEngine(name, hf.to(device, dtype).eval())
    if not engines:  # --attention beside --ckpt is refused: a model.pt's one variant is all there is to measure
        fix = "leave out --hf (a trained model's attention is its own)" if trained else \
            "measure one of those too, or leave out --hf"
        raise ValueError(f"--hf: no Hugging Face model computes {', '.join(m.cfg.attention for m in models)} "
                         f"({computed_by()}): {fix}")
    return list(engines.values())
