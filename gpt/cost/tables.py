"""How the cost command's figures are shown: a markdown table per batch and depth, a plot against depth, and the
machine and settings they were measured at (a GPU's figures and a CPU's read differently)."""
from __future__ import annotations

from typing import Any

import torch

from gpt.machine import cpu_description


def device_line(device: torch.device) -> str:
    """The machine the figures belong to: the GPU's name, or the CPU's model, its bf16 instructions and the vector
    instructions torch's kernels use on it."""
    if device.type == "cuda":
        return f"gpu: {torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    return f"cpu: {cpu_description()}; torch's CPU kernels: {torch.backends.cpu.get_cpu_capability()}"


def table(rows: list[dict[str, Any]]) -> str:
    """One markdown table per batch and depth, one line per engine."""
    lines = []
    for (batch, depth) in dict.fromkeys((r["batch"], r["depth"]) for r in rows):
        group = [r for r in rows if (r["batch"], r["depth"]) == (batch, depth)]
        refs = list(group[0]["decode_x"])
        x = " | ".join(f"x {ref}" for ref in refs)
        lines += ["", f"| batch {batch}, depth {depth:,} | prefill tok/s | {x} | decode tok/s | {x} | decode ms/token "
                      "| prefill peak MiB | cache MiB (tensors) | cache MiB (formula) |",
                  "|---|" + "---:|" * (6 + 2 * len(refs))]
        for r in group:
            cells = [r["prefill_tokens_per_s"], *(r["prefill_x"].get(ref) for ref in refs), r["decode_tokens_per_s"],
                     *(r["decode_x"][ref] for ref in refs), r["decode_ms_per_token"], r["prefill_peak_mib"],
                     r["cache_mib"], r["formula_mib"]]
            formats = ["{:,.0f}", *["{:.2f}"] * len(refs), "{:,.1f}", *["{:.2f}"] * len(refs), "{:.2f}", "{:,.0f}",
                       "{:,.2f}", "{:,.2f}"]
            shown = ["—" if c is None else f.format(c) for c, f in zip(cells, formats)]
            if r["out_of_memory"]:
                shown[0] = "out of memory"
            lines.append(f"| {r['name']} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


MARKERS = "osD^v"  # one per ten engines, the colour cycle's length


def figure(rows: list[dict[str, Any]], title: str) -> Any:
    """Decode ms/token, cache MiB and prefill tokens/s against depth, one line per engine, one row per batch, under
    `title`: the machine and the settings they were measured at (a GPU's figures and a CPU's read differently)."""
    from matplotlib.figure import Figure  # matplotlib only when a figure is drawn

    batches = list(dict.fromkeys(r["batch"] for r in rows))
    depths = sorted({r["depth"] for r in rows})
    fig = Figure(figsize=(15, 4 * len(batches)), layout="constrained")
    axes = fig.subplots(len(batches), 3, squeeze=False)
    panels = (("decode_ms_per_token", "decode ms/token"), ("cache_mib", "cache MiB"),
              ("prefill_tokens_per_s", "prefill tokens/s"))
    # One colour per engine in every panel: an engine out of memory at every depth of a batch draws no line there,
    # and the colour cycle would hand its colour to the next engine. Past the cycle's 10 colours the marker changes:
    # `--kernel sdpa math` measures 11 engines, and linear was drawn as mha (sdpa) was.
    names = list(dict.fromkeys(r["name"] for r in rows))
    colours = {name: f"C{i % 10}" for i, name in enumerate(names)}
    markers = {name: MARKERS[i // 10 % len(MARKERS)] for i, name in enumerate(names)}
    for axes_row, batch in zip(axes, batches):
        # A line that stops short would read as unmeasured: the titles name where an engine ran out of memory.
        missing = [f"{r['name']} at {r['depth']:,}" for r in rows if r["batch"] == batch and r["out_of_memory"]]
        note = f"\nout of memory: {'; '.join(missing)}" if missing else ""
        for ax, (key, label) in zip(axes_row, panels):
            for name in colours:
                # In depth order: --depths is measured in the order given, and a line drawn so would double back.
                points = sorted((r["depth"], r[key]) for r in rows if r["name"] == name and r["batch"] == batch
                                and r[key] is not None)
                if not points:  # out of memory at every depth of this batch
                    continue
                ax.plot(*zip(*points), marker=markers[name], linestyle="--" if name.startswith("hf ") else "-",
                        label=name, color=colours[name])
            if not ax.get_lines() and not missing:  # a prompt of one token (depth 0) is no prefill to time
                ax.text(0.5, 0.5, "prefill is not measured at depth 0: give --depths above 0", ha="center",
                        transform=ax.transAxes)
            ax.set(xlabel="depth (tokens in the cache)", ylabel=label, title=f"{label}, batch {batch}{note}")
            ax.set_xscale("symlog", linthresh=min([d for d in depths if d] or [1]))
            ax.set_xticks(depths, [f"{d:,}" for d in depths])
            ax.grid(alpha=0.3)
    # The key names every engine from any batch's lines, on the first decode panel that has some: a batch out of
    # memory at every depth has none, and one out of memory for some engines lacks theirs.
    handles = {line.get_label(): line for row in axes for line in row[0].get_lines()}
    keyed = next((row[0] for row in axes if row[0].get_lines()), None)
    if keyed is not None:
        keyed.legend([handles[name] for name in colours if name in handles],
                     [name for name in colours if name in handles], fontsize="small")
    fig.suptitle(title, fontsize="small")
    return fig
