"""GPT-2 compatibility, checked against code nobody here wrote: Hugging Face's GPT2LMHeadModel."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpt import ModelConfig, generate
from gpt.hf import from_hf_gpt2, to_hf_gpt2
from tests.conftest import build

transformers = pytest.importorskip("transformers")


@pytest.fixture
def hf_gpt2() -> "transformers.GPT2LMHeadModel":
    """A random small GPT-2; every tensor perturbed so biases and norm gains are not their defaults."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    return model


def test_from_hf_gives_the_same_logits_and_greedy_tokens(hf_gpt2: "transformers.GPT2LMHeadModel") -> None:
    model = from_hf_gpt2(hf_gpt2)
    idx = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), hf_gpt2(idx).logits, rtol=1e-4, atol=1e-4)
        theirs = hf_gpt2.generate(idx, max_new_tokens=10, do_sample=False, min_new_tokens=10, pad_token_id=0)
    assert torch.equal(generate(model, idx, 10, temperature=0), theirs)


def test_round_trip_reproduces_the_state_dict(hf_gpt2: "transformers.GPT2LMHeadModel") -> None:
    back = to_hf_gpt2(from_hf_gpt2(hf_gpt2)).state_dict()
    original = hf_gpt2.state_dict()
    assert back.keys() == original.keys()
    for name, value in original.items():
        assert torch.equal(back[name], value), name


def test_a_saved_folder_loads(hf_gpt2: "transformers.GPT2LMHeadModel", tmp_path: Path) -> None:
    hf_gpt2.save_pretrained(tmp_path)
    idx = torch.randint(0, 50, (1, 9))
    with torch.no_grad():
        torch.testing.assert_close(from_hf_gpt2(tmp_path)(idx), hf_gpt2(idx).logits, rtol=1e-4, atol=1e-4)


def test_tinygpt_to_hf_and_back_keeps_the_function() -> None:
    cfg = ModelConfig(vocab_size=37, layers=2, heads=2, dim=32, block_size=16, pos="learned", norm="layernorm",
                      attention="mha_fused", bias=True)
    model = build(cfg)
    idx = torch.randint(0, 37, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(to_hf_gpt2(model)(idx).logits, model(idx), rtol=1e-4, atol=1e-4)


def test_a_model_that_is_not_gpt2_is_refused_with_the_fix(tiny_cfg: ModelConfig) -> None:
    with pytest.raises(ValueError, match="GPT-2 needs pos=learned .*; this model has pos=rope, norm=rmsnorm"):
        to_hf_gpt2(build(tiny_cfg))
