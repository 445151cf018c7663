"""pytest plugin: ``pytest --perf`` (registered through the ``pytest11`` entry point).

* Tests marked ``@pytest.mark.perf`` and tests using the ``perf`` fixture are skipped
  (with a reason) unless ``--perf`` is given.
* ``perf`` fixture: ``perf.load(path, arch=None, peaks=None)`` reads a profile,
  ``perf.measure(fn, *args, bytes=..., flops=..., device="cpu"|"cuda")`` times a Python
  kernel (``perfcheck.measure``), ``perf.run(cmd, profiler=..., launcher=..., expect={...})`` profiles a
  command (``perfcheck.run``; a profiler that is not installed skips the test),
  ``perf.expect(pattern, *expectations)`` checks it and fails the test with the
  observed value, the expected one, the baseline and units. ``@pytest.mark.perf(arch=...,
  peaks=..., baseline_dir=..., tolerances=..., suite=...)`` sets defaults for the fixture.
* Config suites (``perfcheck.toml``, or ``pyproject.toml`` with ``[tool.perfcheck]``, when
  pytest collects them, or named by ``--perf-config``) become test items, one per kernel x
  expectation. Kernels are known only once the profile is read, so profiles are read at
  collection time, and only with ``--perf``; without it each pattern x expectation is one
  skipped item.
* At the end: the baselines are settled, the reports written (``--perf-junit``,
  ``--perf-markdown``, ``--perf-json``, ``--perf-openmetrics``, ``--perf-roofline``) and a
  summary table printed. Under pytest-xdist the workers evaluate and send their checks
  to the controller on the test reports; only the controller writes files.

Precedence (perfcheck.config): marker/fixture > --perf-* options > PERFCHECK_* > pytest
ini (perf_*) > config file > defaults.

Start-up must stay light: nothing here imports pandas, matplotlib or perfcheck's readers
at import time; they are imported when a perf item is collected or a perf test runs.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from perfcheck.checking import Run, SuiteRun
    from perfcheck.config import Layer, Resolver, SuiteSettings
    from perfcheck.model import Check

SKIP_REASON = "performance test: run with --perf"

# option dest / ini name suffix -> (settings key, help)
_OUTPUTS = {
    "junit": "write perfcheck's JUnit XML report (one testcase per kernel x expectation) to FILE",
    "markdown": "write the Markdown summary to FILE (also appended to $GITHUB_STEP_SUMMARY when set)",
    "json": "write the JSON results file to FILE",
    "openmetrics": "write a GitLab metrics report (OpenMetrics text) to FILE",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfcheck", "GPU kernel performance checks (perfcheck)")
    group.addoption(
        "--perf", action="store_true", default=False,
        help="run tests marked 'perf', tests using the 'perf' fixture and config suites "
        "(performance expectations); without it they are skipped",
    )
    group.addoption("--perf-config", metavar="FILE",
                    help="perfcheck config file (perfcheck.toml or pyproject.toml with [tool.perfcheck]); "
                    "its suites are collected as tests")
    group.addoption("--perf-suite", action="append", metavar="NAME", help="collect only this config suite (repeatable)")
    group.addoption("--perf-arch", metavar="NAME", help="GPU the profiles were taken on (arch id or device)")
    group.addoption("--perf-peaks", action="append", metavar="FILE", help="empirical peaks or a machine file (repeatable)")
    group.addoption("--perf-baseline-dir", metavar="DIR", help="where baselines are kept")
    group.addoption("--perf-update-baseline", action="store_true", default=None,
                    help="rewrite the baselines from this run (baseline-relative failures are accepted)")
    group.addoption("--perf-strict-baseline", action="store_true", dest="perf_strict_baseline", default=None,
                    help="a missing or re-fingerprinted baseline is an error, never recorded "
                    "(default: on when CI is set to a true value)")
    group.addoption("--perf-no-strict-baseline", action="store_false", dest="perf_strict_baseline", default=None,
                    help="record a missing baseline even in CI (the first run records, and says so)")
    for name, text in _OUTPUTS.items():
        group.addoption(f"--perf-{name}", metavar="FILE", help=text)
    group.addoption("--perf-roofline", metavar="DIR", help="write roofline plots (PNG and SVG per suite) into DIR")
    group.addoption("--perf-history", metavar="PATH|URL", help="history store (an SQLite file or postgresql://"
                    "user@host/db): baseline-relative checks use this machine's recent runs, and the session's run "
                    "is appended (unless read-only)")
    group.addoption("--perf-history-mode", choices=("append", "read-only"), metavar="MODE", dest="perf_history_mode",
                    help="append (default) or read-only: the checks read the history store, nothing is written")
    group.addoption("--perf-history-read-only", action="store_const", const="read-only", dest="perf_history_mode",
                    help="the same as --perf-history-mode read-only (pull requests naming the nightly store)")
    for key in ("config", "arch", "baseline_dir", *_OUTPUTS, "roofline", "history", "history_mode"):
        parser.addini(f"perf_{key}", f"perfcheck {key.replace('_', ' ')} (below --perf-{key.replace('_', '-')} "
                      "and PERFCHECK_* in precedence); relative to the ini file", default=None)
    parser.addini("perf_peaks", "perfcheck peak files, one per line; relative to the ini file", type="linelist", default=[])
    parser.addini("perf_strict_baseline", "perfcheck strict baselines: true or false (default: true when CI is set)",
                  default=None)


# --- session state -------------------------------------------------------------------------------


@dataclasses.dataclass
class _Reported:
    """One suite's checks as they arrive from test reports (worker or same process)."""

    settings: dict[str, Any]
    checks: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class _State:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.enabled: bool = bool(config.getoption("--perf"))
        self.collected: set[Path] = set()  # config files collected through the walk
        self.resolvers: dict[tuple[str, str], "Resolver"] = {}
        self.runs: dict[str, "SuiteRun"] = {}  # in-process runs, by key (analysis kept for reports)
        self.reported: dict[str, _Reported] = {}  # what the reports carried, by key, in order
        self.finished: "Run | None" = None
        self.errors: list[str] = []

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")  # pytest-xdist sets it on workers only

    def _ini_layer(self) -> "Layer":
        from perfcheck.config import Layer

        inipath = self.config.inipath
        base = inipath.parent if inipath is not None else self.config.rootpath
        name = inipath.name if inipath is not None else "ini"
        raw: dict[str, object] = {}
        for key in ("config", "arch", "baseline_dir", *_OUTPUTS, "roofline", "strict_baseline", "history",
                    "history_mode"):
            value = self.config.getini(f"perf_{key}")
            if value:
                raw[key] = value
        peaks = self.config.getini("perf_peaks")
        if peaks:
            raw["peaks"] = list(peaks)
        return Layer.from_mapping("ini", raw, lambda key: f"{name} perf_{key}", base)

    def _cli(self) -> dict[str, object]:
        opt = self.config.getoption
        cli: dict[str, object] = {
            "config": opt("--perf-config"), "arch": opt("--perf-arch"), "peaks": opt("--perf-peaks"),
            "baseline_dir": opt("--perf-baseline-dir"), "update_baseline": opt("--perf-update-baseline"),
            "roofline": opt("--perf-roofline"), "strict_baseline": opt("perf_strict_baseline"),
            "history": opt("--perf-history"), "history_mode": opt("perf_history_mode"),
        }
        for name in _OUTPUTS:
            cli[name] = opt(f"--perf-{name}")
        return cli

    def resolver(self, config_file: Path | None = None, start: Path | None = None) -> "Resolver":
        """Settings for a collected config file (``config_file``) or a test in ``start``
        (the explicit config, else the nearest config file from the test's directory up)."""
        key = (str(config_file), str(start))
        if key not in self.resolvers:
            from perfcheck.config import resolver

            self.resolvers[key] = resolver(
                cli=self._cli(), ini=self._ini_layer(), config=config_file,
                cwd=self.config.invocation_params.dir, search_from=start or self.config.rootpath,
                cli_prefix="--perf-",
            )
        return self.resolvers[key]

    def register(self, key: str, run: "SuiteRun") -> None:
        self.runs[key] = run

    def record_command(self, *targets: str) -> str:
        """The pytest command that records or updates the baselines of ``targets``
        (paths or node ids, as the user's shell sees them), for strict-baseline errors."""
        import shlex

        return shlex.join(["pytest", "--perf", "--perf-update-baseline", *targets])

    def target(self, path: Path, *names: str) -> str:
        """``path::name`` relative to the invocation directory where it is inside it."""
        try:
            shown = str(Path(path).resolve().relative_to(Path(self.config.invocation_params.dir).resolve()))
        except ValueError:
            shown = str(path)
        return "::".join([shown, *names])


