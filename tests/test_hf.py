"""Hugging Face interop, checked against code nobody here wrote: random tiny GPT-2, Llama, Mistral and Qwen3
models of transformers, converted both ways, equal in state dicts, logits and greedy tokens."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from gpt import ModelConfig, TextModel, generate
from gpt.hf import FAMILIES, family_for, from_hf, to_hf
from tests.conftest import build, calculator_tokenizer, off_init

transformers = pytest.importorskip("transformers")

VOCAB = 50
LAYOUT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32)
# Every family with the options it maps (biases, grouped heads, an untied head, a window, QK-norm, odd widths).
HF_CONFIGS: dict[str, Any] = {
    "gpt2": lambda: transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                            n_inner=72, layer_norm_epsilon=1e-6, bos_token_id=0, eos_token_id=0),
    "llama": lambda: transformers.LlamaConfig(**LAYOUT, intermediate_size=86, num_key_value_heads=2,
                                              attention_bias=True, mlp_bias=True, tie_word_embeddings=False),
    "mistral": lambda: transformers.MistralConfig(**LAYOUT, intermediate_size=87, num_key_value_heads=4,
                                                  sliding_window=5, tie_word_embeddings=True),
    "qwen3": lambda: transformers.Qwen3Config(**LAYOUT, intermediate_size=64, num_key_value_heads=1, head_dim=8,
                                              rms_norm_eps=1e-6, rope_parameters={"rope_type": "default",
                                                                                  "rope_theta": 1e6}),
}
ATOL = 1e-5  # fp32 logits of the same function computed in a different order


pytestmark = pytest.mark.usefixtures("one_thread")


def random_hf(family: str, **overrides: Any) -> Any:
    """A random model of the family, every parameter drawn off its init (off_init), so biases and norm gains are not
    their defaults and attention is far from uniform."""
    torch.manual_seed(0)
    config = HF_CONFIGS[family]()
    for key, value in overrides.items():
        setattr(config, key, value)
    return off_init(transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval())


def hf_greedy(hf: Any, idx: torch.Tensor, new: int) -> torch.Tensor:
    """transformers' greedy decoding of exactly `new` tokens; the explicit mask keeps it from reading the
    pad id (needed for a batch) as padding where it occurs in idx. No end-of-text id: min_new_tokens forbade it
    (its logit set to -inf), so where it was the argmax transformers chose the runner-up and tinygpt did not."""
    return hf.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=new, eos_token_id=None,
                       do_sample=False, pad_token_id=0)


def test_every_family_is_tested() -> None:
    assert set(HF_CONFIGS) == set(FAMILIES)


@pytest.mark.parametrize("family", list(HF_CONFIGS))
def test_from_hf_gives_the_same_logits_and_greedy_tokens(family: str) -> None:
    hf = random_hf(family)
    model = from_hf(hf)
    idx = torch.randint(0, VOCAB, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), hf(idx).logits, rtol=0, atol=ATOL)
        theirs = hf_greedy(hf, idx, 10)  # 22 positions: past Mistral's window of 5
    assert torch.equal(generate(model, idx, 10, temperature=0), theirs)


@pytest.mark.parametrize("family", list(HF_CONFIGS))
def test_hf_to_tinygpt_to_hf_reproduces_the_state_dict_and_logits(family: str) -> None:
    hf = random_hf(family)
    back = to_hf(from_hf(hf))
    assert back.config.model_type == family
    original, returned = hf.state_dict(), back.state_dict()
    assert returned.keys() == original.keys()
    for name, value in original.items():
        assert torch.equal(returned[name], value), name
    idx = torch.randint(0, VOCAB, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(back(idx).logits, hf(idx).logits, rtol=0, atol=ATOL)


@pytest.mark.parametrize("family", list(HF_CONFIGS))
def test_a_saved_safetensors_folder_loads(family: str, tmp_path: Path) -> None:
    hf = random_hf(family)
    hf.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    idx = torch.randint(0, VOCAB, (1, 9))
    with torch.no_grad():
        torch.testing.assert_close(from_hf(tmp_path)(idx), hf(idx).logits, rtol=0, atol=ATOL)



@pytest.mark.parametrize("damage, message", [
    (lambda folder: (folder / "model.safetensors").unlink(), "holds no weights that load \\(Error no file named"),
    (lambda folder: (folder / "model.safetensors").write_bytes(b"\0" * 64), "holds no weights that load"),
    (lambda folder: (folder / "config.json").write_text('{"model_type": "llama",'), "config.json does not load"),
])
def test_a_folder_whose_files_do_not_load_is_refused_in_one_line(damage: Any, message: str, tmp_path: Path) -> None:
    # A download cut short, or a folder holding a config alone: a transformers traceback through train.py init_from=
    random_hf("llama").save_pretrained(tmp_path)
    damage(tmp_path)
    with pytest.raises(ValueError, match=message) as err:
        from_hf(tmp_path)
    assert "\n" not in str(err.value)


def test_a_folder_without_its_lm_head_is_refused_not_filled_at_random(tmp_path: Path) -> None:
    # A base model's folder (AutoModel, no LM head) with an untied head: transformers starts the head at random, and
    # the converted model answered at random, differently at every load.
    transformers.AutoModel.from_config(HF_CONFIGS["llama"]()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="lacks 1 of its model's weights \\(lm_head.weight\\): save the whole") as err:
        from_hf(tmp_path)
    assert "\n" not in str(err.value)


def test_a_base_model_object_is_refused_naming_the_causal_lm() -> None:
    base = transformers.AutoModel.from_config(HF_CONFIGS["qwen3"]())  # was KeyError: 'model.embed_tokens.weight'
    with pytest.raises(ValueError, match="^this Qwen3Model has no model.embed_tokens.weight: pass a causal LM"):
        from_hf(base)

def test_the_other_side_of_a_conversion_is_refused_naming_what_to_pass() -> None:
    # Both were plain AttributeErrors: "'TextModel' object has no attribute 'cfg'", "... has no attribute 'config'".
    model = build(ModelConfig(vocab_size=VOCAB, layers=1, heads=2, dim=16, block_size=8))
    with pytest.raises(ValueError, match=r"^to_hf takes a tinygpt GPT, not a TextModel: pass a TextModel's \.model "
                                         r"\(gpt\.load\(path\)\.model\)$"):
        to_hf(TextModel(model, calculator_tokenizer(), {}))
    with pytest.raises(ValueError, match="^from_hf takes a transformers causal LM or a folder it was save_pretrained "
                                         "into, not a GPT: it is tinygpt's already, and to_hf converts it to "
                                         "transformers$"):
        from_hf(model)
    with pytest.raises(ValueError, match="^from_hf takes a transformers causal LM .*, not a TextModel$"):
        from_hf(TextModel(model, calculator_tokenizer(), {}))


BASE = dict(vocab_size=37, layers=2, heads=4, dim=32, block_size=16)
TINYGPT_MODELS = [
    ("gpt2", dict(pos="learned", norm="layernorm", mlp="gelu", attention="mha_fused", bias=True)),
    ("llama", dict(pos="rope", norm="rmsnorm", mlp="swiglu", attention="mqa", tie_embeddings=False)),
    ("llama", dict(pos="rope", norm="rmsnorm", mlp="swiglu", attention="mha", bias=True, mlp_ratio=3.0)),
    ("mistral", dict(pos="rope", norm="rmsnorm", mlp="swiglu", attention="sliding_window", window=3)),
    ("qwen3", dict(pos="rope", norm="rmsnorm", mlp="swiglu", attention="gqa", kv_heads=2, qk_norm=True,
                   norm_eps=1e-6, rope_base=1e6)),
]


@pytest.mark.parametrize("family, parts", TINYGPT_MODELS)
def test_tinygpt_to_hf_picks_the_family_by_parts_and_keeps_the_function(family: str, parts: dict) -> None:
    model = off_init(build(ModelConfig(**BASE, **parts)))
    hf = to_hf(model)
    assert hf.config.model_type == family
    idx = torch.randint(0, 37, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(hf(idx).logits, model(idx), rtol=0, atol=ATOL)
    assert from_hf(hf).state_dict().keys() == model.state_dict().keys()


def test_a_model_trained_with_dropout_exports_without_a_dropout_that_would_be_refused_on_the_way_back() -> None:
    model = build(ModelConfig(**BASE, **dict(TINYGPT_MODELS)["mistral"], dropout=0.1))
    hf = to_hf(model)
    assert hf.config.attention_dropout == 0.0
    assert from_hf(hf).state_dict().keys() == model.state_dict().keys()


@pytest.mark.parametrize("family, overrides, message", [
    ("llama", {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
     "rope_parameters.rope_type=linear does not map onto tinygpt: tinygpt's RoPE has no scaling"),
    ("llama", {"head_dim": 16}, "head_dim=16 does not map"),
    ("llama", {"mlp_bias": False}, "attention_bias=True .* and mlp_bias=False"),
    ("llama", {"hidden_act": "gelu"}, "hidden_act=gelu"),
    # model.dropout would drop the embeddings, attention and MLP outputs too: 4 dropouts per layer for Llama's 1.
    ("qwen3", {"attention_dropout": 0.1}, "attention_dropout=0.1 does not map onto tinygpt: Llama drops attention "
     "weights only"),
    ("mistral", {"num_key_value_heads": 2}, "num_key_value_heads=2 .* with sliding_window=5"),
    ("qwen3", {"attention_bias": True}, "attention_bias=True .* Qwen3's MLP has no biases"),
    ("gpt2", {"activation_function": "relu"}, "activation_function=relu"),
    ("gpt2", {"attn_pdrop": 0.0}, "attn_pdrop=0.0 does not map .* and resid_pdrop=0.1$"),  # was dropout=0.1 everywhere
])
def test_what_does_not_map_is_refused_naming_the_field(family: str, overrides: dict, message: str) -> None:
    torch.manual_seed(0)
    config = HF_CONFIGS[family]()
    for key, value in overrides.items():
        setattr(config, key, value)
    with pytest.raises(ValueError, match=message) as err:
        FAMILIES[family].model_config(config)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("window", [32, 4096])
def test_a_mistral_window_as_long_as_the_context_is_full_attention_even_with_grouped_heads(window: int) -> None:
    # It hides nothing from any query, yet was refused as a window tinygpt's sliding_window cannot share heads in.
    hf = random_hf("mistral", num_key_value_heads=2, sliding_window=window)
    model = from_hf(hf)
    assert (model.cfg.attention, model.cfg.kv_heads) == ("gqa", 2)
    idx = torch.randint(0, VOCAB, (2, 32))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), hf(idx).logits, rtol=0, atol=ATOL)


def test_a_tinygpt_window_as_long_as_its_block_comes_back_as_a_window() -> None:
    # Kept a window, it still holds where init_from trains a longer block than the exported one.
    model = build(ModelConfig(**{**BASE, **dict(TINYGPT_MODELS)["mistral"], "window": BASE["block_size"]}))
    back = from_hf(to_hf(model)).cfg
    assert (back.attention, back.window) == ("sliding_window", 16)


def test_a_window_left_unset_exports_as_the_window_the_model_attends_over() -> None:
    # model.window unset is 8 positions; exported as null, Mistral's "no window", every query would see every key.
    parts = {key: value for key, value in dict(TINYGPT_MODELS)["mistral"].items() if key != "window"}
    model = off_init(build(ModelConfig(**BASE, **parts)))
    hf = to_hf(model)
    assert hf.config.sliding_window == 8
    idx = torch.randint(0, 37, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(hf(idx).logits, model(idx), rtol=0, atol=ATOL)


@pytest.mark.parametrize("max_window_layers, window", [(2, 4), (1, 32)])
def test_a_qwen3_whose_window_hides_nothing_loads(max_window_layers: int, window: int) -> None:
    # use_sliding_window=true, yet no layer at or past max_window_layers, or a window as long as the context: every
    # layer attends to the whole context, and was refused as per-layer windows.
    torch.manual_seed(0)
    config = transformers.Qwen3Config(**LAYOUT, intermediate_size=64, head_dim=8, num_key_value_heads=2,
                                      use_sliding_window=True, sliding_window=window,
                                      max_window_layers=max_window_layers)
    hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    idx = torch.randint(0, VOCAB, (2, 32))
    with torch.no_grad():
        torch.testing.assert_close(from_hf(hf)(idx), hf(idx).logits, rtol=0, atol=ATOL)


def test_a_qwen3_window_in_some_layers_is_refused() -> None:
    config = transformers.Qwen3Config(**LAYOUT, intermediate_size=64, head_dim=8, num_key_value_heads=2,
                                      use_sliding_window=True, sliding_window=4, max_window_layers=1)
    with pytest.raises(ValueError, match="^use_sliding_window=True does not map onto tinygpt: Qwen3 slides the "
                                         "window in 1 of 2 layers"):
        FAMILIES["qwen3"].model_config(config)


def test_qwen3_layers_that_slide_over_no_window_are_one_line() -> None:
    config = transformers.Qwen3Config(**LAYOUT, intermediate_size=64, head_dim=8, use_sliding_window=False,
                                      layer_types=["sliding_attention", "full_attention"])
    with pytest.raises(ValueError, match="^sliding_window=None does not map onto tinygpt: layer_types slides 1 "):
        FAMILIES["qwen3"].model_config(config)


def test_a_qwen3_window_in_every_layer_loads_as_sliding_window_with_qk_norm() -> None:
    # It was refused as a window "in some layers only".
    torch.manual_seed(0)
    config = transformers.Qwen3Config(**LAYOUT, intermediate_size=64, head_dim=8, num_key_value_heads=4,
                                      use_sliding_window=True, sliding_window=4, max_window_layers=0)
    hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    model = from_hf(hf)
    assert (model.cfg.attention, model.cfg.window, model.cfg.qk_norm) == ("sliding_window", 4, True)
    idx = torch.randint(0, VOCAB, (2, 32))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), hf(idx).logits, rtol=0, atol=ATOL)
    grouped = transformers.Qwen3Config(**{**config.to_dict(), "num_key_value_heads": 2})
    with pytest.raises(ValueError, match="^num_key_value_heads=2 does not map onto tinygpt: with sliding_window=4 in "
                                         "every layer"):
        FAMILIES["qwen3"].model_config(grouped)


@pytest.mark.parametrize("family, field, name", [("llama", "hidden_act", "swish"), ("qwen3", "hidden_act", "swish"),
                                                ("gpt2", "activation_function", "gelu_fast"),
                                                ("gpt2", "activation_function", "gelu_python_tanh")])
def test_another_name_of_the_same_activation_loads(family: str, field: str, name: str) -> None:
    hf = random_hf(family, **{field: name})
    idx = torch.randint(0, VOCAB, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(from_hf(hf)(idx), hf(idx).logits, rtol=0, atol=ATOL)


def test_a_model_type_without_a_family_is_refused() -> None:
    config = transformers.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4)
    with pytest.raises(ValueError, match="model_type=gpt_neox has no tinygpt conversion; supported: gpt2, llama"):
        from_hf(transformers.AutoModelForCausalLM.from_config(config))


@pytest.mark.parametrize("parts, message", [
    # tinygpt's default parts with RoPE; written as train.py sets them (mlp=swiglu is no override of train.py's)
    ({"pos": "rope"}, "llama needs model.mlp=swiglu \\(this model has gelu\\): train one with llama's parts: "
                      "add model.mlp=swiglu to its train.py command$"),
    ({"pos": "rope", "mlp": "swiglu", "attention": "mla"},
     "llama needs attention=mha or gqa or mqa \\(this model has mla\\); "
     "mistral needs attention=sliding_window \\(this model has mla\\): train one with llama's parts: "
     "add attention=mha to its train.py command$"),
    ({"pos": "rope", "mlp": "swiglu", "attention": "sliding_window", "bias": True},
     "llama needs attention=.* \\(this model has sliding_window\\); "
     "mistral needs model.bias=false \\(this model has true\\): train one with llama's parts: "
     "add attention=mha to its train.py command$"),
    ({}, "llama needs pos=rope \\(this model has learned\\), model.mlp=swiglu \\(this model has gelu\\): train one "
         "with llama's parts: add pos=rope model.mlp=swiglu to its train.py command$"),
])
def test_a_tinygpt_model_no_family_expresses_is_refused_with_what_to_change(parts: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^no Hugging Face family has this model's parts: {message}"):
        family_for(ModelConfig(**BASE, **parts))
