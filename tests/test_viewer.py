"""The attention viewer: for every attention variant the page embeds causal weights whose rows sum to 1 with
masked cells zero, the mask and ALiBi bias actually applied, per-head numbers that mean what they say, and
nothing that reaches the network; generate.py writes it; a real browser renders it and answers a reader."""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from matplotlib.colors import to_rgb

import generate
from gpt import ModelConfig
from gpt.data.tokenizers.vocab import WordTokenizer
from gpt.evaluation.maps import HIDDEN
from gpt.evaluation.viewer import attention_view, head_stats, induction_scores, render_html, write_attention_html
from gpt.inference.checkpoint import save_model
from gpt.inference.generation import generate as generate_ids
from gpt.inference.text import TextModel
from gpt.model.attention import ATTENTION
from gpt.model.gpt import without_foreign_settings
from tests.conftest import BROWSERS, build, calculator_tokenizer

TOKENIZER = calculator_tokenizer()
NEWLINE = TOKENIZER.encode("\n")[0]
PROMPT = [NEWLINE, *TOKENIZER.encode("two plus three equals")]
WINDOW = 3
LINES = {"one_example_per_line": True}  # the calculator's convention: a prompt starts a line


def make(attention: str, pos: str = "learned", kernel: str = "math") -> ModelConfig:
    return without_foreign_settings(ModelConfig(vocab_size=TOKENIZER.vocab_size, layers=2, heads=2, dim=16,
                                                block_size=12, attention=attention, pos=pos, window=WINDOW, kv_heads=1,
                                                kv_latent_dim=8, kernel=kernel))


def embedded(html: str) -> dict:
    """The JSON the page carries, read back the way its script reads it."""
    match = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', html, re.S)
    return json.loads(match.group(1))


# Every variant with learned positions (all accept them), plus the cases with their own mask maths, plus the fused
# kernel, which forms no weights of its own.
CASES = [(name, "learned", "math") for name in ATTENTION] + [
    ("sliding_window", "alibi", "math"), ("mha", "alibi", "math"), ("linear", "rope", "math"),
    ("mha", "learned", "sdpa"), ("sliding_window", "alibi", "sdpa")]


@pytest.mark.parametrize("attention, pos, kernel", CASES)
def test_page_embeds_every_heads_weights_with_the_mask_applied(attention: str, pos: str, kernel: str,
                                                               tmp_path: Path) -> None:
    model = build(make(attention, pos, kernel))
    path = tmp_path / "view.html"
    returned = write_attention_html(path, TextModel(model, TOKENIZER, LINES), "two plus three equals",
                                    max_new_tokens=6)
    view = embedded(path.read_text())
    assert view == json.loads(json.dumps(returned))
    T, heads = len(PROMPT) + 6, len(view["weights"][0])
    assert (view["layers"], view["prompt_len"], len(view["tokens"])) == (2, len(PROMPT), T)
    assert view["tokens"][:len(PROMPT)] == ["\\n", "two", "plus", "three", "equals"]
    weights, allowed = torch.tensor(view["weights"]), torch.tensor(view["allowed"], dtype=torch.bool)
    assert weights.shape == (2, heads, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    window = causal & ~torch.ones(T, T, dtype=torch.bool).tril(-WINDOW)
    assert torch.equal(allowed, window if attention == "sliding_window" else causal)
    assert torch.all(weights[..., ~allowed] == 0)
    if (attention, pos) != ("linear", "rope"):  # RoPE rotates only the numerator of linear attention
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, heads, T), atol=T * 5e-5, rtol=0)
    for name in ("entropy", "previous", "first", "induction"):
        assert torch.tensor(view["stats"][name]).shape == (2, heads)
    assert view["forms_weights"] == (ATTENTION[attention].has_weights and kernel == "math")
    assert ("explicit way" in view["notes"]["attention"]) != view["forms_weights"]
    if pos == "alibi":
        slopes = 2.0 ** (-8.0 * torch.arange(1, heads + 1) / heads)  # (H,)
        distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0)  # (T, T)
        torch.testing.assert_close(torch.tensor(view["bias"]), -slopes[:, None, None] * distance, atol=1e-4, rtol=0)
    else:
        assert view["bias"] is None