_STATE = pytest.StashKey[_State]()
# A failed item's full account (observed, expected, baseline, detail), shown as a
# report section below its one-line failure message.
_DETAILS = pytest.StashKey[str]()
# Checks an item produced, as (suite key, SuiteSettings dict, Check) for the report hook.
_ITEM_CHECKS = pytest.StashKey[list]()


def _state(config: pytest.Config) -> _State:
    return config.stash[_STATE]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "perf(arch=None, peaks=None, baseline_dir=None, tolerances=None, suite=None): a GPU kernel "
        "performance test, run only with --perf; the arguments set defaults for the perf fixture",
    )
    state = _State(config)
    config.stash[_STATE] = state
    config.pluginmanager.register(_Receiver(state), "perfcheck-receiver")


def _one_line(exc: BaseException) -> str:
    return f"perfcheck: error: {exc}"


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory where it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# --- config suites as test items ------------------------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name not in ("perfcheck.toml", "pyproject.toml"):
        return None
    from perfcheck.config import has_perfcheck_table

    if not has_perfcheck_table(file_path):
        return None
    # Not marked collected here: pytest (8+) asks about every file of a directory on the
    # way to the paths it was given and drops those outside them (a config file next to
    # tests/ in `pytest --perf --perf-config perfcheck.toml tests/`); collect() marks it.
    return PerfConfigFile.from_parent(parent, path=file_path)


