"""Positional encodings: correct at cache offsets, each one's defining property, and randomized positions (Ruoss et
al. 2023) drawn in training only, read where they are drawn."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from torch.nn import functional as F

from gpt import GPT, ModelConfig, generate
from gpt.model.config import INIT_STD
from gpt.model import positional
from gpt.model.positional import (POSITIONAL, AlibiPositional, AtPositions, RotaryPositional, SinusoidalPositional,
                                  alibi_slopes, random_positions)

CFG = ModelConfig(vocab_size=37, layers=1, heads=4, dim=32, block_size=16)


@pytest.mark.parametrize("name", list(POSITIONAL))
def test_a_chunk_at_an_offset_matches_the_same_positions_of_the_whole(name: str) -> None:
    """What a KV cache relies on: positions start..T-1 given alone equal those of the full sequence."""
    torch.manual_seed(0)
    pos = POSITIONAL[name].from_config(CFG)
    x, q, k = torch.randn(2, 16, 32), torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8)
    torch.testing.assert_close(pos.embed(x[:, 5:], 5), pos.embed(x, 0)[:, 5:])
    rotated_q, rotated_k = pos.rotate(q[:, :, 5:], k[:, :, 5:], 5)
    whole_q, whole_k = pos.rotate(q, k, 0)
    torch.testing.assert_close((rotated_q, rotated_k), (whole_q[:, :, 5:], whole_k[:, :, 5:]))
    bias = pos.score_bias(11, 16, 5, 4, torch.device("cpu"))
    whole = pos.score_bias(16, 16, 0, 4, torch.device("cpu"))
    assert (bias is None) == (whole is None)
    if bias is not None:
        torch.testing.assert_close(bias, whole[:, 5:])


def test_rope_scores_depend_only_on_distance_and_keep_norms() -> None:
    torch.manual_seed(0)
    rope = RotaryPositional()
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)
    def score(q_at: int, k_at: int) -> torch.Tensor:
        return (rope.rotate(q, q, q_at)[0] * rope.rotate(k, k, k_at)[1]).sum()
    torch.testing.assert_close(score(7, 3), score(12, 8))
    assert not torch.allclose(score(7, 3), score(7, 4))
    torch.testing.assert_close(rope.rotate(q, k, 9)[0].norm(), q.norm())


def test_rope_builds_its_angles_once_for_a_prompt_and_the_steps_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt of 300 positions, then one position at a time up to twice that: one table, built with the prompt
    (built for the prompt alone, the first step after it rebuilt the table: 6 ms after 16k tokens)."""
    builds = []
    frequencies = positional._inverse_frequencies
    monkeypatch.setattr(positional, "_inverse_frequencies", lambda *a: builds.append(a) or frequencies(*a))
    rope, (q, k) = RotaryPositional(), torch.randn(2, 1, 2, 300, 8)
    whole = rope.rotate(q, k, 0)
    steps = [rope.rotate(q[:, :, :1], k[:, :, :1], start) for start in range(300, 600)]
    assert len(builds) == 1
    fresh = RotaryPositional().rotate(q[:, :, :1], k[:, :, :1], 599)  # a table built for position 599 alone
    torch.testing.assert_close(steps[-1], fresh)
    torch.testing.assert_close(rope.rotate(q, k, 0), whole)


def test_rope_angles_built_while_generating_still_train() -> None:
    """Sampling before training (generate runs under inference mode) builds the table that training then reads:
    an inference tensor there would make the next backward fail."""
    model = GPT(replace(CFG, pos="rope"))
    idx = torch.randint(0, 37, (2, 16))
    generate(model, idx[:, :4], 3, temperature=0)
    F.cross_entropy(model(idx).flatten(0, 1), idx.flatten()).backward()
    assert model.tok_emb.weight.grad is not None


def test_alibi_bias_is_slope_times_distance() -> None:
    bias = AlibiPositional().score_bias(3, 5, 2, 4, torch.device("cpu"))  # queries at positions 2, 3, 4
    slopes = torch.tensor([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8])
    assert bias.shape == (4, 3, 5)
    torch.testing.assert_close(bias[:, 2, 0], -4 * slopes)  # query 4 to key 0
    torch.testing.assert_close(bias[:, 0, 2], torch.zeros(4))  # a query to itself


@pytest.mark.parametrize("heads", [1, 2, 4, 8, 16])
def test_alibi_slopes_for_a_power_of_two_are_the_geometric_sequence(heads: int) -> None:
    torch.testing.assert_close(alibi_slopes(heads), 2.0 ** (-8.0 * torch.arange(1, heads + 1) / heads))


def test_alibi_slopes_for_six_heads_are_the_papers() -> None:
    """Press et al. (2022): four heads' slopes, then every other slope of eight heads' sequence."""
    paper = torch.tensor([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3])
    torch.testing.assert_close(alibi_slopes(6), paper)
    bias = AlibiPositional().score_bias(1, 4, 3, 6, torch.device("cpu"))  # query 3 against keys 0..3
    torch.testing.assert_close(bias[:, 0, 0], -3 * paper)


def test_sinusoidal_table_is_sines_and_cosines_at_the_embeddings_scale() -> None:
    table = SinusoidalPositional(16, 8).table / (INIT_STD * math.sqrt(2))
    torch.testing.assert_close(table[5, 0:2], torch.tensor([math.sin(5), math.cos(5)]))
    torch.testing.assert_close(table[5, 2:4], torch.tensor([math.sin(5 / 10), math.cos(5 / 10)]))  # 10000^(-2/8)


