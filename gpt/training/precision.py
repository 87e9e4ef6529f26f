"""The precision a run trains in: bf16 autocast where the hardware trains faster in it, else fp32 (trainer.precision=
auto), and the precisions a CPU cannot compute in."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gpt.machine import cpu_info


def cpu_trains_faster_in_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether bf16 autocast trains faster than fp32 on this CPU, as measured (docs/training.md, Precision): with
    AMX's bf16 tiles (Intel Sapphire Rapids), and on AMD with AVX512-BF16 (an EPYC: 1.11x nanoGPT's speed against
    0.94x in fp32); not on an Intel CPU with AVX512-BF16 alone (a Xeon without AMX: the default run's step 1.31x
    slower). False where unknown: without bf16 instructions a CPU emulates bf16, slower than fp32."""
    flags = set(cpu_info("flags", cpuinfo).split())
    return "amx_bf16" in flags or ("avx512_bf16" in flags and cpu_info("vendor_id", cpuinfo) == "AuthenticAMD")


def resolve_precision(precision: str | None, accelerator: str) -> str:
    """trainer.precision=auto: bf16 autocast where the hardware trains faster in it (a GPU that computes in bf16, a
    CPU as cpu_trains_faster_in_bf16 says), else fp32; null is Lightning's fp32."""
    if precision is None:
        return "32-true"
    if precision != "auto":
        return precision
    if accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available()):  # auto: this CPU
        return "bf16-mixed" if cpu_trains_faster_in_bf16() else "32-true"
    return "bf16-mixed" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "32-true"


def check_cpu_precision(precision: Any) -> None:
    """fp16 and Transformer Engine compute on a GPU only. Lightning trains a CPU run asked for 16-mixed in bf16-mixed
    with a warning (its record saying 16-mixed), and transformer-engine ends in its ModuleNotFoundError's traceback."""
    if str(precision).startswith(("16", "transformer-engine")):
        raise ValueError(f"trainer.precision={precision} needs a GPU: on CPU use trainer.precision=bf16-mixed or 32")
