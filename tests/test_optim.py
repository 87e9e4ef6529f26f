"""Optimizers and schedules: each schedule has its shape; Muon takes exactly the blocks' matrices; the chained
optimizer steps as its parts would alone and resumes from its state_dict to the same bits."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from omegaconf import OmegaConf
from torch.nn import functional as F

from gpt import GPT, ModelConfig
from gpt.training.muon import Muon
from gpt.training.optim import OPTIMIZERS, READ_BY, SCHEDULES, Chained, OptimConfig
from tests.test_configs import compose_with, options

CFG = OptimConfig(lr=1e-2, min_lr=1e-3, warmup_steps=10, max_steps=110, decay_fraction=0.25)


def curve(name: str) -> list[float]:
    return [SCHEDULES[name](step, CFG) for step in range(CFG.max_steps + 20)]


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_every_schedule_warms_up_linearly_and_stays_within_its_range(name: str) -> None:
    lrs = curve(name)
    assert lrs[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert all(CFG.min_ratio - 1e-12 <= m <= 1.0 for m in lrs[10:])
    assert all(b <= a + 1e-12 for a, b in zip(lrs[10:], lrs[11:]))  # never rises again after warmup


# Another value of the settings the schedules here read; any other is halved. The peak LR is left out: every
# optimizer reads optim.lr, and a schedule sees it only through min_lr / lr.
CHANGED = {"min_lr": 5e-3, "max_steps": 70, "decay_fraction": 0.5, "warmup_steps": 20}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_every_schedule_reads_the_settings_read_by_says_it_reads(name: str) -> None:
    """The command line refuses a setting that READ_BY says the run's schedule never reads: a schedule missing from
    READ_BY had its own min_lr refused, and a setting it alone reads, left out, changed nothing elsewhere unrefused."""
    fields = {f.name for f in dataclasses.fields(OptimConfig)} - {"name", "schedule", "lr", "betas"}
    for field in sorted(fields):
        value = getattr(CFG, field)  # halved (an int to one more than its half): in range for every field here
        other = CHANGED.get(field, value // 2 + 1 if type(value) is int else value / 2)
        cfg = dataclasses.replace(CFG, **{field: other})
        reads = [SCHEDULES[name](step, cfg) for step in range(CFG.max_steps + 20)] != curve(name)
        readers = READ_BY.get(field, tuple(SCHEDULES) if field == "warmup_steps" else ())
        assert reads == (name in readers), (
            f"optim.schedule={name} {'reads' if reads else 'does not read'} optim.{field}, which READ_BY in "
            f"gpt/training/optim.py gives to {' and '.join(readers) if readers else 'no schedule'}: "
            f"{'add' if reads else 'remove'} {name!r} {'to' if reads else 'from'} READ_BY[{field!r}]")


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_option_writes_every_schedule_setting(name: str) -> None:
    """Every optimizer runs under every schedule: a configs/optim/<name>.yaml without a schedule setting had it
    refused on the command line as another optimizer's (and without max_steps, every run of it refused)."""
    cfg = compose_with(f"optim={name}").optim
    wanted = ["lr", "schedule", "warmup_steps", *READ_BY]
    missing = [key for key in wanted if key not in cfg]
    assert not missing, (f"configs/optim/{name}.yaml does not write {', '.join(missing)}: start it with "
                         "`defaults: [adamw, _self_]` as muon.yaml does, or write them as adamw.yaml does")
    assert OmegaConf.to_container(cfg)["max_steps"] == "${trainer.max_steps}", \
        f"configs/optim/{name}.yaml: the schedule ends where training does: max_steps: ${{trainer.max_steps}}"


def test_cosine_falls_half_a_cosine_to_min_lr_at_max_steps() -> None:
    lrs = curve("cosine")
    assert lrs[10] == pytest.approx(1.0) and lrs[60] == pytest.approx((1 + CFG.min_ratio) / 2)
    assert lrs[35] == pytest.approx(CFG.min_ratio + (1 - CFG.min_ratio) * (1 + 2 ** -0.5) / 2)
    assert lrs[110:] == pytest.approx([CFG.min_ratio] * 20)


