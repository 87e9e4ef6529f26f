"""What a model costs at depth: prefill and decode speed, peak memory and cache bytes."""
from __future__ import annotations

from typing import Any

import torch


def tensor_bytes(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of every distinct tensor reachable from a cache object (attributes, lists, tuples, dicts)."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v, seen) for v in obj)
    if hasattr(obj, "__dict__"):
        return tensor_bytes(vars(obj), seen)
    return 0
