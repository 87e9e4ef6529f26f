"""The attention-map grid: one panel per layer x head holding exactly the model's causal weights, labelled with
the tokens, and `generate.py --attention-map` writing it (or refusing in one line)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.image import imread

import generate
from gpt import ModelConfig
from gpt.data.tokenizers.vocab import CharTokenizer, WordTokenizer
from gpt.evaluation.maps import HIDDEN, attention_map
from gpt.inference.checkpoint import save_model
from gpt.model.attention import ATTENTION
from gpt.model.gpt import without_foreign_settings
from tests.conftest import build, calculator_tokenizer

PROMPT = "seven times six equals"


@pytest.fixture
def tokenizer() -> WordTokenizer:
    return calculator_tokenizer()


@pytest.fixture
def cfg(tokenizer: WordTokenizer) -> ModelConfig:
    return ModelConfig(vocab_size=tokenizer.vocab_size, layers=2, heads=2, dim=32, block_size=16)


def test_grid_has_a_causal_panel_per_layer_and_head(cfg: ModelConfig, tokenizer: WordTokenizer) -> None:
    model = build(cfg)
    ids = tokenizer.encode("\n" + PROMPT)
    fig = attention_map(model, ids, tokenizer)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4
    expected = model.attention_maps(torch.tensor([ids]))
    for layer in range(2):
        for head in range(2):
            ax = panels[2 * layer + head]
            drawn = np.asarray(ax.images[0].get_array())
            assert ax.get_title() == f"layer {layer} head {head}"
            assert np.all(np.triu(drawn, k=1) == 0)  # no query sees a later key
            np.testing.assert_allclose(drawn, expected[layer][0, head].numpy())
            np.testing.assert_allclose(drawn.sum(axis=1), 1.0, rtol=1e-5)
            assert [t.get_text() for t in ax.get_xticklabels()] == ["\\n", *PROMPT.split()]


@pytest.mark.parametrize("attention", ATTENTION)
def test_keys_a_query_cannot_see_are_drawn_apart_from_keys_it_gives_no_weight(attention: str,
                                                                              tokenizer: WordTokenizer) -> None:
    """A masked key (the future, or one past a sliding window) was drawn in the colour of weight 0, so a key the
    query could not see looked like one it saw and ignored."""
    window = 3
    model = build(without_foreign_settings(ModelConfig(
        vocab_size=tokenizer.vocab_size, layers=1, heads=2, dim=16, block_size=16, attention=attention,
        window=window, kv_heads=1, kv_latent_dim=8)))
    ids = tokenizer.encode("\n" + PROMPT)
    fig = attention_map(model, ids, tokenizer)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())  # (height, width, 4), row 0 at the top
    T = len(ids)
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    if attention == "sliding_window":
        visible &= ~torch.ones(T, T, dtype=torch.bool).tril(-window)
    hidden = tuple(round(255 * c) for c in to_rgba(HIDDEN))
    for ax in (ax for ax in fig.axes if ax.images):
        for i in range(T):
            for j in range(T):
                x, y = ax.transData.transform((j, i))  # the cell's centre, from the bottom left
                drawn = tuple(int(c) for c in pixels[pixels.shape[0] - round(y), round(x)])
                assert (drawn == hidden) != bool(visible[i, j]), (attention, i, j, drawn)
    assert any("hidden" in text.get_text() for legend in fig.legends for text in legend.get_texts())


def test_no_ids_are_refused_as_no_ids(cfg: ModelConfig, tokenizer: WordTokenizer) -> None:
    """tokenizer.encode("") drawn was "token ids of dtype torch.float32: pass integer ids": an empty list made a float
    tensor, and the line named a fix that changes nothing."""
    with pytest.raises(ValueError, match=r"of shape \(1, 0\): .* length >= 1"):
        attention_map(build(cfg), tokenizer.encode(""), tokenizer)


def test_a_space_token_is_labelled_visibly() -> None:
    """A char model's space was a blank tick label (and a blank chip in the viewer), told apart from no token only
    by its place."""
    chars = CharTokenizer(list(" ab\n"))
    fig = attention_map(build(ModelConfig(vocab_size=4, layers=1, heads=1, dim=16, block_size=8)),
                        chars.encode("a b\n"), chars)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "\u2423", "b", "\\n"]

def save(tmp_path: Path, cfg: ModelConfig, tokenizer: WordTokenizer) -> Path:
    path = tmp_path / "model.pt"
    save_model(path, build(cfg), tokenizer, meta={"one_example_per_line": True})
    return path


def test_cli_writes_a_readable_png(tmp_path: Path, cfg: ModelConfig, tokenizer: WordTokenizer) -> None:
    out = tmp_path / "maps.png"
    assert generate.main(["--ckpt", str(save(tmp_path, cfg, tokenizer)), "--prompt", PROMPT,
                          "--attention-map", str(out)]) == 0
    width, height = attention_map(build(cfg), tokenizer.encode("\n" + PROMPT), tokenizer).get_size_inches() * 100
    assert imread(out).shape[:2] == (round(height), round(width))  # decodes, at the figure's size (100 dpi)


def test_cli_draws_a_variant_that_never_forms_weights(tmp_path: Path, tokenizer: WordTokenizer) -> None:
    """The fused kernel forms no weight matrix; the map shows the equal written-out maths' weights."""
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, layers=2, heads=2, dim=32, block_size=16, kernel="sdpa")
    out = tmp_path / "maps.png"
    assert generate.main(["--ckpt", str(save(tmp_path, cfg, tokenizer)), "--prompt", PROMPT,
                          "--attention-map", str(out)]) == 0
    assert imread(out).shape[0] > 0