def test_wsd_holds_the_peak_then_falls_linearly_over_the_last_decay_fraction() -> None:
    lrs = curve("wsd")  # decay over the last round(0.25 * 110) = 28 steps: from step 82
    assert lrs[10:82] == pytest.approx([1.0] * 72)
    assert lrs[96] == pytest.approx((1 + CFG.min_ratio) / 2)
    assert lrs[110:] == pytest.approx([CFG.min_ratio] * 20)
    assert lrs[83] - lrs[84] == pytest.approx(lrs[100] - lrs[101])  # a straight line


def test_wsd_whose_decay_would_start_inside_warmup_warms_up_whole_then_decays_to_the_end() -> None:
    """decay_fraction=0.8 of 100 steps would start decaying at step 20, inside a warmup of 50: the warmup runs whole
    (the rise did not jump from 0.4 to most of the peak at step 20), then the decay takes the 50 steps left."""
    cfg = OptimConfig(lr=1e-2, min_lr=1e-3, warmup_steps=50, max_steps=100, decay_fraction=0.8)
    lrs = [SCHEDULES["wsd"](step, cfg) for step in range(101)]
    assert lrs[:50] == pytest.approx([(s + 1) / 50 for s in range(50)])
    assert lrs[50] == pytest.approx(1.0) and lrs[75] == pytest.approx((1 + cfg.min_ratio) / 2)
    assert lrs[100] == pytest.approx(cfg.min_ratio)


def test_constant_holds_the_peak_after_warmup() -> None:
    assert curve("constant")[10:] == pytest.approx([1.0] * (CFG.max_steps + 10))


def test_registries_match_their_yaml_options_and_the_default_is_muon_cosine() -> None:
    assert set(OPTIMIZERS) == set(options("optim"))
    assert (OptimConfig().name, OptimConfig().schedule) == ("muon", "cosine")


def tiny_model(tie_embeddings: bool = True) -> GPT:
    torch.manual_seed(0)
    return GPT(ModelConfig(vocab_size=37, layers=2, heads=2, dim=32, block_size=16, norm="layernorm", pos="learned",
                           tie_embeddings=tie_embeddings))


@pytest.mark.parametrize("tie_embeddings", [True, False])
def test_muon_takes_the_blocks_matrices_and_adamw_every_other_parameter(tie_embeddings: bool) -> None:
    model = tiny_model(tie_embeddings)
    optimizer = OPTIMIZERS["muon"](model, OptimConfig(name="muon"), fused=True)
    adam, muon = optimizer.optimizers
    assert isinstance(adam, torch.optim.AdamW) and isinstance(muon, torch.optim.Muon)
    by_id = {id(p): name for name, p in model.named_parameters()}
    muon_names = {by_id[id(p)] for group in muon.param_groups for p in group["params"]}
    adam_names = {by_id[id(p)] for group in adam.param_groups for p in group["params"]}
    assert muon_names == {n for n, p in model.named_parameters() if n.startswith("blocks.") and p.dim() == 2}
    assert adam_names == set(by_id.values()) - muon_names  # embeddings, positions, norms: AdamW, once each
    assert {"tok_emb.weight", "pos.table.weight", "norm.weight"} <= adam_names
    assert ("head.weight" in adam_names) is not tie_embeddings  # an untied head is a matrix, yet AdamW's


def test_muon_orthogonalises_with_the_configured_newton_schulz_steps() -> None:
    """optim.ns_steps reaches torch.optim.Muon, and changes the update: fewer iterations, a less orthogonal one."""
    updated = []
    for steps in (1, 5):
        model = tiny_model()
        optimizer = OPTIMIZERS["muon"](model, OptimConfig(name="muon", ns_steps=steps), fused=True)
        assert optimizer.optimizers[1].param_groups[0]["ns_steps"] == steps
        train(model, optimizer, range(1))
        updated.append(model.blocks[0].mlp.fc.weight.detach().clone())
    assert not torch.equal(*updated)


def loss_of(model: GPT, step: int) -> torch.Tensor:
    idx = torch.randint(0, 37, (4, 17), generator=torch.Generator().manual_seed(step))
    return F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten())


