"""Precision, compile and gradient accumulation: k micro-batches give the gradients of one batch k times
larger; bf16-mixed trains on CPU; a compiled model's checkpoints load uncompiled; GPU runs where CUDA is."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from lightning.pytorch.strategies import FSDPStrategy
from torch.utils.data import DataLoader

from gpt import ModelConfig, load_checkpoint
from gpt.data.batches import IGNORE_INDEX
from gpt.data.tokenizers.vocab import WordTokenizer
from gpt.inference.checkpoint import save_model
from gpt.training.lit import LitGPT
from tests.conftest import run_cli


def batches(count: int, rows: int, cfg: ModelConfig, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Random batches whose every row counts the same number of targets (the last two ignored)."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        inputs = torch.randint(0, cfg.vocab_size, (rows, 12), generator=generator)
        targets = torch.randint(0, cfg.vocab_size, (rows, 12), generator=generator)
        targets[:, -2:] = IGNORE_INDEX
        out.append((inputs, targets))
    return out


class GradsAtStep(L.Callback):
    """The summed-up gradients just before the first optimizer step (before clipping)."""

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: object) -> None:
        if trainer.global_step == 0:
            self.grads = {n: p.grad.clone() for n, p in pl_module.named_parameters()}


def first_step_grads(data: list, accumulate: int, cfg: ModelConfig, precision: str = "32-true") -> tuple:
    torch.manual_seed(0)
    lit, grads = LitGPT(cfg, warmup_steps=1, max_steps=1), GradsAtStep()
    trainer = L.Trainer(accelerator="cpu", max_steps=1, accumulate_grad_batches=accumulate, precision=precision,
                        callbacks=[grads], logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(lit, train_dataloaders=DataLoader(data, batch_size=None))
    return grads.grads, lit


@pytest.mark.parametrize("k", [2, 4])
def test_k_micro_batches_give_the_gradients_of_one_k_times_larger(tiny_cfg: ModelConfig, k: int) -> None:
    micro = batches(k, 3, tiny_cfg)
    large = [(torch.cat([b[0] for b in micro]), torch.cat([b[1] for b in micro]))]
    accumulated, _ = first_step_grads(micro, k, tiny_cfg)
    single, _ = first_step_grads(large, 1, tiny_cfg)
    assert accumulated.keys() == single.keys()
    for name in single:  # equal in exact arithmetic; float32 sums in another order differ in the last bits
        torch.testing.assert_close(accumulated[name], single[name], rtol=1e-5, atol=1e-7, msg=name)


def test_micro_batches_counting_different_targets_give_the_gradients_of_one_larger(tiny_cfg: ModelConfig) -> None:
    # Task rows score different numbers of tokens (padding, unscored prompts), so micro-batches count different
    # targets: averaging each one's own mean gave a token of the sparse micro-batch 10x the weight of the other's.
    sparse, dense = batches(2, 3, tiny_cfg)
    sparse[1][:, 1:] = IGNORE_INDEX  # 1 counted target a row against dense's 10
    large = [(torch.cat([sparse[0], dense[0]]), torch.cat([sparse[1], dense[1]]))]
    accumulated, _ = first_step_grads([sparse, dense], 2, tiny_cfg)
    single, _ = first_step_grads(large, 1, tiny_cfg)
    for name in single:
        torch.testing.assert_close(accumulated[name], single[name], rtol=1e-5, atol=1e-7, msg=name)


def test_bf16_mixed_on_cpu_matches_fp32_to_bf16_precision(tiny_cfg: ModelConfig) -> None:
    data = batches(1, 4, tiny_cfg)
    fp32, _ = first_step_grads(data, 1, tiny_cfg)
    bf16, _ = first_step_grads(data, 1, tiny_cfg, precision="bf16-mixed")
    flat32, flat16 = torch.cat([g.flatten() for g in fp32.values()]), torch.cat([g.flatten() for g in bf16.values()])
    assert flat16.dtype == torch.float32 and torch.isfinite(flat16).all()  # master weights and grads stay fp32
    cosine = torch.nn.functional.cosine_similarity(flat32, flat16, dim=0)
    assert 0.99 < cosine < 1.0  # close to fp32, yet the matmuls did run in bf16 (bitwise equal would mean no autocast)


def test_compiled_model_checkpoints_load_into_an_uncompiled_model(tmp_path: Path, tiny_cfg: ModelConfig) -> None:
    torch.manual_seed(0)
    lit = LitGPT(tiny_cfg, compile=True)
    plain_names = list(lit.state_dict())
    lit.configure_model()  # what Lightning calls in each process: compiles forward in place
    assert lit.model._compiled_call_impl is not None and list(lit.state_dict()) == plain_names
    save_model(tmp_path / "model.pt", lit.model, WordTokenizer([f"w{i}" for i in range(tiny_cfg.vocab_size)]))
    loaded, _ = load_checkpoint(tmp_path / "model.pt")
    for name, tensor in lit.model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_gpu_compiled_mixed_precision_run_loads_on_cpu(tmp_path: Path, precision: str) -> None:
    result = run_cli("train.py", "trainer=gpu", f"trainer.precision={precision}", "compile=true",
                     "trainer.max_steps=30", "trainer.val_check_interval=15", "trainer.limit_val_batches=2",
                     "hydra.run.dir=run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    model, tokenizer = load_checkpoint(tmp_path / "run/model.pt")  # on CPU, uncompiled
    assert torch.isfinite(model(torch.tensor([tokenizer.encode("two plus three equals")]))).all()


def test_norm_clipping_under_fsdp_is_the_root_modules_over_every_shard(tiny_cfg: ModelConfig) -> None:
    """trainer=fsdp clips at 1.0 (trainer/default.yaml), and Lightning's FSDP plugin refuses norm clipping: the
    first step failed. The root FullyShardedDataParallel module clips over every rank's shard. (CPU: the call only;
    FSDP itself needs GPUs.)"""
    clipped = []

    class Root(torch.nn.Module):
        def clip_grad_norm_(self, max_norm: float) -> None:
            clipped.append(max_norm)

    strategy = FSDPStrategy.__new__(FSDPStrategy)
    strategy._model = Root()
    lit = LitGPT(tiny_cfg)
    lit._trainer = SimpleNamespace(strategy=strategy, precision="bf16-mixed")
    lit.configure_gradient_clipping(torch.optim.SGD(lit.parameters()), 0.5, "norm")
    assert clipped == [0.5]