class PerfConfigFile(pytest.File):
    """A perfcheck config file: one collector per suite."""

    def collect(self) -> Iterator[pytest.Collector]:
        from perfcheck.config import read_config

        _state(self.config).collected.add(Path(self.path).resolve())
        config = read_config(self.path)
        wanted = self.config.getoption("--perf-suite")
        for name in config.suite_names():
            if wanted and name not in wanted:
                continue
            yield PerfSuite.from_parent(self, name=name)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # type: ignore[override]
        from perfcheck.errors import OutOfMemory, PerfcheckError

        if isinstance(excinfo.value, PerfcheckError):
            return _one_line(excinfo.value)
        if isinstance(excinfo.value, MemoryError):  # a large profile, not a bug
            return _one_line(OutOfMemory(excinfo.value))
        return super().repr_failure(excinfo)  # type: ignore[return-value]


def _prepare_once(config: pytest.Config, suite: "SuiteSettings", key: str) -> "SuiteRun":
    """``checking.prepare``, but under pytest-xdist a suite with a command is
    profiled once per session, not once per worker: every worker collects the config
    suites, so the first to get here runs the profiler and records the run directory;
    the others wait on a lock and read that directory (the GPU runs the application
    once, and all workers check the same measurements)."""
    from perfcheck import checking

    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or suite.command is None or os.name != "posix":
        return checking.prepare(suite)
    import fcntl
    import hashlib
    import tempfile

    from perfcheck.atomicfile import write_atomic

    shared = Path(tempfile.gettempdir()) / f"perfcheck-xdist-{workerinput['testrunuid']}"
    shared.mkdir(exist_ok=True)
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    marker = shared / f"{name}.profiles"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if marker.exists():
            profiles = tuple(Path(p) for p in marker.read_text(encoding="utf-8").splitlines())
            return checking.prepare(dataclasses.replace(suite, command=None, profiles=profiles))
        run = checking.prepare(suite)
        write_atomic(marker, "\n".join(str(p) for p in run.settings.profiles))
        return run


