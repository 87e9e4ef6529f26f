"""On CUDA: `model.kernel=sdpa` runs in FlashAttention itself (not a fallback kernel) and matches the written-out
maths; cached decoding chooses the uncached tokens there too, through either kernel. Skipped without CUDA (CI has
none)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpt import GPT, ModelConfig, generate
from gpt.__main__ import main

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def pair() -> tuple[GPT, GPT]:
    """`mha` GPTs on the GPU with identical weights, one through each kernel."""
    cfg = dict(vocab_size=97, layers=2, heads=4, dim=128, block_size=64, pos="rope")
    torch.manual_seed(0)
    reference = GPT(ModelConfig(attention="mha", kernel="math", **cfg)).cuda()
    fused = GPT(ModelConfig(attention="mha", kernel="sdpa", **cfg)).cuda()
    fused.load_state_dict(reference.state_dict())
    return reference, fused


def test_the_sdpa_kernel_trains_inside_flash_attention_and_matches_the_math_kernel() -> None:
    reference, fused = pair()
    idx = torch.randint(0, 97, (8, 64), device="cuda")
    targets = torch.randint(0, 97, (8, 64), device="cuda")
    # Only FlashAttention is allowed: were our call not one it accepts, torch would raise, not fall back.
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(fused(idx).flatten(0, 1).float(), targets.flatten())
        loss.backward()
    expected = F.cross_entropy(reference(idx).flatten(0, 1), targets.flatten())  # fp32, written-out maths
    # bf16 keeps 8 significant bits: a per-token loss near ln(97) = 4.6 agrees to about 1e-2.
    assert abs(loss.item() - expected.item()) < 2e-2
    assert all(torch.isfinite(p.grad).all() for p in fused.parameters())


@pytest.mark.parametrize("kernel", ["math", "sdpa"])
@pytest.mark.parametrize("attention", ["mha", "gqa", "mla", "sliding_window", "linear"])
def test_cached_greedy_decoding_on_cuda_matches_uncached(attention: str, kernel: str) -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=97, layers=2, heads=4, dim=64, block_size=32, attention=attention, pos="rope",
                      kernel=kernel)
    model = GPT(cfg).cuda().eval()
    prompt = torch.randint(0, 97, (3, 5), device="cuda")
    cached = generate(model, prompt, 60, temperature=0, use_cache=True)  # past block_size: the window slides
    uncached = generate(model, prompt, 60, temperature=0, use_cache=False)
    assert torch.equal(cached, uncached)


def test_the_cost_command_measures_on_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["cost", "--device", "cuda", "--dtype", "bfloat16", "--layers", "1", "--heads", "4", "--dim", "64",
                 "--kv-heads", "2", "--window", "16", "--latent", "16", "--depths", "0", "64", "--batch", "2",
                 "--new-tokens", "3", "--repeats", "2", "--out", str(tmp_path)]) == 0
    assert f"gpu: {torch.cuda.get_device_name()}" in capsys.readouterr().out
    rows = json.loads((tmp_path / "cost.json").read_text())["rows"]
    by = {(r["name"], r["depth"]): r for r in rows}
    for r in rows:  # the cache lives on the GPU in bf16, as many bytes as the variant's formula says
        assert r["cache_bytes"] == r["formula_bytes"] and r["decode_tokens_per_s"] > 0
        assert r["prefill_peak_mib"] * 2 ** 20 >= r["cache_bytes"]  # allocated on the GPU, the cache included
    assert by[("mha", 64)]["cache_bytes"] == 2 * 64 * 2 * 64 * 2  # batch x positions x (k, v) x dim x 2 bytes


def test_a_long_prompt_through_the_window_batches_its_chunks_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA a prompt of many windows goes to the kernel as chunks batched into one call (not block by block),
    with what the blocks give, for both kernels."""
    from gpt.model.attention.sparse import SlidingWindowAttention

    batched = SlidingWindowAttention.chunks_at_once
    for kernel in ("math", "sdpa"):
        torch.manual_seed(0)
        cfg = ModelConfig(vocab_size=97, layers=2, heads=4, dim=64, block_size=1024, attention="sliding_window",
                          window=128, pos="rope", kernel=kernel)
        model = GPT(cfg).cuda().eval()
        idx = torch.randint(0, 97, (2, 1000), device="cuda")
        calls = []
        monkeypatch.setattr(SlidingWindowAttention, "chunks_at_once",
                            lambda self, q, c: calls.append(batched(self, q, c)) or calls[-1])
        chunked = model(idx)
        assert calls and all(calls)
        monkeypatch.setattr(SlidingWindowAttention, "chunks_at_once", lambda self, q, c: False)
        torch.testing.assert_close(chunked, model(idx), rtol=1e-4, atol=1e-4)


def test_the_cost_command_refuses_a_gpu_this_machine_lacks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    missing = torch.cuda.device_count()
    assert main(["cost", "--device", f"cuda:{missing}", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: --device cuda:{missing}: this machine has {missing} GPU(s)")
