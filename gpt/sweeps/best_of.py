"""The best of a swept setting per configuration, as Zoology (Arora et al. 2023) and MAD (Poli et al. 2024) report
each model at its best learning rate: configurations that differ only in the named overrides (e.g. optim.lr) are
one, and only the value whose seeds score best on average is kept, by held-out exact match where runs grade
answers (val loss breaks its ties), else by final val loss. Plain data in: configurations as tuples of overrides,
each with its summaries."""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from gpt.overrides import override_key as key

Config = tuple[str, ...]


def score(summaries: list[dict[str, Any]]) -> tuple[tuple[float, float], str] | None:
    """(a key, higher is better: exact match, then val loss to break its ties; the score as printed) over the
    successful seeds, or None when none succeeded."""
    ok = [s for s in summaries if s.get("status") == "ok"]
    exact = [s["val_acc"]["all"] for s in ok if "all" in s.get("val_acc", {})]
    losses = [s["val_loss"] for s in ok if s.get("val_loss") is not None]
    loss = statistics.fmean(losses) if losses else math.inf
    if exact:
        mean = statistics.fmean(exact)
        return (mean, -loss), f"exact match {100 * mean:.1f}%" + (f", val loss {loss:.4f}" if losses else "")
    return ((-loss, -loss), f"val loss {loss:.4f}") if losses else None


def best_settings(groups: dict[Config, list[dict[str, Any]]], swept: Sequence[str]) -> tuple[set[Config], list[str]]:
    """The configurations to keep (each one's best value of the `swept` overrides) and a line per configuration
    saying which value won and against what."""
    if not swept:
        return set(groups), []
    if "seed" in swept:  # seeds are left out of a configuration: they are what its mean and spread are over
        raise ValueError("--best-of seed: each configuration pools its seeds (mean ± spread); pick the best of a "
                         "setting such as optim.lr instead")
    set_here = {key(o) for config in groups for o in config}
    if unset := [k for k in swept if k not in set_here]:
        raise ValueError(f"--best-of {' '.join(unset)}: no configuration of this sweep sets it; they set "
                         f"{', '.join(sorted(set_here)) or 'nothing'}")
    families: dict[Config, list[Config]] = {}
    for config in groups:
        families.setdefault(tuple(o for o in config if key(o) not in swept), []).append(config)
    kept, notes = set(), []
    for family, members in families.items():
        scored = [(s, config) for config in members if (s := score(groups[config])) is not None]
        if not scored:
            kept.update(members)  # all failed: the report shows them as failed rows
            continue
        (_, shown), best = max(scored, key=lambda item: item[0][0])
        kept.add(best)
        # every other value tried, the ones whose seeds all failed too (a diverged LR says where the range ends)
        tried = {c: text for (_, text), c in scored} | {c: "failed" for c in members if score(groups[c]) is None}
        others = ", ".join(f"`{' '.join(o for o in c if key(o) in swept)}` {text}" for c, text in tried.items()
                           if c != best)
        chosen = " ".join(o for o in best if key(o) in swept)
        notes.append(f"- `{' '.join(family) or '(defaults)'}`: best `{chosen}` ({shown})"
                     + (f"; also tried {others}" if others else ""))
    return kept, notes
