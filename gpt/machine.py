"""The machine a figure belongs to, read from Linux's /proc/cpuinfo: a CPU's model and the instructions that decide
how fast it computes in bf16. Every benchmark, the cost command and train.py's choice of precision read it here."""
from __future__ import annotations

from pathlib import Path

BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # Linux's names for the instructions that compute in bf16


def cpu_info(key: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The first CPU's `key` line of /proc/cpuinfo (flags, model name); empty where unknown."""
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.split(":", 1)[0].strip() == key), "")


def cpu_description() -> str:
    """The CPU a figure was measured on: its model and which bf16 instructions it has (and AMX's tiles)."""
    flags = set(cpu_info("flags").split())
    have = [f for f in (*BF16_FLAGS, "amx_tile") if f in flags]
    return f"{cpu_info('model name') or 'an unknown CPU'} ({', '.join(have) or 'no bf16 instructions'})"