def test_page_loads_nothing_from_anywhere(tmp_path: Path) -> None:
    path = tmp_path / "view.html"
    write_attention_html(path, TextModel(build(make("mha")), TOKENIZER, LINES), "two", max_new_tokens=2)
    html = path.read_text()
    assert not re.search(r"https?://|//cdn|<link|@import|url\(", html, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", html, re.I)
    assert html.count("<script") == 2  # the data and the inlined script


def test_a_token_cannot_close_the_data_script() -> None:
    tokenizer = WordTokenizer(["\n", "</script>", "a"])
    model = build(ModelConfig(vocab_size=3, layers=1, heads=1, dim=8, block_size=8))
    html = render_html(attention_view(model, tokenizer, [0, 1, 2], 3))
    assert embedded(html)["tokens"] == ["\\n", "</script>", "a"]


def test_no_token_can_comment_out_the_page_or_stand_for_its_title() -> None:
    """A browser reads "<!--" then "<script>" inside a script as the start of a comment the page's own script ends
    inside; and a token spelling the template's markers must stay a token."""
    tokenizer = WordTokenizer(["\n", "<!--", "<script>", "__TITLE__", "__HIDDEN__", "__VIEW_DATA__"])
    model = build(ModelConfig(vocab_size=6, layers=1, heads=1, dim=8, block_size=8))
    page = render_html(attention_view(model, tokenizer, [0, 1, 2, 3, 4, 5], 6))
    data = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data
    assert embedded(page)["tokens"] == ["\\n", "<!--", "<script>", "__TITLE__", "__HIDDEN__", "__VIEW_DATA__"]
    assert "<title>tinygpt: mha attention</title>" in page


def test_python_api_shows_what_complete_answers(tmp_path: Path) -> None:
    """With the text API's defaults (greedy, to the end of the line) the page holds the prompt and the answer;
    an untrained model's answer runs on, so the page keeps the last block_size tokens and counts the prompt's."""
    text_model = TextModel(build(make("mha")), TOKENIZER, LINES)
    view = write_attention_html(tmp_path / "view.html", text_model, "two plus three equals")
    tokens = ["\\n", "two", "plus", "three", "equals", *text_model.complete("two plus three equals").split()]
    assert len(tokens) > 12 and view["tokens"] == tokens[-12:]
    assert view["prompt_len"] == max(0, 5 - (len(tokens) - 12))


def test_a_vocabulary_padded_past_the_tokenizer_shows_only_ids_it_has(tmp_path: Path) -> None:
    """The viewer samples as the text API does: never a padding id (one ended it with an IndexError)."""
    model = build(ModelConfig(**{**make("mha").to_dict(), "vocab_size": 64, "tie_embeddings": False}))
    with torch.no_grad():
        model.head.weight[TOKENIZER.vocab_size:] *= 50  # the padding ids, likelier than any real one
    text_model = TextModel(model, TOKENIZER, LINES)
    view = write_attention_html(tmp_path / "view.html", text_model, "two plus", max_new_tokens=6, temperature=1.0)
    words = text_model.complete("two plus", 6, 1.0, seed=0).replace("\n", " \\n ").split()
    assert view["tokens"] == ["\\n", "two", "plus", *words]


def test_head_numbers_mean_what_they_say() -> None:
    T = 5
    previous = torch.eye(T).roll(-1, dims=1).tril()  # each query on the token before it (query 0 on itself)
    previous[0, 0] = 1.0
    first = torch.zeros(T, T)
    first[:, 0] = 1.0
    uniform = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    stats = head_stats(torch.stack([previous, first, uniform]))  # (H=3, T, T)
    # Query 1's previous token is the first token, so each of these heads gets a quarter of the other's credit.
    assert stats["previous"][:2] == [1.0, 0.25] and stats["first"][:2] == [0.25, 1.0]
    assert stats["entropy"][:2] == [0.0, 0.0]
    expected = sum(torch.log(torch.tensor(float(n))) for n in range(1, T + 1)) / T  # uniform over n keys: log n
    assert stats["entropy"][2] == pytest.approx(float(expected), rel=1e-5)


def test_induction_score_is_the_weight_on_the_token_after_the_earlier_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A head that attends exactly there scores 1; one attending to the previous token scores 0."""
    model = build(make("mha"))
    n = model.cfg.block_size // 2

    def perfect(idx: torch.Tensor) -> list[torch.Tensor]:
        T = idx.shape[1]
        assert T == 2 * n and torch.equal(idx[0, :n], idx[0, n:])  # the sequence, then itself again
        induction, previous = torch.zeros(T, T), torch.eye(T).roll(-1, dims=1)
        for i in range(n, T):
            induction[i, i - n + 1] = 1.0
        return [torch.stack([induction, previous]).unsqueeze(0)]  # one layer (1, H=2, T, T)

    monkeypatch.setattr(model, "attention_maps", perfect)
    assert induction_scores(model, TOKENIZER.vocab_size) == [[1.0, 0.0]]


def test_a_single_token_view_of_a_tiny_model_has_finite_numbers() -> None:
    model = build(ModelConfig(vocab_size=TOKENIZER.vocab_size, layers=1, heads=2, dim=16, block_size=3))
    view = attention_view(model, TOKENIZER, [NEWLINE], 1)
    assert embedded(render_html(view)) == view  # the page refuses NaN (json.dumps(allow_nan=False))
    assert view["weights"][0][0] == [[1.0]] and view["stats"]["previous"][0] == [0.0, 0.0]
    assert view["stats"]["induction"] == [[0.0, 0.0]]


def test_view_refuses_more_tokens_than_the_model_sees() -> None:
    with pytest.raises(ValueError, match="exceed block_size=12"):
        attention_view(build(make("mha")), TOKENIZER, [NEWLINE] * 13, 13)


@pytest.mark.parametrize("given", ["the GPT", "a path"])
def test_the_viewer_names_what_to_pass_for_a_model_that_is_not_a_text_model(given: str, tmp_path: Path) -> None:
    """A GPT built in Python (the notebook's way), or the model.pt's path, was "'GPT' object has no attribute
    'greedy'" from inside the viewer."""
    model = build(make("mha"))
    wrong = model if given == "the GPT" else str(tmp_path / "model.pt")
    with pytest.raises(ValueError, match=r"pass gpt\.load\(path\), or TextModel\(model, tokenizer, meta\)"):
        write_attention_html(tmp_path / "view.html", wrong, "two plus three equals")
    assert not (tmp_path / "view.html").exists()


def save(tmp_path: Path, cfg: ModelConfig) -> Path:
    path = tmp_path / "model.pt"
    save_model(path, build(cfg), TOKENIZER, meta=LINES)
    return path


def test_generate_writes_the_viewer_of_prompt_and_generated_tokens(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    ckpt, out = save(tmp_path, make("mha", kernel="sdpa")), tmp_path / "view.html"
    assert generate.main(["--ckpt", str(ckpt), "--prompt", "two plus three equals", "--max-new-tokens", "3",
                          "--attention-html", str(out)]) == 0
    view = embedded(out.read_text())
    expected = generate_ids(build(make("mha", kernel="sdpa")), torch.tensor([PROMPT]), 3, temperature=0)[0].tolist()
    assert view["tokens"] == [TOKENIZER.decode([i]).replace("\n", "\\n") for i in expected]
    assert "wrote" in capsys.readouterr().out
    assert generate.main(["--ckpt", str(ckpt), "--prompt", "two plus three equals", "--max-new-tokens", "30",
                          "--attention-html", str(out)]) == 0  # past block_size: the prompt's start drops out
    view = embedded(out.read_text())
    assert len(view["tokens"]) == 12 and view["left_out"] > 0  # block_size 12
    assert f"{view['prompt_len']} prompt, {12 - view['prompt_len']} generated; the {view['left_out']} before them " \
        "left out, past block_size)" in capsys.readouterr().out


def test_generate_refuses_more_than_one_sample_for_the_viewer(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # The page shows one generation: --num-samples 3 wrote one and said nothing of the other two.
    out = tmp_path / "view.html"
    assert generate.main(["--ckpt", str(save(tmp_path, make("mha"))), "--prompt", "two plus three equals",
                          "--temperature", "0.8", "--num-samples", "3", "--attention-html", str(out)]) == 2
    assert capsys.readouterr().err == "error: --num-samples=3: --attention-html shows the attention of one " \
                                      "generation; drop --num-samples, or vary --seed for another\n"
    assert not out.exists()


def test_generate_names_the_fix_for_an_unwritable_path(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "missing" / "view.html"
    assert generate.main(["--ckpt", str(save(tmp_path, make("mha"))), "--prompt", "two",
                          "--attention-html", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--attention-html" in err


def test_generate_says_a_folder_is_no_file_for_the_viewer(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A folder named like a page was "cannot write ... (Is a directory): pass --attention-html a path in an existing
    folder", a fix that was already so."""
    out = tmp_path / "view.html"
    out.mkdir()
    assert generate.main(["--ckpt", str(save(tmp_path, make("mha"))), "--prompt", "two",
                          "--attention-html", str(out)]) == 2
    assert capsys.readouterr().err == f"error: --attention-html {out} is a folder: name a file in it to write\n"


def test_generate_never_writes_the_viewer_over_a_file_of_another_kind(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    """`--attention-html <run>/model.pt` replaced the model it had just read with the page, and said "wrote"."""
    ckpt = save(tmp_path, make("mha"))
    saved = ckpt.read_bytes()
    assert generate.main(["--ckpt", str(ckpt), "--prompt", "two", "--attention-html", str(ckpt)]) == 2
    assert ckpt.read_bytes() == saved
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "end the name in .html" in err


CHROMIUM = Path("/usr/bin/chromium")  # Debian's package, which .ci/run installs; no browser is downloaded
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    """A page of a headless Chromium driven by Playwright, recording console errors, uncaught exceptions and any
    request that is not the page's own file (it must load nothing). Skipped without chromium, except in CI."""
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no {CHROMIUM} in CI: .ci/run installs Debian's chromium")
        pytest.skip(f"no {CHROMIUM}: apt-get install chromium (and pip install -e '.[test]' for playwright)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        BROWSERS.append(f"{CHROMIUM} (Chromium {browser.version})")
        page = browser.new_page()
        page.problems = []
        page.on("console", lambda m: page.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: page.problems.append(f"uncaught: {e}"))
        page.on("request", lambda r: None if r.url.startswith("file:") else page.problems.append(f"request: {r.url}"))
        yield page
        browser.close()


def test_a_headless_browser_renders_the_page_and_answers_the_reader(page: Any, tmp_path: Path) -> None:
    path = tmp_path / "view.html"
    view = write_attention_html(path, TextModel(build(make("sliding_window", "alibi")), TOKENIZER, LINES),
                                "two plus three equals", max_new_tokens=2)
    tokens, text = view["tokens"], lambda selector: page.text_content(selector)
    page.goto(f"{path.as_uri()}#layer=1&head=7")
    assert text("#title") == ("tinygpt attention viewer: attention=sliding_window, pos=alibi, 2 layers x 2 heads, "
                              "7 tokens (5 prompt, 2 generated)")
    assert page.locator(".cell").count() == 4 and page.get_attribute("#cell-1-1", "class") == "cell selected"
    assert text("#zoom-title").startswith("layer 1, head 1: ")  # head 7 of 2 is clamped to the last head

    box, margin, cell = page.locator("#zoom").bounding_box(), page.evaluate("margin"), page.evaluate("zoomCell")
    at = lambda i, j: (box["x"] + margin + (j + 0.5) * cell, box["y"] + margin + (i + 0.5) * cell)  # noqa: E731
    page.mouse.move(*at(5, 3))
    weight, bias = view["weights"][1][1][5][3], view["bias"][1][5][3]
    assert text("#readout") == f'query 5 "{tokens[5]}" -> key 3 "{tokens[3]}": weight {weight} (visible, score ' \
                               f"bias {bias})"
    page.mouse.move(*at(5, 0))  # outside the window of 3: masked
    assert text("#readout").endswith(f"weight 0 (masked, score bias {view['bias'][1][5][0]})")
    page.mouse.click(*at(2, 1))
    assert text("#row-title") == f'query 2 "{tokens[2]}": its weights over the keys (they sum to 1.000)'
    page.keyboard.press("ArrowDown")
    assert text("#row-title").startswith(f'query 3 "{tokens[3]}"')
    page.click("#tok-6")  # a generated token
    assert text("#row-title").startswith(f'query 6 "{tokens[6]}"') and "query" in page.get_attribute("#tok-6", "class")
    page.keyboard.press("ArrowDown")  # past the last query: stays
    assert text("#row-title").startswith("query 6 ")
    page.click("#cell-0-0")
    assert text("#zoom-title").startswith("layer 0, head 0: H ") and page.get_attribute("#cell-1-1", "class") == "cell"
    entropy = view["stats"]["entropy"][0][0]
    assert f"H {entropy:.3f}" in text("#zoom-title")
    assert page.problems == []


def test_the_numbers_marked_red_are_those_the_legend_names(page: Any, tmp_path: Path) -> None:
    """The legend said "Red: the highest of each number", yet no entropy was ever marked."""
    path = tmp_path / "view.html"
    view = write_attention_html(path, TextModel(build(make("mha")), TOKENIZER, LINES), "two plus three equals",
                                max_new_tokens=2)
    page.goto(path.as_uri())
    assert "Red: the lowest H (the most focused head) and the highest prev, first and ind" in \
        " ".join(page.text_content("#grid + .legend").split())
    labels = {"entropy": "H", "previous": "prev", "first": "first", "induction": "ind"}
    expected = []
    for name, label in labels.items():
        values = [v for layer in view["stats"][name] for v in layer]
        mark = min(values) if name == "entropy" else max(values)
        if (name == "entropy" and mark < max(values)) or (name != "entropy" and mark > 0):
            expected += [f"{label} {v:.3f}" for v in values if v == mark]
    assert any(text.startswith("H ") for text in expected)
    marked = page.eval_on_selector_all(".stats .best", "spans => spans.map(s => s.textContent)")
    assert sorted(marked) == sorted(expected)
    assert page.problems == []


@pytest.mark.parametrize("attention, shown, code", [
    ("gqa", "kv_heads key/value heads", ["kv_heads", "mha", "mqa"]),
    ("linear", "mha's projections, queries and keys narrowed (or widened) to features per head",
     ["mha", "features", "conv"]),
])
def test_the_notes_show_a_docstrings_markdown_code_as_code(attention: str, shown: str, code: list[str], page: Any,
                                                           tmp_path: Path) -> None:
    """The notes read `gqa` and `mqa` entries, `mha`'s projections: Markdown's backticks shown as they are written."""
    path = tmp_path / "view.html"
    view = write_attention_html(path, TextModel(build(make(attention)), TOKENIZER, LINES), "two plus three equals",
                                max_new_tokens=2)
    assert f"`{code[0]}`" in view["notes"]["attention"]  # the docstring keeps its Markdown for the docs it is in
    page.goto(path.as_uri())
    note = " ".join(page.text_content("#note-attention").split())
    assert "`" not in note and shown in note
    assert page.eval_on_selector_all("#note-attention code", "codes => codes.map(c => c.textContent)")[:3] == code
    assert "`" not in page.text_content("#note-pos") and page.problems == []


def test_the_bias_shading_spans_the_keys_a_query_can_see(page: Any, tmp_path: Path) -> None:
    """The shading was scaled to the last row's bias, hidden keys included: with a window of 3 over 7 tokens the key
    farthest back that a query sees was shaded a third of the way, and every visible cell looked alike."""
    path = tmp_path / "view.html"
    write_attention_html(path, TextModel(build(make("sliding_window", "alibi")), TOKENIZER, LINES),
                         "two plus three equals", max_new_tokens=2)
    page.goto(f"{path.as_uri()}#head=1")
    colour = lambda i, j: page.evaluate(  # noqa: E731
        f"Array.from(document.getElementById('mask').getContext('2d').getImageData("
        f"margin + ({j} + 0.5) * zoomCell, margin + ({i} + 0.5) * zoomCell, 1, 1).data.slice(0, 3))")
    query = 5
    assert colour(query, query) == [232, 238, 247]  # no bias on the query's own key
    assert colour(query, query - (WINDOW - 1)) == [192, 128, 47]  # the most negative bias it can see: darkest
    assert colour(query, 0) == [43, 43, 43]  # hidden
    assert page.problems == []


def cell_colours(page: Any, canvas: str, margin: str, cell: str) -> list[list[list[int]]]:
    """The RGB at the centre of every (query, key) cell of a canvas, margin and cell size being the page's."""
    return page.evaluate(f"""(() => {{
      const c = document.querySelector("{canvas}"), g = c.getContext("2d"), m = {margin}, s = {cell};
      return D.tokens.map((_, i) => D.tokens.map((_, j) =>
        Array.from(g.getImageData(m + (j + 0.5) * s, m + (i + 0.5) * s, 1, 1).data.slice(0, 3))));
    }})()""")


@pytest.mark.parametrize("attention", ["mha", "sliding_window"])
def test_weights_draw_hidden_keys_grey_apart_from_keys_given_no_weight(attention: str, page: Any,
                                                                       tmp_path: Path) -> None:
    """The zoomed panel and the grid drew a key the query may not see (a later one, or one past the window) in the
    colour of weight 0, so it looked like a key the query sees and ignores; the PNG's grey now marks it, as there."""
    view = attention_view(build(make(attention)), TOKENIZER, PROMPT, len(PROMPT))
    last = len(PROMPT) - 1
    for layer in view["weights"]:
        for head in layer:
            head[last][last] = 0.0  # a key the query sees and gives no weight
    path = tmp_path / "view.html"
    path.write_text(render_html(view), encoding="utf-8")
    page.goto(path.as_uri())
    allowed = torch.tensor(view["allowed"], dtype=torch.bool)
    assert not allowed.all()
    grey, zero = [round(255 * c) for c in to_rgb(HIDDEN)], page.evaluate("colour(0)")
    drawn = {"zoom": cell_colours(page, "#zoom", "margin", "zoomCell")} | {
        f"grid {layer}, {head}": cell_colours(page, f"#cell-{layer}-{head} canvas", "0",
                                             f"document.querySelector('#cell-{layer}-{head} canvas').width / T")
        for layer in range(view["layers"]) for head in range(view["heads"])}
    for panel, colours in drawn.items():
        hidden = torch.tensor([[rgb == grey for rgb in row] for row in colours])
        assert torch.equal(hidden, ~allowed), panel
        assert f"rgb({','.join(map(str, colours[last][last]))})" == zero, panel
    legend = " ".join(page.text_content("#zoom-column .legend").split())
    assert "hidden from the query (masked)" in legend
    swatches = page.eval_on_selector_all("#zoom-column .legend .sw",
                                         "s => s.map(e => getComputedStyle(e).backgroundColor)")
    assert f"rgb({', '.join(map(str, grey))})" in swatches
    page.evaluate(f"state.query = {last - 1}; render()")  # a query with a later key hidden from it, and visible ones
    chips = page.eval_on_selector_all("#row .tok", "c => c.map(e => getComputedStyle(e).backgroundColor)")
    assert [chip == f"rgb({', '.join(map(str, grey))})" for chip in chips] == [not a for a in view["allowed"][last - 1]]
    assert page.problems == []
