import inspect
import re
from pathlib import Path

import pytest
import torch

import gpt
from gpt import GPT, ModelConfig, generate, load_checkpoint
from gpt.data.tokenizers.vocab import CharTokenizer
from gpt.inference.checkpoint import save_model
from gpt.inference.compiled import compile_for_decoding
from tests.conftest import build


def test_logits_shape(tiny_cfg: ModelConfig) -> None:
    idx = torch.randint(0, tiny_cfg.vocab_size, (3, 11))
    assert build(tiny_cfg)(idx).shape == (3, 11, tiny_cfg.vocab_size)


@pytest.mark.parametrize("pos", ["rope", "learned", "none"])
def test_future_tokens_do_not_change_past_logits(tiny_cfg: ModelConfig, pos: str) -> None:
    model = build(ModelConfig(**{**tiny_cfg.to_dict(), "pos": pos}))
    idx = torch.randint(0, tiny_cfg.vocab_size, (2, 16))
    t = 7
    changed = idx.clone()
    changed[:, t + 1:] = torch.randint(0, tiny_cfg.vocab_size, (2, 16 - t - 1))
    assert not torch.equal(changed, idx)
    torch.testing.assert_close(model(idx)[:, :t + 1], model(changed)[:, :t + 1])
    assert not torch.allclose(model(idx)[:, t + 1:], model(changed)[:, t + 1:])


def test_head_is_tied_to_embedding(tiny_cfg: ModelConfig) -> None:
    model = GPT(tiny_cfg)
    assert model.head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    assert model.num_params() == sum(p.numel() for p in model.parameters())


def test_an_untied_head_has_its_own_initialised_weights_that_are_counted_and_saved(
        tiny_cfg: ModelConfig, tmp_path: Path) -> None:
    cfg = ModelConfig(**{**tiny_cfg.to_dict(), "tie_embeddings": False})
    model = build(cfg)
    assert model.head.weight.data_ptr() != model.tok_emb.weight.data_ptr()
    assert model.head.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert model.num_params() == build(tiny_cfg).num_params() + cfg.vocab_size * cfg.dim
    with torch.no_grad():
        model.head.weight.mul_(3)  # so a head rebuilt from the embeddings could not pass for the saved one
    save_model(tmp_path / "model.pt", model, CharTokenizer(list("abcdefghijklmnopqrstuvwxyz0123456789 ")))
    loaded, _ = load_checkpoint(tmp_path / "model.pt")
    assert not loaded.cfg.tie_embeddings
    torch.testing.assert_close(loaded.head.weight, model.head.weight)
    idx = torch.randint(0, cfg.vocab_size, (1, 8))
    torch.testing.assert_close(loaded(idx), model(idx))


def test_residual_projections_are_scaled_by_depth() -> None:
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=50, layers=8, heads=4, dim=256, block_size=8))
    proj_std = model.blocks[0].attn.proj.weight.std().item()
    other_std = model.blocks[0].attn.query.weight.std().item()
    assert proj_std == pytest.approx(0.02 / 4, rel=0.05)  # 0.02 / sqrt(2 * layers)
    assert other_std == pytest.approx(0.02, rel=0.05)


def test_torch_init_keeps_each_layers_own_defaults_which_follow_the_width() -> None:
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=50, layers=2, heads=4, dim=64, block_size=8, init="torch", mlp="swiglu"))
    assert model.tok_emb.weight.std().item() == pytest.approx(1.0, rel=0.05)  # nn.Embedding: N(0, 1)
    for name, weight in model.named_parameters():
        if name.startswith("blocks.") and weight.dim() == 2:  # nn.Linear: uniform within 1/sqrt(fan_in)
            bound = weight.shape[1] ** -0.5
            assert weight.abs().max().item() <= bound, name
            assert weight.std().item() == pytest.approx(bound / 3 ** 0.5, rel=0.1), name


def test_torch_mha_fused_projection_follows_the_init() -> None:
    for init, std in (("gpt2", 0.02), ("torch", None)):
        cfg = ModelConfig(vocab_size=50, dim=64, heads=4, attention="torch_mha", init=init)
        weight = GPT(cfg).blocks[0].attn.mha.in_proj_weight
        if std:
            assert weight.std().item() == pytest.approx(std, rel=0.1)
        else:  # torch's Xavier uniform on the (3 x 64, 64) matrix: within sqrt(6 / (64 + 192))
            bound = (6 / 256) ** 0.5
            assert weight.abs().max().item() <= bound
            assert weight.std().item() == pytest.approx(bound / 3 ** 0.5, rel=0.1)


