import re

import numpy as np
import pytest
import torch

from gpt import GPT, ModelConfig


@pytest.mark.parametrize("overrides, message", [
    ({"heads": 5, "dim": 128}, "heads=5 does not divide dim=128"),
    ({"layers": 0}, "layers=0 must be a positive integer"),
    ({"heads": "four"}, "heads=four must be a positive integer"),
    ({"dropout": 1.5}, "dropout=1.5 must be a number in"),
    # A zero-wide MLP built, then divided by zero in Muon's LR rule (and trained as no MLP under AdamW).
    ({"dim": 8, "heads": 2, "mlp_ratio": 0.1}, "mlp_ratio=0.1 makes the MLP 0 wide at dim=8"),
])
def test_bad_config_names_the_field(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        ModelConfig(vocab_size=10, **overrides)


@pytest.mark.parametrize("overrides, message", [
    ({"attention": "nope"}, "attention=nope is unknown; choose one of: "),
    ({"pos": "nope"}, "pos=nope is unknown"),
    ({"norm": "batchnorm"}, "norm=batchnorm is unknown; choose one of: layernorm, rmsnorm"),
])
def test_an_unknown_part_is_named_when_the_model_is_built(overrides: dict, message: str) -> None:
    cfg = ModelConfig(vocab_size=10, **overrides)  # a description; the parts are looked up when a GPT is built
    with pytest.raises(ValueError, match=message):
        GPT(cfg)


@pytest.mark.parametrize("value, kind", [(np.int64(50), "int64"), (torch.tensor(50), "Tensor")])
def test_a_numpy_or_torch_scalar_is_refused_naming_the_python_number(value: object, kind: str) -> None:
    # ModelConfig(vocab_size=ids.max() + 1) was told "vocab_size=np.int64(50) must be a positive integer", which it
    # is; it must be a Python int, as model.pt stores the config for torch.load(weights_only=True).
    with pytest.raises(ValueError, match=rf"^vocab_size={re.escape(repr(value))} is a {kind}, not a Python number: "
                                         "pass vocab_size=50$"):
        ModelConfig(vocab_size=value)
    with pytest.raises(ValueError, match=r"^dropout=tensor\(\[0.1000, 0.2000\]\) must be a number in \[0, 1\)$"):
        ModelConfig(vocab_size=50, dropout=torch.tensor([0.1, 0.2]))


def test_config_is_frozen_and_round_trips() -> None:
    cfg = ModelConfig(vocab_size=10)
    with pytest.raises(AttributeError):
        cfg.heads = 2  # type: ignore[misc]
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.head_dim == cfg.dim // cfg.heads


def test_unknown_field_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown model field\(s\) \['colour'\]"):
        ModelConfig.from_dict({"vocab_size": 10, "colour": "red"})


@pytest.mark.parametrize("values, hint", [
    ({"n_layer": 2, "n_head": 4, "n_embd": 64}, "use dim for n_embd, heads for n_head, layers for n_layer"),
    ({"kv_head": 2}, "use kv_heads for kv_head"),
])
def test_an_unknown_field_is_refused_naming_the_one_meant(values: dict, hint: str) -> None:
    # ModelConfig(n_layer=2), nanoGPT's name, was Python's TypeError "unexpected keyword argument 'n_layer'", where
    # train.py's model.head=4 asks "did you mean model.heads?"; from_dict listed every field and named none.
    for make in (lambda: ModelConfig(vocab_size=10, **values), lambda: ModelConfig.from_dict({"vocab_size": 10,
                                                                                              **values})):
        with pytest.raises(ValueError, match=rf"^unknown model field\(s\) {re.escape(str(sorted(values)))}; {hint}; "
                                             "known fields: attention, "):
            make()
