"""`python -m gpt cost` at a tiny shape: it prints its table, writes cost.json and cost.png, states each cache's
bytes from its tensors beside the variant's formula, and refuses a bad flag in one line."""
from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from matplotlib.image import imread

from gpt.__main__ import main
from gpt.cost import rounds
from gpt.cost.counterparts import hf_engines
from gpt.cost.tables import figure, table
from gpt.data.tokenizers.vocab import CharTokenizer
from gpt.inference.checkpoint import save_model
from gpt.inference.depth import Engine, GPTEngine, Measure
from tests.conftest import build
from tests.test_attention import make

TINY = ["--layers", "1", "--heads", "4", "--dim", "32", "--new-tokens", "3", "--repeats", "2"]
OWN = ["--kv-heads", "2", "--window", "16", "--latent", "8"]  # of gqa, sliding_window and mla; --latent fits --dim 32


pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_tiny_cost_run_writes_its_table_json_and_png(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["cost", *TINY, *OWN, "--depths", "0", "64", "--batch", "1", "2", "--hf", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cpu: " in out and "[80/80 " in out
    assert "| batch 2, depth 64 | prefill tok/s | x mha | x hf llama (4 kv heads) | decode tok/s |" in out
    rows = json.loads((tmp_path / "cost.json").read_text())["rows"]
    names = ["mha", "gqa", "mqa", "mla", "sliding_window", "linear", "hf llama (4 kv heads)",
             "hf llama (2 kv heads)", "hf llama (1 kv head)", "hf mistral (window 16)"]
    assert [r["name"] for r in rows if (r["batch"], r["depth"]) == (1, 64)] == names
    by = {(r["name"], r["batch"], r["depth"]): r for r in rows}
    for r in rows:
        assert r["decode_tokens_per_s"] > 0 and len(r["rounds"]) == 2
        if not r["name"].startswith("hf "):
            assert r["cache_bytes"] == r["formula_bytes"]  # from the tensors, as the variant's formula says
        assert (r["prefill_tokens_per_s"] is None) == (r["depth"] == 0)
    # 64 positions of 2 x 32 numbers in fp32; gqa keeps half the heads; the window keeps 16; linear's state is fixed
    assert by[("mha", 1, 64)]["cache_bytes"] == 64 * 2 * 32 * 4 == by[("hf llama (4 kv heads)", 1, 64)]["cache_bytes"]
    assert by[("gqa", 1, 64)]["cache_bytes"] * 2 == by[("mha", 1, 64)]["cache_bytes"]
    assert by[("sliding_window", 1, 64)]["cache_bytes"] == 16 * 2 * 32 * 4
    assert by[("linear", 1, 0)]["cache_bytes"] == by[("linear", 1, 64)]["cache_bytes"]
    image = imread(tmp_path / "cost.png")
    assert image.shape[:2] == (800, 1500) and image[..., :3].std() > 0  # 3 panels x 2 batches


def test_a_trained_model_is_measured_under_each_kernel(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    save_model(tmp_path / "model.pt", build(make("mla", block_size=16)), CharTokenizer(list("abc")))
    assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), "--kernel", "sdpa", "math", "--depths", "8",
                 "--batch", "1", "--new-tokens", "2", "--repeats", "1", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "cost.json").read_text())["rows"]
    assert [r["name"] for r in rows] == ["mla (sdpa)", "mla (math)"]
    assert main(["cost", *TINY, "--attention", "mha", "linear", "--kernel", "sdpa", "math", "--depths", "8",
                 "--batch", "1", "--out", str(tmp_path)]) == 0  # linear uses no kernel: one row, not two alike
    assert [r["name"] for r in json.loads((tmp_path / "cost.json").read_text())["rows"]] == \
        ["mha (sdpa)", "mha (math)", "linear"]
    assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), "--depths", "64", "--out", str(tmp_path)]) == 2
    assert "exceed the model's block_size=16" in capsys.readouterr().err
    assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), "--depths", "0", "--new-tokens", "16",
                 "--out", str(tmp_path)]) == 2  # a prompt at depth 0 is one token: 17 positions, not 16
    assert "--depths 0 + --new-tokens 16 need 17 positions (a prompt is at least one token), which exceed the " \
           "model's block_size=16: measure at smaller depths or fewer new tokens" in capsys.readouterr().err
    # A shape flag beside --ckpt measured the checkpoint's shape anyway, and cost.json recorded the flag as measured.
    assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), "--dim", "512", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "error: --dim with --ckpt: the checkpoint's own model is measured, at its " \
                                      "shape; drop --dim, or drop --ckpt to measure that shape with random weights\n"
    assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), "--attention", "mha", "--out", str(tmp_path)]) == 2
    assert "error: --attention with --ckpt" in capsys.readouterr().err
    # --kernel beside a trained linear model measured it as ever, cost.json recording the kernel as measured
    save_model(tmp_path / "linear.pt", build(make("linear", block_size=16)), CharTokenizer(list("abc")))
    assert main(["cost", "--ckpt", str(tmp_path / "linear.pt"), "--kernel", "math", "--depths", "8",
                 "--new-tokens", "2", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "error: --kernel math changes nothing for --ckpt's attention=linear, " \
                                      "which forms no softmax weights: drop --kernel\n"


@pytest.mark.parametrize("flags, message", [
    (["--depths", "-1"], "error: --depths -1: each must be 0 or more"),
    (["--attention", "mhq"], "error: --attention mhq is unknown; choose from: weightless"),
    (["--kernel", "flash"], "error: --kernel flash is unknown; choose from: math, sdpa"),
    (["--heads", "5"], "error: --heads 5 does not divide --dim 256: pick --heads from [1, 2, 4, 8, 16, 32, 64]"),
    (["--device", "gpu0"], "error: --device gpu0 is not a device; use cpu, or cuda on a GPU"),
    (["--device", "meta"], "error: --device meta: the cost command measures on cpu or cuda"),
    pytest.param(["--device", "cuda"], "error: --device cuda: this machine has no CUDA GPU; measure with --device cpu",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")),
])
def test_a_bad_flag_is_one_line(flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["cost", *flags, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


@pytest.mark.parametrize("flags, message", [
    (["--attention", "sliding_window", "--window", "0"],
     "error: --window 0 must be at least 1 (a position always sees itself): set --window\n"),
    (["--vocab", "0"], "error: --vocab 0 must be a positive integer\n"),
    (["--mlp", "foo"], "error: --mlp foo is unknown; choose one of: gelu, gelu_exact, relu2, swiglu\n"),
    (["--attention", "gqa", "--kv-heads", "3"], "error: --kv-heads 3 must divide --heads 8: pick --kv-heads from "
                                                "[1, 2, 4, 8]\n"),
    (["--dim", "32"], "error: --latent 64 and the rotary key of 2 cache 66 numbers a position, no fewer than the 64 of "
                      "every head's keys and values (2 x --dim 32): a latent that saves nothing; set --latent below "
                      "62, or drop mla from --attention\n"),
])
def test_a_shape_the_model_refuses_is_named_in_the_commands_flags(flags: list[str], message: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    # The model's refusals name train.py's settings (model.window, vocab_size=0, use attention=mha), which this
    # command has no flags for: a user could not act on them as written.
    assert main(["cost", *flags, "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == message


@pytest.mark.parametrize("measured, flag, value, reader", [
    (["mha"], "--kv-heads", "4", "gqa"), (["mha", "mqa"], "--window", "4", "sliding_window"),
    (["gqa"], "--latent", "16", "mla")])
def test_a_variants_own_flag_that_no_variant_measured_reads_is_refused(measured: list[str], flag: str, value: str,
                                                                        reader: str, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    # --attention mha --kv-heads 4 measured mha as if --kv-heads were not given, and cost.json recorded kv_heads 4.
    run = ["cost", *TINY, flag, value, "--depths", "4", "--batch", "1", "--repeats", "1", "--out", str(tmp_path)]
    assert main([*run, "--attention", *measured]) == 2
    assert capsys.readouterr().err == f"error: {flag} {value} changes nothing under --attention " \
        f"{' '.join(measured)}, which does not read it: drop {flag}, or add {reader} to --attention\n"
    assert not (tmp_path / "cost.json").exists()
    assert main([*run, "--attention", *measured, reader]) == 0  # measured beside a variant that reads it


@pytest.mark.parametrize("measured", [["linear"], ["linear", "torch_mha"]])
def test_a_kernel_that_no_variant_measured_reads_is_refused(measured: list[str], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    # --attention linear --kernel math measured linear attention as under sdpa (it forms no softmax weights), named
    # the row plain `linear`, and cost.json recorded kernel math; train.py refuses the same setting as changing nothing.
    run = ["cost", *TINY, "--kernel", "math", "--depths", "4", "--batch", "1", "--repeats", "1", "--out", str(tmp_path)]
    assert main([*run, "--attention", *measured]) == 2
    assert capsys.readouterr().err == f"error: --kernel math changes nothing under --attention {' '.join(measured)}, " \
        "which forms no softmax weights: drop --kernel, or add a variant that does (mha) to --attention\n"
    assert not (tmp_path / "cost.json").exists()
    assert main([*run, "--attention", *measured, "mha"]) == 0  # measured beside a variant that reads it


@pytest.mark.parametrize("flags, message", [
    (["--pos", "rop"], "error: --pos rop is unknown; choose from: "),
    (["--dim", "40", "--heads", "8"], "error: --pos rope rotates feature pairs, so it needs an even width; "
                                      "--attention mha rotates dim/heads=5: change --dim or --heads"),
])
def test_a_pos_no_row_can_take_is_refused(flags: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    # Falling back to learned positions is for a variant that cannot take --pos (torch_mha with RoPE); a --pos that
    # is unknown, or that the shape cannot take, was measured with learned positions in every row, unsaid.
    assert main(["cost", *TINY, *flags, "--attention", "mha", "--depths", "4", "--batch", "1", "--repeats", "1",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / "cost.json").exists()


def test_the_positions_each_row_was_measured_with_are_printed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # A variant that cannot take --pos falls back to learned positions: --attention linear --pos alibi measured
    # learned ones in every row, and nothing printed said so.
    assert main(["cost", *TINY, "--attention", "mha", "linear", "--pos", "alibi", "--depths", "4", "--batch", "1",
                 "--repeats", "1", "--out", str(tmp_path)]) == 0
    assert "mlp=swiglu, pos=alibi (learned: linear), kernel=sdpa, vocab 256;" in capsys.readouterr().out
    assert main(["cost", *TINY, "--attention", "mha", "--depths", "4", "--batch", "1", "--repeats", "1",
                 "--out", str(tmp_path)]) == 0
    assert "mlp=swiglu, pos=rope, kernel=sdpa, vocab 256;" in capsys.readouterr().out


def test_the_kernel_the_rows_were_measured_with_is_printed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # A model.pt trained with model.kernel=math is measured under --kernel (sdpa unless given), and nothing printed
    # said which kernel computed the figures.
    save_model(tmp_path / "model.pt", build(make("mha", block_size=16, kernel="math")), CharTokenizer(list("abc")))
    for flags, said in (([], "kernel=sdpa, "), (["--kernel", "math"], "kernel=math, "),
                        (["--kernel", "sdpa", "math"], "kernel=sdpa and math, ")):
        assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), *flags, "--depths", "4", "--batch", "1",
                     "--new-tokens", "2", "--repeats", "1", "--out", str(tmp_path)]) == 0
        assert f", pos=rope, {said}vocab 37;" in capsys.readouterr().out
    assert main(["cost", *TINY, "--attention", "linear", "--depths", "4", "--batch", "1", "--repeats", "1",
                 "--out", str(tmp_path)]) == 0  # linear attention forms no softmax weights for a kernel to compute
    assert "pos=rope, vocab 256;" in capsys.readouterr().out


def test_the_plot_is_titled_with_the_settings_it_was_measured_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture) -> None:
    # cost.png was titled with the machine alone: a bf16 run's plot and an fp32 one's, or two shapes', read the same.
    from gpt.cost import command

    titles: list[str] = []

    def titled(rows: list[dict], title: str) -> object:
        made = figure(rows, title)
        titles.append(made.get_suptitle())
        return made

    monkeypatch.setattr(command, "figure", titled)
    assert main(["cost", *TINY, "--attention", "gqa", "--dtype", "bfloat16", "--depths", "4", "--batch", "1",
                 "--repeats", "1", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    machine, settings = next((line, after) for line, after in zip(printed, printed[1:]) if line.startswith("cpu: "))
    assert titles == [f"{machine}\n{settings}"] and "bfloat16; 1 layers x 4 heads x 32 dims" in settings


def test_the_default_out_folder_is_left_out_of_git() -> None:
    # `python -m gpt cost` in a clone, as the docs run it, left cost/cost.json and cost/cost.png untracked.
    from gpt.cost.command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ignored = (Path(__file__).parents[1] / ".gitignore").read_text().splitlines()
    assert f"/{parser.get_default('out')}/" in ignored  # rooted: gpt/cost/ is the command's own package


def test_an_out_that_cannot_be_a_folder_is_one_line_before_measuring(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    # --out names a folder; given the path of a file (cost.png of an earlier run), mkdir raised a traceback.
    (tmp_path / "cost.png").touch()
    assert main(["cost", *TINY, "--attention", "mha", "--depths", "4", "--batch", "1", "--repeats", "1",
                 "--out", str(tmp_path / "cost.png")]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"error: --out {tmp_path / 'cost.png'}: cannot make that folder") and \
        err.count("\n") == 1, err
    assert "batch 1 depth 4" not in out  # refused before any measuring


@pytest.mark.parametrize("flags, message", [
    (["--attention", "mha", "gqa", "mha"], "error: --attention mha gqa mha: mha is named twice; name each once"),
    (["--kernel", "sdpa", "sdpa"], "error: --kernel sdpa sdpa: sdpa is named twice; name each once"),
    (["--depths", "4", "4"], "error: --depths 4 4: 4 is named twice; name each once"),
    (["--batch", "1", "1"], "error: --batch 1 1: 1 is named twice; name each once"),
])
def test_a_value_named_twice_is_refused(flags: list[str], message: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    # Rows are keyed by name and tables by batch and depth, so a value named twice printed repeated rows, each the
    # median of every copy's rounds together.
    small = {"--attention": ["mha"], "--kernel": ["sdpa"], "--depths": ["4"], "--batch": ["1"]}
    small[flags[0]] = flags[1:]
    assert main(["cost", *TINY, *(a for flag, values in small.items() for a in (flag, *values)), "--repeats", "1",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


@pytest.mark.parametrize("flags, message", [
    (["--mlp", "gelu"], "error: --hf: no Hugging Face model computes mha with these parts (llama needs mlp=swiglu "
                        "(this model has gelu)"),
    (["--pos", "alibi"], "error: --hf: no Hugging Face model computes mha with these parts (llama needs pos=rope "
                         "(this model has alibi)"),
    (["--attention", "mla", "linear", "--latent", "8"], "error: --hf: no Hugging Face model computes mla, linear "
                                                        "(gpt2: mha_fused; llama: mha, gqa, mqa;"),
])
def test_hf_without_a_counterpart_of_the_same_parts_is_refused(flags: list[str], message: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    # Hugging Face's rows were Llama's whatever the measured parts, so a gelu or ALiBi model was compared with a
    # SwiGLU RoPE one, unsaid.
    assert main(["cost", *TINY, "--attention", "mha", *flags, "--depths", "4", "--batch", "1", "--repeats", "1",
                 "--hf", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_hf_without_a_counterpart_of_a_trained_models_parts_names_the_one_fix(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture) -> None:
    """It said to measure with other parts, which a model.pt's are not to change."""
    save_model(tmp_path / "model.pt", build(make("mha", mlp="gelu", block_size=16)), CharTokenizer(list("abc")))
    assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), "--depths", "4", "--batch", "1", "--new-tokens", "2",
                 "--repeats", "1", "--hf", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith("(this model has false)): leave out --hf (a trained model's parts are "
                                            "its own)\n")


def test_hf_without_a_family_for_a_trained_models_attention_names_the_one_fix(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture) -> None:
    """It said to measure one of the variants Hugging Face computes too, which --attention beside --ckpt refuses."""
    save_model(tmp_path / "model.pt", build(make("mla", block_size=16)), CharTokenizer(list("abc")))
    assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), "--depths", "4", "--batch", "1", "--new-tokens", "2",
                 "--repeats", "1", "--hf", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --hf: no Hugging Face model computes mla (gpt2: ") and err.count("\n") == 1
    assert err.endswith("): leave out --hf (a trained model's attention is its own)\n")


def test_hf_rows_are_the_measured_models_in_hugging_faces_code(tmp_path: Path) -> None:
    # A GPT-2 model.pt is measured beside Hugging Face's GPT-2; each counterpart has its model's parameters.
    gpt2 = make("mha_fused", pos="learned", mlp="gelu", norm="layernorm", bias=True, block_size=16)
    save_model(tmp_path / "model.pt", build(gpt2), CharTokenizer(list("abc")))
    assert main(["cost", "--ckpt", str(tmp_path / "model.pt"), "--depths", "8", "--batch", "1", "--new-tokens", "2",
                 "--repeats", "1", "--hf", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "cost.json").read_text())["rows"]
    assert [r["name"] for r in rows] == ["mha_fused", "hf gpt2"]
    assert rows[0]["cache_bytes"] == rows[1]["cache_bytes"]
    llama = dict(mlp="swiglu", norm="rmsnorm")
    models = [build(gpt2), build(make("gqa", rope_base=500.0, **llama)), build(make("sliding_window", **llama))]
    for model, engine in zip(models, hf_engines(models, "cpu", torch.float32)):
        assert sum(p.numel() for p in engine.model.parameters()) == sum(p.numel() for p in model.parameters())
    assert hf_engines(models[1:2], "cpu", torch.float32)[0].model.config.rope_parameters["rope_theta"] == 500.0


def test_a_rows_cache_is_what_its_depths_prompt_holds(tmp_path: Path) -> None:
    """The cache figure of a row is the cache of its depth's prompt (one token at depth 0), for tinygpt and Hugging
    Face alike: it was measured after the decoded tokens, whose entries made a depth-0 row hold new_tokens + 1
    positions."""
    assert main(["cost", *TINY, "--attention", "mha", "gqa", "--kv-heads", "2", "--depths", "0", "8", "--batch", "2",
                 "--hf", "--out", str(tmp_path)]) == 0
    kv_heads = {"mha": 4, "gqa": 2, "hf llama (4 kv heads)": 4, "hf llama (2 kv heads)": 2}
    head_dim, layers, batch, fp32 = 32 // 4, 1, 2, 4
    rows = json.loads((tmp_path / "cost.json").read_text())["rows"]
    assert {(r["name"], r["depth"]) for r in rows} == {(name, depth) for name in kv_heads for depth in (0, 8)}
    for r in rows:
        positions = max(r["depth"], 1)  # a prompt is at least one token
        expected = layers * batch * kv_heads[r["name"]] * head_dim * positions * 2 * fp32
        assert r["cache_bytes"] == expected, r["name"]
        assert r["formula_bytes"] == (None if r["name"].startswith("hf ") else expected)


def test_depth_zero_alone_is_measured(tmp_path: Path) -> None:
    """A prompt at depth 0 is one token: the model's block was sized one short when 0 was the only depth."""
    assert main(["cost", *TINY, "--attention", "mha", "--depths", "0", "--batch", "1", "--repeats", "1",
                 "--out", str(tmp_path)]) == 0
    assert [r["depth"] for r in json.loads((tmp_path / "cost.json").read_text())["rows"]] == [0]


def test_no_timed_round_holds_an_engines_first_call_at_a_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    # An engine's first call pays one-time start-up costs: with --repeats 1 the first engine's prefill showed 6,105
    # tokens/s against 101,066 for the next, the same computation.
    calls: list[tuple[str, int, int]] = []

    def counted(engine: Engine, batch: int, depth: int, new_tokens: int, vocab_size: int,
                device: torch.device) -> Measure:
        calls.append((engine.name, batch, depth))
        return Measure(len(calls), 1.0, 0.0, 0.0, 0, 0)  # prefill_s: which call this was, counted from 1

    engines = [Engine(), Engine()]
    engines[0].name, engines[1].name = "a", "b"
    engines[0].model = engines[1].model = torch.nn.Module()
    monkeypatch.setattr(rounds, "measure", counted)
    args = argparse.Namespace(batch=[1, 2], depths=[0, 8], repeats=2, new_tokens=3, device="cpu")
    rows = rounds.run_rounds(engines, args, vocab_size=5)
    for row in rows:
        shape = (row["name"], row["batch"], row["depth"])
        first = calls.index(shape) + 1
        timed = [r["prefill_s"] for r in row["rounds"]]
        assert len(timed) == 2 and first not in timed and all(calls[t - 1] == shape for t in timed)


def test_an_engine_out_of_memory_is_a_row_saying_so_and_the_rest_are_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hugging Face's Mistral builds its whole mask: at 8 x 64k it peaked at 71.5 GiB on an H200, ran out on an H100, and
    # its OutOfMemoryError ended the run with every other row's figures unwritten.
    calls: list[tuple[str, int]] = []

    def short_of_memory(engine: Engine, batch: int, depth: int, new_tokens: int, vocab_size: int,
                        device: torch.device) -> Measure:
        calls.append((engine.name, depth))
        if engine.name == "big" and depth == 8:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 70.00 GiB")
        if engine.name == "cpu" and depth == 8:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 2 bytes")
        return Measure(1.0, 2.0, 0.0, 0.0, 0, 16)

    engines = [Engine(), Engine(), Engine()]
    for engine, name in zip(engines, ["small", "big", "cpu"]):
        engine.name, engine.model = name, torch.nn.Module()
    monkeypatch.setattr(rounds, "measure", short_of_memory)
    args = argparse.Namespace(batch=[1], depths=[0, 8], repeats=3, new_tokens=3, device="cpu")
    by = {(r["name"], r["depth"]): r for r in rounds.run_rounds(engines, args, vocab_size=5)}
    assert calls.count(("big", 8)) == 1 and calls.count(("small", 8)) == 4  # not tried again once out of memory
    for name in ("big", "cpu"):
        assert by[(name, 8)]["out_of_memory"] and by[(name, 8)]["decode_tokens_per_s"] is None
        assert not by[(name, 0)]["out_of_memory"] and by[(name, 0)]["decode_tokens_per_s"] == 1.5
    assert by[("small", 8)]["decode_x"] == {"small": 1.0} and by[("big", 8)]["decode_x"] == {"small": None}
    shown = table(list(by.values()))
    assert "| big | out of memory | — |" in shown and "| small | 8 | 1.00 | 1.5 | 1.00 |" in shown
    titles = [ax.get_title() for ax in figure(list(by.values()), "cpu: test").axes]
    assert all(t.endswith("out of memory: big at 8; cpu at 8") for t in titles)  # a short line would read unmeasured

    def other_error(*args: object) -> Measure:
        raise RuntimeError("shapes cannot be multiplied")

    monkeypatch.setattr(rounds, "measure", other_error)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):  # only running out of memory becomes a row
        rounds.run_rounds(engines, args, vocab_size=5)


def rows_with_one_short_in_round_two(monkeypatch: pytest.MonkeyPatch, names: list[str],
                                     short: str) -> list[dict[str, Any]]:
    """run_rounds' rows for engines `names` (the first the reference), 3 rounds, the engine `short` out of memory in
    its second round."""
    tries = dict.fromkeys(names, 0)

    def later_short(engine: Engine, batch: int, depth: int, new_tokens: int, vocab_size: int,
                    device: torch.device) -> Measure:
        tries[engine.name] += 1
        if engine.name == short and tries[short] == 3:  # the untimed call, round 1, then round 2
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 2 bytes")
        return Measure(1.0, 2.0, 0.0, 0.0, 0, 16)

    engines = [Engine() for _ in names]
    for engine, name in zip(engines, names):
        engine.name, engine.model = name, torch.nn.Module()
    monkeypatch.setattr(rounds, "measure", later_short)
    args = argparse.Namespace(batch=[1], depths=[8], repeats=3, new_tokens=3, device="cpu")
    return rounds.run_rounds(engines, args, vocab_size=5)


def test_an_engine_out_of_memory_in_a_later_round_is_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of memory in its second round, a row read out_of_memory false with medians of the rounds that fitted, as
    if the shape fitted; only the progress line said otherwise."""
    small, big = rows_with_one_short_in_round_two(monkeypatch, ["small", "big"], short="big")
    assert big["out_of_memory"] and big["decode_tokens_per_s"] is None and len(big["rounds"]) == 1
    assert not small["out_of_memory"] and small["decode_x"] == {"small": 1.0} and len(small["rounds"]) == 3
    assert "| big | out of memory |" in table([small, big])


def test_a_reference_out_of_memory_in_a_later_round_gives_no_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first row out of memory in its second round read "out of memory" while the row below it read x 1.00
    against it, a ratio from the one round it fitted."""
    ref, other = rows_with_one_short_in_round_two(monkeypatch, ["ref", "other"], short="ref")
    assert ref["out_of_memory"] and not other["out_of_memory"]
    assert other["decode_x"] == {"ref": None} and other["prefill_x"] == {"ref": None}
    assert "| other | 8 | — | 1.5 | — |" in table([ref, other])


def test_the_plot_keys_every_engine_when_a_batch_ran_out_of_memory_everywhere() -> None:
    # `--batch 1000000 1`: the first batch out of memory at every depth left its panels empty, the legend went on one
    # of them (none drawn, a matplotlib warning printed), and the batch 1 panels' lines had no key; an engine skipped
    # in one batch also shifted the colours of the next ones, so one colour named two engines across the rows.
    def row(name: str, batch: int, oom: bool) -> dict:
        value = None if oom else 1.0
        return {"name": name, "batch": batch, "depth": 8, "out_of_memory": oom, "decode_ms_per_token": value,
                "cache_mib": value, "prefill_tokens_per_s": value}

    rows = [row("mha", 64, True), row("gqa", 64, True), row("mha", 8, True), row("gqa", 8, False),
            row("mha", 1, False), row("gqa", 1, False)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "No artists with labels found to put in legend"
        fig = figure(rows, "cpu: test")
    keys = [text.get_text() for ax in fig.axes if ax.get_legend() for text in ax.get_legend().get_texts()]
    assert keys == ["mha", "gqa"]
    colours = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            assert colours.setdefault(line.get_label(), line.get_color()) == line.get_color()


def test_every_engine_in_the_plot_is_drawn_unlike_the_others() -> None:
    """`--kernel sdpa math` measures 11 engines: the colours ran out at 10, and linear was drawn as mha (sdpa) was,
    blue, solid, round markers, in every panel and twice in the key."""
    names = [f"e{i}" for i in range(12)] + ["hf a", "hf b"]
    rows = [{"name": name, "batch": 1, "depth": depth, "out_of_memory": False, "decode_ms_per_token": 1.0 + i,
             "cache_mib": 0.5, "prefill_tokens_per_s": 2.0} for i, name in enumerate(names) for depth in (8, 64)]
    for ax in figure(rows, "cpu: test").axes:
        styles = [(line.get_color(), line.get_marker(), line.get_linestyle()) for line in ax.get_lines()]
        assert len(styles) == len(names) and len(set(styles)) == len(names)


def test_a_line_runs_through_the_depths_in_order_whatever_order_they_were_given() -> None:
    """`--depths 1024 16 256` drew each line from 1,024 back to 16 and on to 256: a triangle in the cache panel, as
    if 16 tokens had been measured twice."""
    rows = [{"name": "mha", "batch": 1, "depth": depth, "out_of_memory": False, "decode_ms_per_token": depth / 8,
             "cache_mib": depth / 16, "prefill_tokens_per_s": float(depth)} for depth in (1024, 16, 256)]
    for ax in figure(rows, "cpu: test").axes:
        (line,) = ax.get_lines()
        assert list(line.get_xdata()) == [16, 256, 1024]


def test_a_prefill_panel_of_depth_0_alone_says_why_it_is_empty() -> None:
    """`--depths 0`: a prompt of one token is no prefill to time, so the table shows — and its panel stood empty
    (axes 0 to 1) with nothing saying why."""
    rows = [{"name": name, "batch": 1, "depth": 0, "out_of_memory": False, "decode_ms_per_token": 1.0,
             "cache_mib": 0.5, "prefill_tokens_per_s": None} for name in ("mha", "gqa")]
    decode, cache, prefill = figure(rows, "cpu: test").axes
    assert [t.get_text() for t in prefill.texts] == ["prefill is not measured at depth 0: give --depths above 0"]
    assert not decode.texts and not cache.texts


def test_a_row_reads_its_rounds_as_rates_per_token_and_ratios_against_each_reference() -> None:
    """Batch 2, depth 8, 3 new tokens; the engine's rounds take 2 s and 4 s to prefill and 6 s and 12 s to decode, the
    reference's half as long: x is the reference's time over this engine's (0.5, slower), ms/token is a step's time
    whatever the batch, tokens/s counts every row of it."""
    engine = Engine()
    engine.name, engine.model = "slow", torch.nn.Module()
    runs = [Measure(2.0, 6.0, 0.0, 0.0, 2 * 2**20, 64), Measure(4.0, 12.0, 0.0, 0.0, 4 * 2**20, 64)]
    reference = [Measure(1.0, 3.0, 0.0, 0.0, 0, 64), Measure(2.0, 6.0, 0.0, 0.0, 0, 64)]
    row = rounds.summarise(engine, runs, {"fast": reference}, batch=2, depth=8, new_tokens=3)
    assert row["prefill_x"] == {"fast": 0.5} and row["decode_x"] == {"fast": 0.5}
    assert row["prefill_tokens_per_s"] == 2 * 8 / 3.0 and row["decode_tokens_per_s"] == 2 * 3 / 9.0
    assert row["decode_ms_per_token"] == 1000 * 9.0 / 3 and row["prefill_peak_mib"] == 3.0


class Echo(Engine):
    """An engine whose prompt and step do no work: a row's peak is what the engine holds."""

    def __init__(self, name: str, model: torch.nn.Module) -> None:
        self.name, self.model = name, model

    def prefill(self, prompt: torch.Tensor, max_len: int) -> tuple[None, torch.Tensor]:
        return None, prompt[:, -1:]

    def step(self, token: torch.Tensor, cache: None) -> torch.Tensor:
        return token


ONE_ROUND = argparse.Namespace(batch=[1], depths=[8], repeats=1, new_tokens=2, device="cpu")


def peak_alone_and_beside(others: Callable[[], list[Engine]]) -> tuple[float, float]:
    """A small mha's prefill peak MiB measured alone, and then measured last beside the engines `others` makes (after
    the first measure, which would otherwise hold their memory as the process's)."""
    small = GPTEngine("mha", build(make("mha", block_size=16)))
    alone = rounds.run_rounds([small], ONE_ROUND, vocab_size=5)[0]["prefill_peak_mib"]
    return alone, rounds.run_rounds([*others(), small], ONE_ROUND, vocab_size=5)[-1]["prefill_peak_mib"]


def test_a_rows_peak_memory_holds_its_own_weights_not_the_other_rows() -> None:
    # Every engine stays in memory while one is measured: mha's peak at 512 dims read 301 MiB measured alone and
    # 529 MiB beside the other 5 variants, whose weights it held.
    made: list[Engine] = []

    def weights() -> list[Engine]:  # 256 MiB, touched so that they are resident
        made.append(Echo("weights", torch.nn.Linear(2 ** 13, 2 ** 13)))
        made[0].model.weight.data.fill_(1.0)
        return made

    alone, beside = peak_alone_and_beside(weights)
    assert abs(beside - alone) < 32, (alone, beside)
    assert rounds.run_rounds(made, ONE_ROUND, vocab_size=5)[0]["prefill_peak_mib"] >= 256  # its own it holds


def test_a_rows_peak_memory_leaves_out_what_the_other_engines_prompts_left_them_holding() -> None:
    # tinygpt's RoPE engines keep their angle tables after a prompt, outside their weights: on an H200 mha's 64k
    # prefill read 713 MiB measured before the other engines' prompts and 857 after them.
    class Keeps(Echo):  # no weights; its prompt leaves it holding 256 MiB, as a table grown for a long prompt
        def prefill(self, prompt: torch.Tensor, max_len: int) -> tuple[None, torch.Tensor]:
            self.model._tables = {"angles": (torch.ones(2 ** 25), torch.ones(2 ** 25))}
            return super().prefill(prompt, max_len)

    alone, after = peak_alone_and_beside(lambda: [Keeps("keeps", torch.nn.Module())])
    assert abs(after - alone) < 32, (alone, after)


def test_what_a_model_holds_counts_the_rope_tables_its_prompts_grew() -> None:
    model = build(make("mha", pos="rope", block_size=512, dim=32, heads=2))
    weights = rounds.held_bytes(model)
    with torch.inference_mode():
        model(torch.zeros(1, 300, dtype=torch.long))
    positions = 2 * 300  # the tables are built for twice the prompt, for the decode steps after it
    assert rounds.held_bytes(model) - weights == 2 * positions * (32 // 2) * 4  # cos and sin, head width 16, fp32


def test_the_hf_help_names_every_family_and_the_variants_it_computes() -> None:
    """--hf's help named Llama's and Mistral's variants alone, while its refusal named GPT-2's and Qwen3's too."""
    from gpt.cost.command import add_arguments
    from gpt.hf import FAMILIES

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    help_text = " ".join(next(a.help for a in parser._actions if "--hf" in a.option_strings).split())
    for name, family in FAMILIES.items():
        assert f"{name}: {', '.join(family.parts['attention'])}" in help_text