def test_an_unknown_init_is_named_with_the_choices() -> None:
    with pytest.raises(ValueError, match="model.init=xavier is unknown; choose one of: gpt2, torch"):
        ModelConfig(vocab_size=50, init="xavier")


def test_too_long_input_is_refused_naming_the_fix(tiny_cfg: ModelConfig) -> None:
    # It said only "sequence of 17 tokens exceeds block_size=16", naming no way out.
    model = build(tiny_cfg).eval()
    with pytest.raises(ValueError, match=r"^sequence of 17 tokens exceeds block_size=16: feed the last 16 "
                                         r"\(ids\[:, -16:\]\), as gpt.generate does, or build the model with "
                                         "block_size=17$"):
        model(torch.zeros(1, 17, dtype=torch.long))
    caches = model.new_caches(1)
    model(torch.zeros(1, 15, dtype=torch.long), caches)
    with pytest.raises(ValueError, match=r"^sequence of 17 tokens \(15 cached, 2 new\) exceeds block_size=16: "
                                         "reset the caches and feed the last 16 tokens, as gpt.generate does$"):
        model(torch.zeros(1, 2, dtype=torch.long), caches)


@pytest.mark.parametrize("shape", [(5,), (1, 0), (0, 3), (1, 2, 3)])
def test_ids_not_shaped_batch_by_length_are_refused_naming_the_shape(tiny_cfg: ModelConfig,
                                                                     shape: tuple[int, ...]) -> None:
    # A single sequence (T,) or an empty prompt reached torch as "tuple index out of range" or a failed reshape.
    model = build(tiny_cfg).eval()
    for call in (lambda ids: model(ids), lambda ids: generate(model, ids, 2, temperature=0)):
        with pytest.raises(ValueError, match=rf"token ids of shape {re.escape(str(shape))}: pass a \(batch, length\)"):
            call(torch.zeros(shape, dtype=torch.long))


@pytest.mark.parametrize("ids, named", [(torch.zeros(1, 3), "of dtype torch.float32"),
                                        (torch.zeros(1, 3, dtype=torch.bool), "of dtype torch.bool"),
                                        ([[1, 2, 3]], "are a list")])
def test_ids_that_are_not_an_integer_tensor_are_refused_naming_the_fix(tiny_cfg: ModelConfig, ids: object,
                                                                       named: str) -> None:
    # Float ids reached torch's embedding ("Expected tensor for argument #1 'indices' ..."), a list an AttributeError.
    model = build(tiny_cfg).eval()
    for call in (model, lambda ids: generate(model, ids, 2, temperature=0), model.attention_maps):
        with pytest.raises(ValueError, match=f"token ids {named}: pass"):
            call(ids)


def test_targets_passed_as_nanogpt_takes_them_are_refused_naming_the_loss(tiny_cfg: ModelConfig) -> None:
    # model(x, y) read y as the caches: "Boolean value of Tensor with more than one value is ambiguous".
    ids = torch.randint(0, tiny_cfg.vocab_size, (2, 5))
    with pytest.raises(ValueError, match=r"takes no targets .* F.cross_entropy\(logits.flatten\(0, 1\)"):
        build(tiny_cfg)(ids, ids)


@pytest.mark.parametrize("layers, caches, message", [
    (1, lambda m: m.new_caches(1), r"^1 cache given for this model's 2 layers: pass this model's new_caches\(1\), one "
                                   "per layer$"),
    (3, lambda m: m.new_caches(1), r"^3 caches given for this model's 2 layers"),
    (2, lambda m: [], r"^0 caches given for this model's 2 layers"),
    (2, lambda m: m.new_caches(1)[0], r"^caches are a KVCache: pass this model's new_caches\(1\), a list with one per "
                                      "layer$")])
def test_caches_that_are_not_one_per_layer_are_refused_naming_new_caches(tiny_cfg: ModelConfig, layers: int,
                                                                         caches: object, message: str) -> None:
    # Another model's caches met "list index out of range" (fewer layers) or were used in part, silently (more); one
    # cache was "'KVCache' object is not subscriptable"; an empty list decoded with no cache at all.
    model = build(tiny_cfg)
    given = caches(build(ModelConfig(**{**tiny_cfg.to_dict(), "layers": layers})))
    with pytest.raises(ValueError, match=message):
        model(torch.zeros(1, 3, dtype=torch.long), given)