def test_cli_refuses_a_suffix_it_cannot_draw(tmp_path: Path, cfg: ModelConfig, tokenizer: WordTokenizer,
                                            capsys: pytest.CaptureFixture) -> None:
    ckpt = str(save(tmp_path, cfg, tokenizer))
    assert generate.main(["--ckpt", ckpt, "--prompt", PROMPT, "--attention-map", str(tmp_path / "maps.txt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --attention-map {tmp_path / 'maps.txt'}: ") and err.count("\n") == 1, err
    assert not (tmp_path / "maps.txt").exists()


@pytest.mark.parametrize("flag, suffix", [("--attention-map", ".png"), ("--attention-html", ".html")])
def test_both_attention_outputs_refuse_a_name_without_a_suffix_and_replace_their_own_kind(
        flag: str, suffix: str, tmp_path: Path, cfg: ModelConfig, tokenizer: WordTokenizer,
        capsys: pytest.CaptureFixture) -> None:
    """--attention-map wrote a PNG over a file with no suffix (a run's notes, a LICENSE), where --attention-html
    refused the same name; a file of the output's own kind both replace, as a rerun to refresh it expects."""
    ckpt = str(save(tmp_path, cfg, tokenizer))
    notes = tmp_path / "notes"
    notes.write_text("mine")
    assert generate.main(["--ckpt", ckpt, "--prompt", PROMPT, flag, str(notes)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag} {notes}: ") and f"end the name in {suffix}" in err and \
        err.count("\n") == 1, err
    assert notes.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["model.pt", "notes"]
    out = tmp_path / f"view{suffix}"
    out.write_text("an older one")
    assert generate.main(["--ckpt", ckpt, "--prompt", PROMPT, flag, str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: ") and out.read_bytes() != b"an older one"


def test_cli_refuses_a_prompt_longer_than_the_block_in_one_line_naming_it(tmp_path: Path, cfg: ModelConfig,
                                                                        tokenizer: WordTokenizer,
                                                                        capsys: pytest.CaptureFixture) -> None:
    # It was refused as a file name to fix: "sequence of 19 tokens exceeds block_size=16; end the name in .png".
    long = " plus ".join(["one"] * 9) + " equals"  # 18 words after the line start
    out = tmp_path / "maps.png"
    assert generate.main(["--ckpt", str(save(tmp_path, cfg, tokenizer)), "--prompt", long,
                          "--attention-map", str(out)]) == 2
    assert capsys.readouterr().err == "error: --prompt is 19 tokens to this model, more than the block_size=16 it " \
                                      "attends over: shorten it\n"
    assert not out.exists()


def test_cli_refuses_both_attention_outputs_at_once(tmp_path: Path, cfg: ModelConfig, tokenizer: WordTokenizer,
                                                    capsys: pytest.CaptureFixture) -> None:
    # The map was drawn and the viewer left out without a word, the command ending in status 0.
    maps, view = tmp_path / "maps.png", tmp_path / "view.html"
    assert generate.main(["--ckpt", str(save(tmp_path, cfg, tokenizer)), "--prompt", PROMPT,
                          "--attention-map", str(maps), "--attention-html", str(view)]) == 2
    assert capsys.readouterr().err == "error: argument --attention-html: not allowed with argument --attention-map " \
                                      "(see python generate.py --help)\n"
    assert not maps.exists() and not view.exists()


@pytest.mark.parametrize("args, flag", [
    (["--temperature", "0.8"], "--temperature"),
    (["--max-new-tokens", "5"], "--max-new-tokens"),
    (["--temperature", "0.8", "--num-samples", "3"], "--temperature"),
])
def test_cli_refuses_generation_settings_the_map_never_uses(tmp_path: Path, cfg: ModelConfig,
                                                           tokenizer: WordTokenizer, capsys: pytest.CaptureFixture,
                                                           args: list[str], flag: str) -> None:
    # The map is of the prompt alone: these were dropped without a word and the map written as if they had acted.
    out = tmp_path / "maps.png"
    assert generate.main(["--ckpt", str(save(tmp_path, cfg, tokenizer)), "--prompt", PROMPT, *args,
                          "--attention-map", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {flag} sets the generation, but --attention-map draws the attention " \
                                      "over the prompt alone, without generating: drop it, or pass --attention-html " \
                                      "to see the generated tokens too\n"
    assert not out.exists()
