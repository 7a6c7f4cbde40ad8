"""The house's rules (docs/design.md), held against the code's imports: layers point downwards,
no import circle in the engine or the applications (imports inside functions count), the
profiler knows no environment, and the applications use the engine's public modules only."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = {
    "jaxsim",
    "jaxsim.params",
    "jaxsim.params_sampling",
    "jaxsim.policies",
    "jaxsim.rng",
    "jaxsim.spaces",
    "jaxsim.sharding",
    "jaxsim.envs",
    "jaxsim.profiler",
    "jaxsim.gymnasium",
    "jaxsim.gymnasium.sb3",
    "jaxsim.fused",
}
# Benchmarks that measure an engine internal on purpose: (file, module) -> why.
MEASURED_INTERNALS: dict[tuple[str, str], str] = {
    ("benchmarks/rollout_throughput/jaxsim_runners.py", "jaxsim.rollout.scan"): (
        "times the scan backend's compiled program alone, without rollout's host-side checks"
    ),
    ("benchmarks/fusion/traffic.py", "jaxsim.fused.block"): (
        "the traffic model counts the kernel's own padded MLP widths"
    ),
    **{
        (f"benchmarks/gpu/{name}.py", "jaxsim.fused.compile_record"): (
            "the compile check writes the table backend='auto' reads"
        )
        for name in ("cases", "compile_table")
    },
    **{
        (f"benchmarks/{path}", "jaxsim.envs.adapters"): (
            "gymnax's own loop, run with the adapter's dtype handling to compare like with like"
        )
        for path in ("adapters/loops.py", "harness/gymnax_scan.py", "minatar/loops.py")
    },
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The modules `path` imports (`from a.b import c` counts as a.b, and as a.b.c where that
    is a module of the repository)."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if top_level_only else ast.walk(tree)
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path.parent)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module
            subs = {f"{name}.{alias.name}" for alias in node.names}
            modules = {sub for sub in subs if _is_module(sub)}
            found |= modules
            if len(modules) < len(subs):  # some names are the module's own attributes
                found.add(name)
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_the_engine_never_imports_the_applications():
    bad = [
        (str(f.relative_to(ROOT)), m)
        for f in _files("jaxsim") + _files("atomicfiles")
        for m in _imports(f)
        if m.split(".")[0] in ("agents", "benchmarks", "examples", "tests")
    ]
    assert bad == []


@pytest.mark.parametrize("package", ["jaxsim", "agents", "benchmarks"])
def test_no_import_circle(package):
    """Imports inside functions count: a lazy import that closes a loop is still a loop (one
    concept split over two files that each need the other)."""
    modules = {_module_name(f): f for f in _files(package)}
    graph = {
        name: {m for m in _imports(f) if m in modules and m != name} for name, f in modules.items()
    }
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    # A package importing its own submodule (jaxsim.rollout -> jaxsim.rollout.scan) is the
    # package's normal shape, not a circle: keep only cycles through a module that is not the
    # package of the next one.
    real = [c for c in cycles if not all(b.startswith(a + ".") for a, b in itertools.pairwise(c))]
    assert real == []


def test_the_profiler_imports_no_environment_and_no_backend():
    bad = [
        (str(f.relative_to(ROOT)), m)
        for f in _files("jaxsim/profiler")
        for m in _imports(f)
        if m.startswith("jaxsim") and not m.startswith("jaxsim.profiler")
    ]
    assert bad == []


@pytest.mark.parametrize("application", ["agents", "benchmarks", "examples"])
def test_the_applications_use_the_engines_public_modules_only(application):
    bad = [
        (str(f.relative_to(ROOT)), m)
        for f in _files(application)
        for m in _imports(f)
        if m.startswith("jaxsim")
        and m not in PUBLIC
        and (str(f.relative_to(ROOT)), m) not in MEASURED_INTERNALS
    ]
    assert bad == [], "import only jaxsim's public modules (docs/design.md)"


def test_the_layer_check_sees_a_private_import(tmp_path):
    """The checks above would pass vacuously if `_imports` found nothing: it must see both
    import forms, and a relative one."""
    f = ROOT / "jaxsim" / "rollout" / "scan.py"
    found = _imports(f)
    assert "jaxsim.rollout.step" in found and "jax" in found
    assert "jaxsim.rollout.step" not in PUBLIC
