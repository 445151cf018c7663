"""The one direction of flow (DESIGN.md section 3), checked on the source: every
``import perfcheck...`` statement, at module level or inside a function, is an edge.

* ingest imports nothing above it: only the ground floor (errors, schema, model,
  atomicfile), the machine-file records it reads, and itself. (The run directory's
  reader lives in ``perfcheck.ingest.runs``; before, ``ingest/runs.py`` imported
  ``run/merge.py``, which imported ingest.)
* the faces (``cli.py``, ``cli_run.py``, ``__main__``) sit on top: no library module
  imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import perfcheck

PACKAGE = Path(perfcheck.__file__).parent
GROUND = {"perfcheck.errors", "perfcheck.schema", "perfcheck.model", "perfcheck.atomicfile", "perfcheck.machine"}
FACES = {"perfcheck.cli", "perfcheck.cli_run", "perfcheck.__main__"}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _target(name: str) -> str:
    """The module an imported name lives in (``perfcheck.ingest.runs.scan_run`` ->
    ``perfcheck.ingest.runs``)."""
    parts = name.split(".")
    while len(parts) > 1 and not _exists(".".join(parts)):
        parts.pop()
    return ".".join(parts)


def imports() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.update(_target(f"{node.module}.{a.name}") for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(_target(a.name) for a in node.names)
        edges[_module(path)] = {m for m in found if m.split(".")[0] == "perfcheck"}
    return edges


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_ingest_imports_nothing_above_it() -> None:
    above = {
        f"{module} -> {target}"
        for module, targets in imports().items() if _inside(module, "perfcheck.ingest")
        for target in targets
        if not _inside(target, "perfcheck.ingest") and target not in GROUND
    }
    assert not above, sorted(above)


def test_the_run_directory_reader_needs_no_runner() -> None:
    edges = imports()
    assert "perfcheck.ingest.runs" in edges and not any(_inside(t, "perfcheck.run") for t in edges["perfcheck.ingest.runs"])
    assert "perfcheck.run.merge" not in edges  # the reader moved to ingest


def test_no_library_module_imports_a_face() -> None:
    edges = imports()
    assert {"perfcheck.cli", "perfcheck.cli_run"} <= set(edges)
    assert "perfcheck.run.cli" not in edges  # the run subcommand's face sits beside cli.py
    wrong = {f"{m} -> {t}" for m, targets in edges.items() if m not in FACES for t in targets if t in FACES}
    assert not wrong, sorted(wrong)


def test_pass_kinds_agree() -> None:
    """The runner's pass kinds are spelled as the reader reads them from the manifest."""
    from perfcheck.ingest import runs
    from perfcheck.run import plan

    assert (plan.TRACE, plan.COUNTERS, plan.REPLAY) == (runs.TRACE, runs.COUNTERS, runs.REPLAY)