class PerfSuite(pytest.Collector):
    """One config suite: one item per kernel x expectation (pattern x expectation,
    skipped, without --perf)."""

    def collect(self) -> Iterator[pytest.Item]:
        state = _state(self.config)
        if not state.enabled:
            yield from self._unread(SKIP_REASON)
            return
        from perfcheck import checking

        resolver = state.resolver(config_file=self.path)
        suite = resolver.suite(self.name, validate=True)
        from perfcheck.errors import ProfilerNotFound

        try:  # a suite with a command profiles it here
            run = _prepare_once(self.config, suite, f"{self.path}::{self.name}")
        except ProfilerNotFound as exc:  # no profiler on this machine: skipped, with the reason
            yield from self._unread(str(exc))
            return
        if run.skipped:
            yield from self._unread(run.settings.missing or "profiles not available")
            return
        run.record_command = state.record_command(state.target(self.path), "--perf-suite", self.name)
        checking.check(run)
        key = f"{self.path}::{self.name}"
        state.register(key, run)
        settings = run.settings.as_dict()  # after a command ran: the run directory, not the command
        seen: dict[str, int] = {}
        for check in run.checks:
            name = f"{check.kernel}[{check.expression}]"
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # a kernel matched by two patterns with the same expectation
                name = f"{name}#{seen[name]}"
            item = PerfItem.from_parent(self, name=name, check=check)
            item.stash[_ITEM_CHECKS] = [(key, settings, check)]
            yield item

    def _unread(self, reason: str) -> Iterator[pytest.Item]:
        from perfcheck.config import read_config

        config = read_config(self.path)
        body = config.suites_table().get(self.name, {})
        lines = config.expectation_lines(self.name)
        expect = body.get("expect", {})
        if not isinstance(expect, Mapping) or not expect:
            expect = {"*": ["(no expectations)"]}
        for pattern, texts in expect.items():
            for text in [texts] if isinstance(texts, str) else list(texts):
                line = lines.get(str(pattern), {}).get(text) if isinstance(text, str) else None
                item = PerfItem.from_parent(self, name=f"{pattern}[{text}]", check=None, line=line)
                item.add_marker(pytest.mark.skip(reason=reason))
                yield item

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # type: ignore[override]
        from perfcheck.errors import OutOfMemory, PerfcheckError

        if isinstance(excinfo.value, PerfcheckError):
            return _one_line(excinfo.value)
        if isinstance(excinfo.value, MemoryError):  # a large profile, not a bug
            return _one_line(OutOfMemory(excinfo.value))
        return super().repr_failure(excinfo)  # type: ignore[return-value]


class PerfCheckFailed(AssertionError):
    """A performance check that failed or could not be evaluated."""

    def __init__(self, checks: Sequence["Check"]) -> None:
        self.checks = list(checks)
        super().__init__(failure_text(self.checks))


def failure_line(checks: Sequence["Check"]) -> str:
    """One line for pytest's failure message (and its JUnit ``message``): each failed
    check's kernel, expectation and message (observed, expected, % of which peak, or
    the baseline and change), and why the kernel changed where known."""
    return "; ".join(f"{c.outcome.upper()}: {c.kernel} [{c.expression}]: {c.message}"
                     + (f" (why: {c.diagnosis})" if c.diagnosis else "") for c in checks)


