"""Block parts: norms and MLPs from their registries, and the shape trace."""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from gpt import ATTENTION, ModelConfig
from gpt.model.gpt import check_parts
from gpt.model.mlp import MLP
from gpt.model.norm import NORM, RMSNorm
from tests.conftest import build


def test_rmsnorm_scales_to_unit_root_mean_square() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16) * 7 + 2
    y = NORM["rmsnorm"](16)(x)
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(3, 5), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(NORM["layernorm"](16)(x), F.layer_norm(x, (16,)))


def test_layernorm_shifts_only_with_bias_as_the_linear_layers_do() -> None:
    assert NORM["layernorm"](16, bias=False).bias is None  # nanoGPT's bias=False
    assert NORM["layernorm"](16, bias=True).bias.shape == (16,)  # GPT-2's
    model = build(ModelConfig(vocab_size=37, layers=1, heads=2, dim=16, norm="layernorm"))
    names = {n for n, _ in model.named_parameters()}
    assert "norm.weight" in names and "norm.bias" not in names


@pytest.mark.parametrize("name", list(MLP))
def test_every_mlp_keeps_the_shape_and_the_parameter_budget(name: str) -> None:
    """SwiGLU's three matrices of width 2/3 * hidden cost what two matrices of width hidden cost."""
    torch.manual_seed(0)
    mlp = MLP[name](48, 192)
    assert mlp(torch.randn(2, 7, 48)).shape == (2, 7, 48)
    assert sum(p.numel() for p in mlp.parameters()) == 2 * 48 * 192


def test_mlps_compute_their_activation() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    relu2, swiglu = MLP["relu2"](8, 32), MLP["swiglu"](8, 48)
    gelu, exact = MLP["gelu"](8, 32), MLP["gelu_exact"](8, 32)
    exact.load_state_dict(gelu.state_dict())
    torch.testing.assert_close(gelu(x), gelu.proj(F.gelu(gelu.fc(x), approximate="tanh")))
    torch.testing.assert_close(exact(x), exact.proj(torch.nn.GELU()(exact.fc(x))))  # nanoGPT's module
    assert not torch.allclose(gelu(x), exact(x))  # the two GELUs differ (by up to ~1e-3 per unit)
    torch.testing.assert_close(relu2(x), relu2.proj(F.relu(relu2.fc(x)) ** 2))
    torch.testing.assert_close(swiglu(x), swiglu.proj(F.silu(swiglu.gate(x)) * swiglu.fc(x)))


def test_trace_shapes_prints_one_forward_pass(capsys: pytest.CaptureFixture) -> None:
    model = build(ModelConfig(vocab_size=37, layers=2, heads=2, dim=32, block_size=16, trace_shapes=True))
    idx = torch.zeros(3, 5, dtype=torch.long)
    model(idx)
    first = capsys.readouterr().out
    assert "blocks.1.attn " in first and "-> (3, 5, 32)" in first and "head" in first and "-> (3, 5, 37)" in first
    model(idx)
    assert capsys.readouterr().out == ""


def takes_qk_norm(attention: str) -> bool:
    """Whether the variant accepts model.qk_norm=true (torch_mha refuses it: its queries and keys stay in torch)."""
    try:
        check_parts(ModelConfig(vocab_size=37, attention=attention, qk_norm=True))
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("attention", [a for a in ATTENTION if takes_qk_norm(a)])
def test_qk_norm_uses_the_models_norm_eps(attention: str) -> None:
    # A variant whose from_config passed neither on built without the norms, and this said only
    # "assert ([Identity(), Identity()] and False)".
    model = build(ModelConfig(vocab_size=37, layers=1, heads=4, dim=32, block_size=16, attention=attention,
                              qk_norm=True, norm_eps=1e-3))
    qk_norms = [m for name, m in model.named_modules() if name.endswith(("q_norm", "k_norm"))]
    assert qk_norms and all(isinstance(m, RMSNorm) and m.eps == 1e-3 for m in qk_norms), \
        f"attention={attention} accepts model.qk_norm=true but builds no RMSNorm of model.norm_eps on its queries " \
        "and keys: pass cfg.qk_norm and cfg.norm_eps on to Attention in its from_config, or refuse qk_norm in its " \
        "validate"


def test_every_model_setting_is_read_by_some_parts_and_not_by_others() -> None:
    """settings_read is what refuses a setting the chosen parts ignore (model.rope_base under pos=alibi): each field
    must be read by some choice of parts, or it could never be set."""
    from dataclasses import fields

    from gpt.model.gpt import settings_read
    from gpt.model.positional import POSITIONAL

    read = {}
    for attention in ATTENTION:
        for pos in POSITIONAL:
            try:
                read[attention, pos] = settings_read(ModelConfig(vocab_size=5, attention=attention, pos=pos))
            except ValueError:  # a pair that does not go together (linear attention with ALiBi)
                continue
    assert set().union(*read.values()) == {field.name for field in fields(ModelConfig)}
    assert "rope_base" in read["mha", "rope"] and "rope_base" not in read["mha", "alibi"]
    assert "kernel" in read["mha", "learned"] and "kernel" not in read["linear", "learned"]
    assert "heads" in read["mha", "learned"] and "heads" not in read["single_head", "learned"]
    assert "window" in read["sliding_window", "learned"] and "window" not in read["gqa", "learned"]
    torch.manual_seed(0)
    settings_read(ModelConfig(vocab_size=5, dropout=0.1, random_positions=64))  # init, dropout, random positions
    after = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(3))  # a seeded run that checks its settings draws as one that does not


def test_settings_read_of_a_one_token_block() -> None:
    # A bigram model (model.block_size=1) trains; its check once ended python train.py with "sequence of 2 tokens
    # exceeds block_size=1", a length no data of the user's had.
    from gpt.model.gpt import settings_read

    assert "rope_base" in settings_read(ModelConfig(vocab_size=5, block_size=1, pos="rope"))

