"""The house by concern keeps its shape: read from every module's imports (function-level and type-checking ones
included), rooms import only from rooms below them, the model and the data know nothing of each other or of
training, Lightning and Hydra stay at the edges, and no import circle runs anywhere in gpt/. Every function there
says the types it takes and gives."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

GPT = ROOT / "gpt"
# Floors from the ground up: a room may import its own modules and any room on a lower floor, nothing else.
FLOORS = [
    {"gpt.overrides"},  # a value as a command line writes it, which every refusal names values in
    {"gpt.validate", "gpt.atomic", "gpt.machine", "gpt.pipe"},  # the vocabulary every room stands on
    {"gpt.model", "gpt.data"},  # what a GPT is; what it reads
    {"gpt.inference"},  # what a trained one does
    {"gpt.evaluation", "gpt.hf"},  # how good it is; the outside world
    {"gpt.training", "gpt.cost"},  # how it learns; what a variant costs at depth, beside Hugging Face's
    {"gpt.sweeps"},  # what a sweep found
    {"gpt", "gpt.__main__"},  # the public names and the front door
]
# Libraries that belong to the edges: the model is plain torch, usable without them.
ALLOWED_ONLY_IN = {"lightning": {"gpt.data", "gpt.training", "gpt.sweeps"},
                   "hydra": {"gpt.training", "gpt.sweeps"}, "omegaconf": {"gpt.training", "gpt.sweeps"}}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in GPT.rglob("*.py")}


def imports(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in it; `from gpt.x import y` is gpt.x.y when that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                      for a in node.names}
    return found


def room(module: str) -> str:
    """The room a gpt module belongs to: its package under gpt/, or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def floor(module: str) -> int:
    return next(i for i, rooms in enumerate(FLOORS) if room(module) in rooms)


def test_every_module_stands_on_a_floor() -> None:
    assert all(any(room(m) in rooms for rooms in FLOORS) for m in MODULES), sorted(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_downward_only(module: str) -> None:
    upward = sorted(target for target in imports(MODULES[module]) if target.startswith("gpt.") and target in MODULES
                    and room(target) != room(module) and floor(target) >= floor(module))
    assert not upward, f"{module} imports {upward}: a room imports only from the floors below it"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_lightning_and_hydra_stay_at_the_edges(module: str) -> None:
    for library, rooms in ALLOWED_ONLY_IN.items():
        uses = [name for name in imports(MODULES[module]) if name.split(".")[0] == library]
        assert room(module) in rooms or not uses, f"{module} imports {uses}; only {sorted(rooms)} may"


def test_no_import_circle() -> None:
    graph = {m: {t for t in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    graph = {m: {t for t in targets if t != "gpt"} for m, targets in graph.items()}  # the package face is lazy
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert circles == []


def test_every_signature_has_type_hints() -> None:
    """A nested function (print_shapes's hook) once went without its return type."""
    bare = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                named = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]
                if node.returns is None or any(a.annotation is None and a.arg not in ("self", "cls") for a in named):
                    bare.append(f"{module}.{node.name} (line {node.lineno})")
    assert not bare, f"without type hints: {bare}"