@pytest.mark.parametrize("maker, user", [
    ({"attention": "mha"}, {"attention": "linear"}),
    ({"attention": "mha"}, {"attention": "sliding_window"}),
    ({"attention": "mha"}, {"attention": "mla"}),
    ({"attention": "linear"}, {"attention": "mha"}),
    ({"attention": "mha_wrapper"}, {"attention": "mha"}),
    ({"attention": "mha"}, {"attention": "mqa"}),
    ({"dim": 64}, {}),
    ({"heads": 4}, {}),
    ({"attention": "gqa", "kv_heads": 1}, {"attention": "gqa", "kv_heads": 2}),
    ({"attention": "sliding_window", "window": 4}, {"attention": "sliding_window", "window": 8}),
    ({"attention": "linear"}, {"attention": "linear", "linear_conv": 3})])
def test_caches_another_model_made_are_refused_before_any_layer_reads_them(tiny_cfg: ModelConfig, maker: dict,
                                                                           user: dict) -> None:
    # Another variant's caches, or another width's, failed deep in a layer ("'KVCache' object has no attribute
    # 'kv'", a shape mismatch in the cache's append), or ran silently: mha's keys broadcast into mqa's one head, a
    # window of 4 slots served a window of 8.
    model = build(ModelConfig(**{**tiny_cfg.to_dict(), **user}))
    caches = build(ModelConfig(**{**tiny_cfg.to_dict(), **maker})).new_caches(1)
    with pytest.raises(ValueError, match=r"^caches made for another model: layer 0's cache is .+, where this model's "
                                         r"layers take .+: make them with this model's new_caches\(1\)$"):
        model(torch.zeros(1, 3, dtype=torch.long), caches)
    assert caches[0].length == 0  # refused before any layer wrote to them


@pytest.mark.parametrize("maker, user", [({"attention": "mha"}, {"attention": "mha_fused"}),
                                         ({"attention": "mha"}, {"vocab_size": 50})])
def test_caches_of_the_form_a_model_makes_are_taken_from_another_model(tiny_cfg: ModelConfig, maker: dict,
                                                                       user: dict) -> None:
    # Empty caches of the same shapes hold what this model's own would: refusing them would refuse nothing wrong.
    model = build(ModelConfig(**{**tiny_cfg.to_dict(), **user}))
    caches = build(ModelConfig(**{**tiny_cfg.to_dict(), **maker})).new_caches(1)
    ids = torch.zeros(1, 3, dtype=torch.long)
    torch.testing.assert_close(model(ids, caches), model(ids))


def test_caches_another_model_filled_are_refused_until_reset(tiny_cfg: ModelConfig) -> None:
    # Of the same form they were read silently: the second model attended to the first one's keys and values.
    first, second = build(tiny_cfg).eval(), build(tiny_cfg).eval()
    caches, ids = first.new_caches(1), torch.tensor([[1, 2, 3]])
    first(ids, caches)
    with pytest.raises(ValueError, match=r"^caches filled by another model: layer 0's holds 3 positions of another "
                                         r"model's keys and values, which this model would read as its own: call "
                                         r"reset\(\) on each cache first, or make them with this model's "
                                         r"new_caches\(1\)$"):
        second(ids[:, :1], caches)
    assert caches[0].length == 3  # refused before any layer wrote to them
    for cache in caches:
        cache.reset()
    torch.testing.assert_close(second(ids, caches), second(ids))
    torch.testing.assert_close(second(ids[:, :1], caches), second(torch.cat([ids, ids[:, :1]], 1))[:, -1:])
    del second  # the second model fed them last (and is gone): they hold none of the first one's keys
    with pytest.raises(ValueError, match="^caches filled by another model"):
        first(ids[:, :1], caches)


def test_compiled_decoding_refuses_caches_another_model_filled_before_compiling(tiny_cfg: ModelConfig) -> None:
    # Its exported step writes the caches' buffers without the model's forward, which makes the check elsewhere.
    first, second = build(tiny_cfg).eval(), compile_for_decoding(build(tiny_cfg).eval())
    caches = first.new_caches(1)
    first(torch.tensor([[1, 2, 3]]), caches)
    with pytest.raises(ValueError, match="^caches filled by another model: layer 0's holds 3 positions"):
        second(torch.tensor([[4]]), caches)
    assert second.steps == {} and caches[0].length == 3  # nothing compiled, nothing written


def test_ids_outside_the_vocabulary_are_refused_by_the_forward_naming_the_fix(tiny_cfg: ModelConfig) -> None:
    # A training loop whose tokenizer outgrew model.vocab_size met torch's "index out of range in self".
    model = build(tiny_cfg)
    for bad in (tiny_cfg.vocab_size, -1):
        with pytest.raises(ValueError, match=rf"outside this model's vocabulary of {tiny_cfg.vocab_size} .* "
                                             "vocab_size=tokenizer.vocab_size"):
            model(torch.tensor([[0, bad]]))