def test_rope_needs_an_even_head_width() -> None:
    with pytest.raises(ValueError, match="pos=rope rotates feature pairs, so it needs an even width; "
                                         "attention=mha rotates dim/heads=9"):
        GPT(ModelConfig(vocab_size=10, heads=4, dim=36, pos="rope"))


@pytest.mark.parametrize("init", ["gpt2", "torch"])
def test_sinusoidal_positions_do_not_drown_the_token_embeddings(init: str) -> None:
    """The table's RMS matches the token embeddings' initial std under either init, so neither swamps the other."""
    model = GPT(ModelConfig(vocab_size=50, dim=64, heads=4, pos="sinusoidal", init=init))
    assert 0.8 < model.pos.table.pow(2).mean().sqrt() / model.tok_emb.weight.std() < 1.25


DRAWABLE = [name for name, encoding in POSITIONAL.items() if encoding.drawable]


def reads_given_positions(name: str) -> bool:
    """Whether the encoding's output moves with the positions it is handed (AtPositions), which is what drawing them
    in training changes."""
    torch.manual_seed(0)
    pos = POSITIONAL[name].from_config(replace(CFG, random_positions=64))
    x, q, k = torch.randn(2, 6, 32), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    consecutive, drawn = torch.arange(6).expand(2, 6), torch.tensor([[0, 3, 9, 20, 41, 63]] * 2)
    read = [(at.embed(x, 0), *at.rotate(q, k, 0)) for at in (AtPositions(pos, consecutive), AtPositions(pos, drawn))]
    return any(not torch.equal(a, b) for a, b in zip(*read))


def test_an_encoding_is_drawable_exactly_when_it_reads_the_positions_it_is_given() -> None:
    """The drawable encodings were a list of names here: a new one with drawable = True failed on the list, not on
    what it does. Each flag is checked against the encoding's own behaviour, and the others refuse to draw."""
    wrong = [name for name, encoding in POSITIONAL.items() if reads_given_positions(name) != encoding.drawable]
    assert not wrong, "; ".join(
        f"pos={name} {'reads' if reads_given_positions(name) else 'ignores'} the positions it is given: set "
        f"drawable = {not POSITIONAL[name].drawable} on {POSITIONAL[name].__name__} (gpt/model/positional.py)"
        for name in wrong)
    for name in set(POSITIONAL) - set(DRAWABLE):
        with pytest.raises(ValueError, match=f"pos={name} has none to draw"):
            GPT(replace(CFG, pos=name, random_positions=64))
    with pytest.raises(ValueError, match="random_positions=8 is below block_size=16"):
        replace(CFG, random_positions=8)


@pytest.mark.parametrize("name", DRAWABLE)
def test_an_encoding_read_at_given_positions_equals_it_at_those_positions(name: str) -> None:
    """AtPositions with rows start..start+T-1 is the encoding at start; with other rows, those rows' positions."""
    torch.manual_seed(0)
    pos = POSITIONAL[name].from_config(replace(CFG, random_positions=64))
    x, q, k = torch.randn(2, 6, 32), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    consecutive = AtPositions(pos, torch.arange(5, 11).expand(2, 6))
    torch.testing.assert_close(consecutive.embed(x, 0), pos.embed(x, 5))
    torch.testing.assert_close(consecutive.rotate(q, k, 0), pos.rotate(q, k, 5))
    drawn = torch.tensor([[0, 3, 9, 20, 41, 63], [1, 2, 3, 4, 5, 6]])
    at = AtPositions(pos, drawn)
    for row in range(2):  # each row at its own positions, as if it were alone
        alone = AtPositions(pos, drawn[row:row + 1])
        torch.testing.assert_close(at.embed(x, 0)[row], alone.embed(x[row:row + 1], 0)[0])
        torch.testing.assert_close(at.rotate(q, k, 0)[0][row], alone.rotate(q[row:row + 1], k[row:row + 1], 0)[0][0])


def test_random_positions_are_sorted_distinct_and_within_the_range() -> None:
    torch.manual_seed(0)
    drawn = random_positions(64, 10, 40, torch.device("cpu"))
    assert drawn.shape == (64, 10) and int(drawn.min()) >= 0 and int(drawn.max()) < 40
    assert (drawn.diff(dim=1) > 0).all() and int(drawn.max()) > 30  # sorted, distinct, and reaching far


@pytest.mark.parametrize("name", DRAWABLE)
def test_only_training_draws_positions(name: str) -> None:
    """In training each pass draws new positions (outputs differ); in evaluation positions are 0..T-1, the same
    as a model without random positions; learned positions get a table the size of the range."""
    torch.manual_seed(0)
    model = GPT(replace(CFG, pos=name, random_positions=64))
    idx = torch.randint(0, 37, (2, 12))
    model.train()
    assert not torch.allclose(model(idx), model(idx))
    model.eval()
    plain = GPT(replace(CFG, pos=name))
    plain.load_state_dict({k: v[:16] if k == "pos.table.weight" else v for k, v in model.state_dict().items()})
    torch.testing.assert_close(model(idx), plain.eval()(idx))
    if name == "learned":
        assert model.pos.table.num_embeddings == 64