def failure_text(checks: Sequence["Check"]) -> str:
    """Observed, expected, baseline and units of each failed check."""
    from perfcheck.report.results import baseline_text, change_text, expected_text, observed_text

    blocks = []
    for c in checks:
        lines = [f"{c.outcome.upper()}: {c.kernel}: {c.expression}", f"  {c.message}",
                 f"  observed: {observed_text(c)}", f"  expected: {expected_text(c)}"]
        if c.origin == "baseline":
            lines.append(f"  baseline: {baseline_text(c)} (change {change_text(c)})")
        if c.detail:
            lines.append(f"  detail:   {c.detail}")
        if c.diagnosis:
            lines.append(f"  why:      {c.diagnosis}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


class PerfItem(pytest.Item):
    """One kernel x expectation of a config suite."""

    def __init__(self, *, check: "Check | None", line: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.line = check.source_line if check is not None else line  # 1-based, in the config file

    def runtest(self) -> None:
        if self.check is not None and not self.check.passed:
            self.stash[_DETAILS] = failure_text([self.check])
            raise PerfCheckFailed([self.check])

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, PerfCheckFailed):
            return failure_line(excinfo.value.checks)  # the details follow as a report section
        return super().repr_failure(excinfo)  # type: ignore[return-value]

    def reportinfo(self) -> tuple[Path, int, str]:
        """The config file and the expectation's line (0-based, as pytest's reportinfo
        and its JUnit ``line`` attribute count for test functions)."""
        suite = self.parent.name if self.parent is not None else ""
        return self.path, (self.line - 1) if self.line else 0, f"{suite}: {self.name}"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = _state(config)
    if not state.enabled:
        skip = pytest.mark.skip(reason=SKIP_REASON)
        for item in items:
            if item.get_closest_marker("perf") is not None:
                item.add_marker(skip)
        return
    # A config file named by --perf-config (or the ini, or PERFCHECK_CONFIG), or the
    # rootdir's when pytest runs its default paths, is collected even when the walk
    # did not reach it.
    from perfcheck.errors import PerfcheckError

    extra: list[Path] = []
    try:
        value = state.resolver().get("config")
    except PerfcheckError as exc:
        raise pytest.UsageError(_one_line(exc)) from None
    if value is not None:
        extra.append(Path(value.value))  # type: ignore[arg-type]
    elif config.args_source != pytest.Config.ArgsSource.ARGS:
        from perfcheck.config import find_config

        found = find_config(config.rootpath, stop=config.rootpath)
        if found is not None:
            extra.append(found)
    for path in extra:
        if path.resolve() in state.collected:
            continue
        state.collected.add(path.resolve())
        node = PerfConfigFile.from_parent(session, path=path)
        items.extend(session.genitems(node))


# --- the perf fixture -------------------------------------------------------------------------------


def _suite_name(item: pytest.Item) -> str:
    return f"{Path(item.path).stem}.{item.name}"


class Perf:
    """What the ``perf`` fixture gives a test: ``load`` a profile or ``measure`` a Python
    kernel, then ``expect`` on it."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self._state = _state(request.config)
        self._run: "SuiteRun | None" = None
        self._loads = 0

    @property
    def analysis(self) -> Any:
        """The last loaded or measured profile's Analysis (``analysis.kernels``: one row per kernel)."""
        if self._run is None:
            pytest.fail("perf.load(path) or perf.measure(fn, ...) first", pytrace=False)
        return self._run.analysis

    def load(self, *paths: str | Path, arch: str | None = None, peaks: Sequence[str | Path] | str | None = None,
             format: str | None = None, suite: str | None = None) -> "Perf":
        """Read profiles (relative to the test file's directory) for the following ``expect``
        calls. ``arch``/``peaks``/``format`` win over the ``perf`` marker's, which win over
        --perf-* options, PERFCHECK_* and the config file."""
        if not paths:
            pytest.fail("perf.load() needs at least one profile path", pytrace=False)
        here = Path(self._request.node.path).parent
        profiles = [p if Path(p).is_absolute() else here / p for p in paths]
        return self._start("load", {"arch": arch, "peaks": peaks, "format": format}, suite, profiles=profiles)

    def measure(self, fn: Callable[..., Any], *args: Any, bytes: float | None = None,  # noqa: A002
                flops: float | None = None, precision: str | None = None, repeat: int | None = None,
                warmup: int | None = None, device: str = "cpu", name: str | None = None, flush_cache: bool = False,
                clock: str = "wall", arch: str | None = None, peaks: Sequence[str | Path] | str | None = None, suite: str | None = None,
                **kwargs: Any) -> "Perf":
        """Time ``fn(*args, **kwargs)`` for the following ``expect`` calls: one kernel named
        after ``fn`` (or ``name``), one dispatch per timed call (``perfcheck.measure.measure``,
        which documents ``bytes``/``flops``/``precision``/``repeat``/``warmup``/``device``/
        ``flush_cache``/``clock``). ``peaks``/``arch`` as for ``load``. ``device="cuda"`` without
        PyTorch or CuPy, or without a GPU, skips the test with the reason."""
        from perfcheck.measure import measure

        options = {k: v for k, v in (("repeat", repeat), ("warmup", warmup)) if v is not None}

        def run() -> Any:
            return measure(fn, *args, bytes=bytes, flops=flops, precision=precision, device=device, name=name,
                           flush_cache=flush_cache, clock=clock, **options, **kwargs)

        return self._start("measure", {"arch": arch, "peaks": peaks}, suite, measure=run)

    last_run: Any = None  # perf.run's RunResult: run directory, profiler, passes, ranks

    def run(self, command: str | Sequence[str], *, profiler: str | None = None, launcher: str | None = None,
            timeout: float | None = None, rank: int | None = None, expect: Mapping[str, Sequence[str]] | None = None,
            metrics: Sequence[str] = (), counters: Sequence[str] = (), arch: str | None = None,
            peaks: Sequence[str | Path] | str | None = None, run_dir: str | Path | None = None,
            suite: str | None = None) -> "Perf":
        """Profile ``command`` (run in the test file's directory) with ``profiler``
        (rocprofv3, rocprof, ncu; default: the installed one), collecting only what
        ``expect`` ({pattern: [expectation, ...]}) and ``metrics`` need, then read what it
        measured as ``load`` does: all ranks of a ``launcher`` ("srun -n 4") run with
        their spread per kernel (``rank_imbalance``), or rank ``rank`` alone. ``expect`` is
        checked right away; later ``perf.expect`` calls check the same profile. The run
        directory is ``run_dir``, else a new one under ``runs_dir`` (config) or
        ``perfcheck-runs/`` in the rootdir; ``perf.last_run`` describes it. A profiler
        that is not installed skips the test with the reason; any other failure fails
        it in one line naming the run directory, which is kept."""
        from perfcheck.errors import PerfcheckError, ProfilerNotFound
        from perfcheck.run.runner import run as run_command

        item = self._request.node
        here = Path(item.path).parent
        marker = item.get_closest_marker("perf")
        if arch is None and marker is not None:
            arch = marker.kwargs.get("arch")
        skip = problem = None
        try:
            resolver = self._state.resolver(start=here)

            def setting(key: str, given: object) -> Any:
                value = resolver.get(key) if given is None else None
                return given if given is not None else (value.value if value is not None else None)

            runs_dir = setting("runs_dir", None) or Path(self._request.config.rootpath) / "perfcheck-runs"
            self.last_run = run_command(
                command, profiler=setting("profiler", profiler), launcher=setting("launcher", launcher),
                timeout=setting("timeout", timeout), run_dir=run_dir, runs_dir=runs_dir,
                name=suite or _suite_name(item), expect=expect, metrics=metrics, counters=counters,
                arch=setting("arch", arch), cwd=here,
            )
            path = self.last_run.path(rank)
        except ProfilerNotFound as exc:
            skip = str(exc)
        except PerfcheckError as exc:
            problem = _one_line(exc)
        if skip is not None:
            pytest.skip(skip)
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        self._start("run", {"arch": arch, "peaks": peaks}, suite, profiles=[path])
        for pattern, texts in (expect or {}).items():
            self.expect(pattern, *([texts] if isinstance(texts, str) else texts))
        return self

    def _start(self, call: str, given: Mapping[str, object], suite: str | None, *,
               profiles: Sequence[Path] | None = None, measure: Callable[[], Any] | None = None) -> "Perf":
        """Resolve the suite's settings (this call > marker > --perf-* > PERFCHECK_* > config
        file), then read ``profiles`` or run ``measure`` (it returns a Profile)."""
        from perfcheck import checking
        from perfcheck.config import Layer, MissingFile
        from perfcheck.errors import PerfcheckError
        from perfcheck.measure import DeviceUnavailable

        item = self._request.node
        here = Path(item.path).parent
        marker = item.get_closest_marker("perf")
        marker_kwargs = dict(marker.kwargs) if marker is not None else {}
        self._loads += 1
        name = suite or marker_kwargs.pop("suite", None) or _suite_name(item)
        marker_kwargs.pop("suite", None)
        if self._loads > 1 and suite is None:
            name = f"{name}-{self._loads}"
        problem = skip = None
        try:
            resolver = self._state.resolver(start=here)
            resolver = resolver.with_layer(Layer.from_mapping(
                "marker", marker_kwargs, lambda key: f"@pytest.mark.perf({key}=...) on {item.name}", here))
            resolver = resolver.with_layer(Layer.from_mapping("fixture", given, lambda key: f"perf.{call}({key}=...)", here))
            if measure is None:
                settings = resolver.suite(name, profiles=profiles, expect={}, validate=True,
                                          profiles_origin=f"perf.{call}(...)")
                self._run = checking.prepare(settings)
            else:  # settings first: a bad peaks path fails before the measuring
                settings = resolver.suite(name, expect={}, validate=True, measured=True)
                self._run = checking.prepare(settings, measure())
        except DeviceUnavailable as exc:
            skip = str(exc)
        except MissingFile as exc:
            problem = _one_line(exc)
            if exc.origin.startswith(("perf.", "@pytest.mark.perf")):
                # a newcomer writes the path from the project root, as on the command line
                problem += f" (paths in a test are relative to the test file, {_shown_path(Path(item.path))})"
        except PerfcheckError as exc:
            problem = _one_line(exc)
        if skip is not None:
            pytest.skip(skip)
        if problem is not None:  # outside the except block: no "during handling" chain
            pytest.fail(problem, pytrace=False)
        self._key = f"{item.nodeid}::{name}"
        self._state.register(self._key, self._run)
        return self

    def expect(self, pattern: str, *expectations: str) -> list["Check"]:
        """Check ``expectations`` on the kernels matching ``pattern``; fails the test with
        every failed check's observed, expected and baseline values (with units)."""
        from perfcheck import checking
        from perfcheck.errors import PerfcheckError

        if self._run is None:
            pytest.fail("perf.load(path) or perf.measure(fn, ...) before perf.expect(...)", pytrace=False)
        if not expectations:
            pytest.fail("perf.expect(pattern, 'metric >= value', ...) needs at least one expectation", pytrace=False)
        problem = None
        # The test's perf.expect(...) (or perf.run(..., expect=...)) line: where the
        # expectation is written, for CI annotations.
        caller = sys._getframe(1)
        while caller.f_back is not None and caller.f_globals.get("__name__") == __name__:
            caller = caller.f_back
        source = (caller.f_code.co_filename, caller.f_lineno)
        node = self._request.node
        self._run.record_command = self._state.record_command(self._state.target(Path(node.path), node.name))
        try:
            checks = checking.check(self._run, {pattern: list(expectations)}, source=source)
        except PerfcheckError as exc:
            pointer = getattr(exc, "pointer", None)
            problem = _one_line(exc) + (f"\n{pointer}" if pointer else "")
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        recorded = node.stash.setdefault(_ITEM_CHECKS, [])
        settings = self._run.settings.as_dict()
        if self._run.profile is not None:  # the controller (pytest-xdist) cannot measure it again
            from perfcheck.measure import profile_document

            settings["measured"] = profile_document(self._run.profile)
        recorded.extend((self._key, settings, c) for c in checks)
        bad = [c for c in checks if not c.passed]
        if bad:
            node.stash[_DETAILS] = failure_text(bad)
            pytest.fail(failure_line(bad), pytrace=False)
        return checks


@pytest.fixture
def perf(request: pytest.FixtureRequest) -> Perf:
    """perf.load(path, arch=None, peaks=None) or perf.measure(fn, *args, bytes=..., ...);
    perf.expect(pattern, *expectations)."""
    if not _state(request.config).enabled:
        pytest.skip(SKIP_REASON)
    return Perf(request)


# --- reports: checks travel on the test reports (pytest-xdist serialises plain data) ---------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if call.when == "call" and report.failed and item.stash.get(_DETAILS, None):
        report.sections.append(("perfcheck", item.stash[_DETAILS]))
    if call.when == "call" and item.stash.get(_ITEM_CHECKS, None):
        outcome = _xfail_outcome(report)
        report.perfcheck = [
            {"key": key, "settings": settings, "check": dataclasses.asdict(outcome(check))}
            for key, settings, check in item.stash[_ITEM_CHECKS]
        ]
    return report


def _xfail_outcome(report: pytest.TestReport) -> Callable[["Check"], "Check"]:
    """The checks of an ``xfail`` test as pytest counts the test: its failed checks
    are xfailed when pytest says xfailed, its passed ones xpassed when pytest says
    xpassed; a strict xfail that passed is a failure in pytest, and in perfcheck."""
    from perfcheck.model import FAILED, XFAILED, XPASSED

    reason = getattr(report, "wasxfail", None)
    if reason is None:
        if report.failed and "XPASS(strict)" in str(report.longrepr):
            return lambda c: dataclasses.replace(c, outcome=FAILED, message=f"[XPASS(strict)] {c.message}") \
                if c.passed else c
        return lambda c: c
    if report.skipped:  # xfailed
        return lambda c: dataclasses.replace(c, outcome=XFAILED) if not c.passed else c
    return lambda c: dataclasses.replace(c, outcome=XPASSED) if c.passed else c


class _Receiver:
    """Collects the checks on test reports: in the controller under pytest-xdist, in the
    one process otherwise (a plugin object, so the hook has the session's state)."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entries = getattr(report, "perfcheck", None)
        if not entries or report.when != "call":
            return
        for entry in entries:
            reported = self.state.reported.setdefault(entry["key"], _Reported(entry["settings"]))
            reported.checks.append(entry["check"])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = _state(config)
    if state.is_worker or not state.enabled or not state.reported:
        return
    from perfcheck import checking
    from perfcheck.config import SuiteSettings
    from perfcheck.errors import PerfcheckError
    from perfcheck.model import Check

    try:
        runs = []
        for key, reported in state.reported.items():
            run = state.runs.get(key)
            if run is None:  # pytest-xdist controller: the worker read it; read it again here
                profile = None
                if "measured" in reported.settings:  # perf.measure: the worker's measurement
                    from perfcheck.measure import profile_from_document

                    profile = profile_from_document(reported.settings["measured"])
                run = checking.prepare(SuiteSettings.from_dict(reported.settings), profile)
            run.checks = [Check(**c) for c in reported.checks]
            runs.append(run)
        settings = state.resolver().report_settings({})
        state.finished = checking.finish(runs, settings)
        if state.finished.history_error:  # every report was written; the history was not
            state.errors.append(f"perfcheck: error: {state.finished.history_error}")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
    except PerfcheckError as exc:
        state.errors.append(_one_line(exc))
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
    except MemoryError as exc:  # ArrowMemoryError too: a large store or profile, not a bug
        from perfcheck.errors import OutOfMemory

        state.errors.append(_one_line(OutOfMemory(exc)))
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = _state(config)
    if state.is_worker:
        return
    for line in state.errors:
        terminalreporter.write_line(line, red=True)
    run = state.finished
    if run is None:
        return
    from perfcheck.report.text import baseline_lines, checks_table, report_lines, totals

    terminalreporter.write_sep("=", "perfcheck summary")
    # pytest's own idea of the width (COLUMNS, else the terminal's); a pipe gets whole lines
    width = config.get_terminal_writer().fullwidth if terminalreporter.isatty else None
    for line in checks_table(run.checks, width=width):
        terminalreporter.write_line(line)
    for suite in run.suites:
        for notice in suite.notices:
            terminalreporter.write_line(f"perfcheck: warning: {notice}", yellow=True)
    for line in baseline_lines(run) + report_lines(run):
        terminalreporter.write_line(f"perfcheck: {line}")
    terminalreporter.write_line(f"perfcheck: {totals(run)}", bold=True)
    if os.environ.get("GITHUB_ACTIONS") == "true":  # annotations on the expectations' lines
        from perfcheck.report.github import annotations

        for line in annotations(run.checks):
            terminalreporter.write_line(line)