def test_an_untied_models_weights_are_refused_by_a_tied_model_rather_than_loaded_wrong(tiny_cfg: ModelConfig) -> None:
    # They loaded as "All keys matched successfully": the head, loaded last into the one tied tensor, replaced the
    # embedding, and the model's logits were another model's.
    untied = build(ModelConfig(**{**tiny_cfg.to_dict(), "tie_embeddings": False}))
    tied = build(tiny_cfg)
    with pytest.raises(ValueError, match=r"^these weights have a head of their own \(head.weight is not "
                                         r"tok_emb.weight\), and this model ties .* tie_embeddings=False"):
        tied.load_state_dict(untied.state_dict())
    ids = torch.randint(0, tiny_cfg.vocab_size, (1, 5))
    twin = build(tiny_cfg, seed=1)
    twin.load_state_dict(tied.state_dict())  # a tied model's own weights, and into an untied one, still load
    untied.load_state_dict(tied.state_dict())
    torch.testing.assert_close(twin(ids), tied(ids))
    torch.testing.assert_close(untied(ids), tied(ids))


def test_ids_on_another_device_than_the_model_are_refused_naming_the_move(tiny_cfg: ModelConfig) -> None:
    # gpt.load_checkpoint(path, device="cuda") fed ids built on the CPU met torch's "Expected all tensors to be on
    # the same device", from inside the embedding; the meta device stands in for a GPU on any machine.
    model = build(tiny_cfg).eval().to("meta")
    ids = torch.zeros(1, 3, dtype=torch.long)
    for call in (model, lambda ids: generate(model, ids, 2, temperature=0)):
        with pytest.raises(ValueError, match=r"token ids on cpu, this model on meta: move the ids to the model with "
                                             r"ids.to\('meta'\)"):
            call(ids)


def test_a_gpt_built_from_a_mapping_is_refused_naming_model_config(tiny_cfg: ModelConfig) -> None:
    with pytest.raises(ValueError, match=r"GPT takes a ModelConfig, not a dict: .* ModelConfig.from_dict\(values\)"):
        GPT(tiny_cfg.to_dict())


def test_int32_ids_are_token_ids_as_long_ones_are(tiny_cfg: ModelConfig) -> None:
    model = build(tiny_cfg).eval()
    ids = torch.randint(0, tiny_cfg.vocab_size, (2, 5))
    torch.testing.assert_close(model(ids.int()), model(ids))


def test_attention_maps_of_a_model_in_training_mode_are_its_evaluation_maps(tiny_cfg: ModelConfig) -> None:
    # GPT(cfg) starts in training mode: its dropout and random positions made every call's maps differ.
    cfg = ModelConfig(**{**tiny_cfg.to_dict(), "dropout": 0.5, "random_positions": 4 * tiny_cfg.block_size})
    model = build(cfg).train()
    idx = torch.randint(0, cfg.vocab_size, (1, 6))
    maps = model.attention_maps(idx)
    assert model.training
    for got, expected in zip(maps, model.eval().attention_maps(idx)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_attention_maps_are_causal_rows_that_sum_to_one(tiny_cfg: ModelConfig) -> None:
    maps = build(tiny_cfg).attention_maps(torch.randint(0, tiny_cfg.vocab_size, (1, 6)))
    assert len(maps) == tiny_cfg.layers
    for weights in maps:
        assert weights.shape == (1, tiny_cfg.heads, 6, 6)
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, tiny_cfg.heads, 6))
        assert torch.all(weights.triu(diagonal=1) == 0)


@pytest.mark.parametrize("name", gpt.__all__)
def test_every_public_name_documents_itself_and_its_public_methods(name: str) -> None:
    # help(gpt.GPT) showed nn.Module's "Base class for all neural network modules.", and help(gpt.ModelConfig) the
    # signature a dataclass writes when its class has no docstring.
    obj = getattr(gpt, name)
    if not callable(obj):  # a registry, documented where the docs name it
        return
    own = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
    assert own and not own.startswith(f"{name}("), f"{name} has no docstring of its own"
    methods = {key: getattr(value, "fget", value) for key, value in vars(obj).items()
               if not key.startswith("_") and (callable(value) or isinstance(value, (property, classmethod)))}
    undocumented = [key for key, method in methods.items() if not getattr(method, "__doc__", None)]
    assert not undocumented, f"{name} leaves undocumented: {', '.join(undocumented)}"


def test_dir_of_the_package_offers_every_public_name() -> None:
    # The names are imported on first use, so dir(gpt) (what `gpt.<Tab>` completes from) listed none of them.
    assert set(gpt.__all__) <= set(dir(gpt))