def train(model: GPT, optimizer: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        optimizer.zero_grad()
        loss_of(model, step).backward()
        optimizer.step()


def test_chained_steps_exactly_as_its_optimizers_would_alone() -> None:
    cfg = OptimConfig(name="muon")
    chained_model, separate_model = tiny_model(), tiny_model()
    chained = OPTIMIZERS["muon"](chained_model, cfg, fused=True)
    parts = OPTIMIZERS["muon"](separate_model, cfg, fused=True).optimizers  # the same two, stepped by hand
    train(chained_model, chained, range(3))
    for step in range(3):
        for part in parts:
            part.zero_grad()
        loss_of(separate_model, step).backward()
        for part in parts:
            part.step()
    for (name, a), b in zip(chained_model.named_parameters(), separate_model.parameters()):
        assert torch.equal(a, b), name
    assert len(chained.state) == sum(1 for _ in chained_model.parameters())  # every parameter's state, in one place


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_restored_from_state_dict_continues_bitwise(name: str) -> None:
    cfg = OptimConfig(name=name)
    model = tiny_model()
    optimizer = OPTIMIZERS[name](model, cfg, fused=True)
    train(model, optimizer, range(3))
    restored_model = copy.deepcopy(model)
    restored = OPTIMIZERS[name](restored_model, cfg, fused=True)
    restored.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    if isinstance(restored, Chained):  # the parts must step on the loaded state, not on their empty own
        assert all(part.state is restored.state for part in restored.optimizers)
    train(model, optimizer, range(3, 6))
    train(restored_model, restored, range(3, 6))
    for (param_name, a), b in zip(model.named_parameters(), restored_model.parameters()):
        assert torch.equal(a, b), param_name


@pytest.mark.parametrize("nesterov, rule", [(True, None), (False, "match_rms_adamw")])
def test_muon_batched_by_shape_steps_as_torchs_muon_one_matrix_at_a_time(nesterov: bool, rule: str | None) -> None:
    """Square, wide and tall matrices (attention, MLP in and out, grouped keys), one without a gradient: the same
    parameters after every step as torch.optim.Muon, and each one's state loads into the other."""
    def models() -> tuple[GPT, GPT]:
        torch.manual_seed(0)
        model = GPT(ModelConfig(vocab_size=37, layers=2, heads=4, kv_heads=2, dim=32, block_size=16,
                                attention="gqa"))
        return model, copy.deepcopy(model)

    ours, theirs = models()
    settings = {"lr": 0.05, "weight_decay": 0.1, "nesterov": nesterov, "adjust_lr_fn": rule}
    frozen = ours.blocks[1].attn.value.weight  # no gradient: skipped by both
    matrices = [[p for n, p in model.named_parameters() if n.startswith("blocks.") and p.dim() == 2]
                for model in (ours, theirs)]
    shapes = {tuple(p.shape) for p in matrices[0]}
    assert {(32, 32), (128, 32), (32, 128), (16, 32)} <= shapes  # every orientation batched
    optimizers = [Muon(matrices[0], **settings), torch.optim.Muon(matrices[1], **settings)]
    for step in range(3):
        for model, optimizer in zip((ours, theirs), optimizers):
            optimizer.zero_grad()
            loss_of(model, step).backward()
            model.blocks[1].attn.value.weight.grad = None
            optimizer.step()
        for a, b in zip(matrices[0], matrices[1]):
            torch.testing.assert_close(a, b)
    assert not optimizers[0].state[frozen] and torch.equal(frozen, models()[0].blocks[1].attn.value.weight)
    assert any(not torch.equal(a, b) for a, b in zip(matrices[0], models()[0].parameters()) if a is not frozen)

    swapped = [torch.optim.Muon(matrices[0], **settings), Muon(matrices[1], **settings)]
    for new, old in zip(swapped, optimizers):
        new.load_state_dict(old.state_dict())
    for model, optimizer in zip((ours, theirs), swapped):
        optimizer.zero_grad()
        loss_of(model, 3).backward()
        optimizer.step()
    for a, b in zip(matrices[0], matrices[1]):
        torch.testing.assert_close(a, b)
