"""Lightning's training checkpoints (last.ckpt): written crash-safe, and loaded safely (weights_only=True) with one
line for a file that is not one."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from gpt.atomic import atomic_open
from gpt.inference.checkpoint import CheckpointError, safe_load
from gpt.training.run_folder import CHECKPOINT


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint IO through gpt.atomic: a SIGKILL at any moment leaves either the previous or the new
    checkpoint, never a torn one."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path) as f:
            torch.save(checkpoint, f)

    def load_checkpoint(self, path: str | Path, map_location: Any = None,
                        weights_only: bool | None = None) -> dict[str, Any]:
        # Always weights_only=True, whatever the caller asks: Lightning also loads ddp_spawn's weights here.
        return safe_load(Path(path), CHECKPOINT, map_location)


def load_resume_checkpoint(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    """A Lightning checkpoint's dict, loaded with weights_only=True; CheckpointError says what is wrong."""
    path = Path(path)
    if path.is_dir():  # a run folder, as generate.py --ckpt takes one
        raise CheckpointError(f"ckpt_path={path} is a folder: pass the checkpoint in it ({path / CHECKPOINT} of a run "
                              "folder), or use resume=true")
    if not path.is_file():
        raise CheckpointError(f"ckpt_path={path} does not exist: pass a checkpoints/last.ckpt or use resume=true")
    checkpoint = safe_load(path, CHECKPOINT, map_location)
    if not isinstance(checkpoint, dict) or "loops" not in checkpoint or "optimizer_states" not in checkpoint:
        raise CheckpointError(f"{path} is not a Lightning training checkpoint (a model.pt cannot resume "
                              "training: its optimizer state is not saved)")
    return checkpoint
