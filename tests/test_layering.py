"""The one direction of flow (DESIGN.md section 3), checked on the source: every
``import perfcheck...`` statement, at module level or inside a function (or under
``TYPE_CHECKING``), is an edge.

* ingest imports nothing above it: only the ground floor (errors, schema, model,
  atomicfile), the bounded decoders (documents), the machine-file records it reads,
  and itself. (The run directory's
  reader lives in ``perfcheck.ingest.runs``; before, ``ingest/runs.py`` imported
  ``run/merge.py``, which imported ingest.)
* the faces (``cli.py``, ``cli_run.py``, ``__main__``) sit on top: no library module
  imports them (nor the pytest plugin, ``pytest_perfcheck``).
* collapsed to units (the top-level modules and subpackages of ``perfcheck``), the
  graph has no cycle, and every unit imports only units of lower layers. The layers,
  top first (a unit may import any unit below its own layer, none beside it)::

    faces          __main__  >  cli  >  cli_run    (cli_run: the ``run`` subcommand)
    suite runner   checking     settings -> analysis -> checks -> baselines/history -> reports
    history        history      the store, change points, the gate; it reads the results
                                file the reports write, and renders itself (dashboard,
                                exports, change-point tables)
    reports        report       renders records; never imports the runner or history
    run records    suiterun     SuiteRun, Run: what the runner fills in, the reports render
    settings       config, vocabulary
    profiling      run          plans counters from the expectations, runs a profiler
    checks         expect       expectations -> Check
    baselines      baseline
    diagnosis      diagnosis    why a kernel changed (read by checking and history)
    kernel tables  analysis, measure
    metrics        metrics
    readers        ingest
    machines       machine      machine files (ingest reads them as peaks)
    hardware       arch         the GPU database and occupancy rules
    progress       progress     the progress line on stderr (the kernel tables draw it)
    terminal       terminal     what the terminal allows (width, whether a person watches)
    store location storeurl     a history store's path or URL (password masked)
    documents      documents    JSON and TOML from outside, decoded with nesting bounded
    ground floor   perfcheck (the version), errors, schema, model, atomicfile,
                   kernelkey, units

  A new top-level module or subpackage must be given a layer here. (Before, there
  were two cycles: machine -> arch -> ingest -> machine, through ``Want``, now in
  schema; and checking/config/expect/history/report/run/vocabulary, through value
  formatting (now ``units``), ``run_suite`` (now in checking), the change-point tables
  (now ``history.listing``) and the run records (now ``suiterun``).)
"""

from __future__ import annotations

import ast
from pathlib import Path

import perfcheck

PACKAGE = Path(perfcheck.__file__).parent
GROUND = {"perfcheck.errors", "perfcheck.schema", "perfcheck.model", "perfcheck.atomicfile", "perfcheck.machine",
          "perfcheck.documents"}
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


def _imported(path: Path) -> set[str]:
    """Every absolute import of a file, by the module the name lives in."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(_target(f"{node.module}.{a.name}") for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(_target(a.name) for a in node.names)
    return found


def imports() -> dict[str, set[str]]:
    return {_module(path): {m for m in _imported(path) if m.split(".")[0] == "perfcheck"}
            for path in PACKAGE.rglob("*.py")}


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
    plugin = {_module(p) for p in PACKAGE.rglob("*.py") if any(m.split(".")[0] == "pytest_perfcheck" for m in _imported(p))}
    assert not plugin, sorted(plugin)


def test_pass_kinds_agree() -> None:
    """The runner's pass kinds are spelled as the reader reads them from the manifest."""
    from perfcheck.ingest import runs
    from perfcheck.run import plan

    assert (plan.TRACE, plan.COUNTERS, plan.REPLAY) == (runs.TRACE, runs.COUNTERS, runs.REPLAY)


# The layers of the docstring, lowest first.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground floor", ("perfcheck", "perfcheck.errors", "perfcheck.schema", "perfcheck.model", "perfcheck.atomicfile",
                      "perfcheck.kernelkey", "perfcheck.units")),
    ("documents", ("perfcheck.documents",)),
    ("store locations", ("perfcheck.storeurl",)),
    ("terminal", ("perfcheck.terminal",)),
    ("progress", ("perfcheck.progress",)),
    ("hardware", ("perfcheck.arch",)),
    ("machines", ("perfcheck.machine",)),
    ("readers", ("perfcheck.ingest",)),
    ("metrics", ("perfcheck.metrics",)),
    ("kernel tables", ("perfcheck.analysis", "perfcheck.measure")),
    ("diagnosis", ("perfcheck.diagnosis",)),
    ("baselines", ("perfcheck.baseline",)),
    ("checks", ("perfcheck.expect",)),
    ("profiling", ("perfcheck.run",)),
    ("settings", ("perfcheck.config", "perfcheck.vocabulary")),
    ("run records", ("perfcheck.suiterun", "perfcheck.comparison")),
    ("reports", ("perfcheck.report",)),
    ("history", ("perfcheck.history",)),
    ("suite runner", ("perfcheck.checking",)),
    ("faces", ("perfcheck.cli_run",)),
    ("faces", ("perfcheck.cli",)),
    ("faces", ("perfcheck.__main__",)),
)


def _unit(module: str) -> str:
    """The top-level module or subpackage a module belongs to."""
    return ".".join(module.split(".")[:2])


def unit_graph() -> dict[str, dict[str, set[str]]]:
    """unit -> {imported unit: the module edges behind it}; imports inside a unit dropped."""
    graph: dict[str, dict[str, set[str]]] = {}
    for module, targets in imports().items():
        edges = graph.setdefault(_unit(module), {})
        for target in targets:
            if _unit(target) != _unit(module):
                edges.setdefault(_unit(target), set()).add(f"{module} -> {target}")
    return graph


def _reach(graph: dict[str, dict[str, set[str]]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), {}):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_unit_graph_has_no_cycle() -> None:
    graph = unit_graph()
    reach = {unit: _reach(graph, unit) for unit in graph}
    cycles = {frozenset(u for u in graph if u in reach[start] and start in reach[u]) for start in graph if start in reach[start]}
    # Per cycle, one module edge behind each unit edge inside it.
    found = sorted(
        f"{' / '.join(sorted(cycle))}: " + "; ".join(
            min(edges) for a in sorted(cycle) for b, edges in sorted(graph[a].items()) if b in cycle)
        for cycle in cycles
    )
    assert not found, "\n".join(found)


def test_units_import_only_lower_layers() -> None:
    layer = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
    assert len(layer) == sum(len(units) for _, units in LAYERS), "a unit is in two layers"
    graph = unit_graph()
    upward = sorted(
        f"{a} ({LAYERS[layer[a]][0]}) imports {b} ({LAYERS[layer[b]][0]}): {', '.join(sorted(edges))}"
        for a, targets in graph.items() if a in layer
        for b, edges in targets.items() if b in layer and layer[b] >= layer[a]
    )
    assert not upward, "\n".join(upward)
    assert set(graph) == set(layer), f"give each unit a layer (or drop a gone one): {sorted(set(graph) ^ set(layer))}"
