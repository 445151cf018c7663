"""Settings for checks: the config file, the environment, the command line and pytest.

A config file is ``[tool.perfcheck]`` in a ``pyproject.toml``, or a ``perfcheck.toml``
(with the same ``[tool.perfcheck]`` tables, or the same keys at its top level)::

    [tool.perfcheck]
    device = "mi100"                      # or arch = "gfx908"
    peaks = ["peaks/mixbench-log.txt"]    # anything `perfcheck peaks` reads, or a machine file
    baseline_dir = "baselines"
    tolerances = { duration = "5%" }      # allowance for "metric <= baseline" without one
    history = "perf-history.sqlite"       # or "postgresql://user@host/db"; history_mode = "read-only"

    [tool.perfcheck.suites.stencil]
    profiles = ["profiles/results.csv"]
    # optional per suite: device/arch, peaks, machine, format, tolerances, skip_if_missing;
    # instead of profiles, command = "./app --n 1024" profiles it (perfcheck.run), with
    # profiler, launcher ("srun -n 4"), timeout (s), rank (check one rank), runs_dir

    [tool.perfcheck.suites.stencil.expect]
    "EOClover*FBCGPU*" = ["hbm_bw >= 85% of peak", "occupancy >= 40%"]

Relative paths in a config file are relative to the file's directory; on the command
line and in the environment, to the working directory.

Every value is looked up by one resolver, ``Resolver.get``, through layers in this
order (the first that has the key wins):

    marker/fixture  >  command line  >  environment (PERFCHECK_*)  >  pytest ini  >  config file  >  default

Inside the config file a suite's own key wins over the same key of ``[tool.perfcheck]``.
Each value keeps its origin ("--arch", "PERFCHECK_PEAKS", "pyproject.toml
[tool.perfcheck.suites.stencil] profiles"), and every error about it starts with
that origin. This module imports nothing heavy: expectations and metric names are
validated (which needs pandas) only when a suite is resolved with ``validate=True``.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfcheck.documents import toml_loads
from perfcheck.errors import InputError, UsageError
from perfcheck.storeurl import StoreLocation, StoreURL, is_url, store_location

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

CONFIG_FILE = "perfcheck.toml"
PYPROJECT = "pyproject.toml"
ENV_PREFIX = "PERFCHECK_"
# The origin of a suite's profiles when it has no files: measured in memory (perf.measure).
MEASURED = "measured in the test (perf.measure)"

__all__ = [
    "ConfigError", "ConfigFile", "Layer", "Resolver", "Settings", "SuiteSettings", "Value",
    "find_config", "read_config", "resolver", "parse_tolerance",
]


class ConfigError(UsageError):
    """A bad setting. ``str()`` is one line: where the value came from, then what is wrong."""

    def __init__(self, origin: str, what: str) -> None:
        self.origin, self.what = origin, what
        super().__init__(f"{origin}: {what}")


GIVEN_PROFILES = "profiles given"  # the origin of profiles passed to Resolver.suite


class MissingFile(ConfigError):
    """A path a setting names does not exist. ``path`` is where it was looked for, so
    a face that knows what the setting's paths are relative to (the pytest plugin:
    the test file) can say so."""

    def __init__(self, origin: str, path: Path) -> None:
        self.path = path
        super().__init__(origin, f"no such file {_shown(path)!r}")


@dataclass(frozen=True)
class Value:
    """A resolved setting and where it came from."""

    value: object
    origin: str


# --- converters: raw value (TOML, argparse, environment string) -> typed value ----------------
# Each takes (raw, origin, base directory for relative paths) and raises ConfigError(origin, ...).

def _string(raw: object, origin: str, base: Path) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(origin, f"expected a non-empty string, not {raw!r}")
    if "\0" in raw:  # no file name or setting can hold one; the OS would refuse it later, less clearly
        raise ConfigError(origin, f"contains a NUL byte: {raw[:60]!r}")
    return raw.strip()


def _strings(raw: object, origin: str, base: Path, *, sep: str = ",") -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [part for part in raw.split(sep) if part.strip()]
    if not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise ConfigError(origin, f"expected a list of strings, not {raw!r}")
    return tuple(_string(x, origin, base) for x in raw)


# Linux limits (limits.h): NAME_MAX bytes per component, PATH_MAX bytes in all. A longer
# path fails in the OS with ENAMETOOLONG wherever it is first touched (stat, open).
NAME_MAX, PATH_MAX = 255, 4096


def _path(raw: object, origin: str, base: Path) -> Path:
    if isinstance(raw, Path):
        raw = str(raw)
    path = Path(_string(raw, origin, base)).expanduser()
    path = path if path.is_absolute() else (base / path).resolve()
    encoded = os.fsencode(path)
    longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
    if len(encoded) >= PATH_MAX or longest > NAME_MAX:
        what = f"a name of {longest} bytes (at most {NAME_MAX})" if longest > NAME_MAX else \
            f"{len(encoded)} bytes (at most {PATH_MAX - 1})"
        raise ConfigError(origin, f"path too long: {what}: {str(raw)[:40]!r}...")
    return path


def _paths(raw: object, origin: str, base: Path) -> tuple[Path, ...]:
    """A list of paths; a single string is one path (a PERFCHECK_* variable may hold
    several separated by os.pathsep, as PATH does)."""
    if isinstance(raw, Path):
        raw = [str(raw)]
    elif isinstance(raw, str):
        raw = [part for part in raw.split(os.pathsep) if part.strip()] if os.pathsep in raw else [raw]
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ConfigError(origin, f"expected a list of paths, not {raw!r}")
    return tuple(_path(str(p) if isinstance(p, Path) else p, origin, base) for p in raw)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _bool(raw: object, origin: str, base: Path) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE + _FALSE:
        return raw.strip().lower() in _TRUE
    raise ConfigError(origin, f"expected true or false, not {raw!r}")


def parse_tolerance(raw: object, origin: str) -> float:
    """``"5%"`` -> 0.05. A bare number is refused: 5 and 0.05 would both be plausible."""
    if isinstance(raw, str) and raw.strip().endswith("%"):
        try:
            number = float(raw.strip()[:-1])
        except ValueError:
            number = float("nan")
        if number == number and 0 <= number < 1000:  # not NaN, a sane percentage
            return number / 100.0
    raise ConfigError(origin, f"tolerance must be a percentage such as \"5%\", not {raw!r}")


def _tolerances(raw: object, origin: str, base: Path) -> dict[str, float]:
    """{metric: "5%"}; in the environment ``duration=5%,hbm_bw=3%``. Metric aliases
    (occupancy, time, ...) are mapped to canonical names; unknown metrics are caught
    when a suite is validated."""
    from perfcheck.expect import ALIASES  # light: expect imports pandas only to list metrics

    if isinstance(raw, str):
        pairs: dict[str, object] = {}
        for part in filter(None, (p.strip() for p in raw.split(","))):
            name, sep, amount = part.partition("=")
            if not sep:
                raise ConfigError(origin, f"expected METRIC=PERCENT pairs such as 'duration=5%', not {part!r}")
            pairs[name.strip()] = amount.strip()
        raw = pairs
    if not isinstance(raw, Mapping):
        raise ConfigError(origin, f"expected a table of metric = \"N%\", not {raw!r}")
    return {ALIASES.get(str(k), str(k)): parse_tolerance(v, f"{origin}.{k}") for k, v in raw.items()}


def _aliases(raw: object, origin: str, base: Path) -> dict[str, str]:
    """{old kernel name: new kernel name}: a renamed kernel keeps its baseline
    (perfcheck.kernelkey; either name may be written in any spelling it has)."""
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) and isinstance(v, str) and k.strip() and v.strip()
                                                for k, v in raw.items()):
        raise ConfigError(origin, f"expected a table of \"old kernel name\" = \"new kernel name\", not {raw!r}")
    return {str(k): str(v) for k, v in raw.items()}


def _expect(raw: object, origin: str, base: Path) -> dict[str, tuple[str, ...]]:
    """{kernel pattern: [expectation, ...]} (a single string is one expectation)."""
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(origin, "expected a table of kernel pattern = [expectations], e.g. "
                          "\"EOClover*\" = [\"occupancy >= 40%\"]")
    out: dict[str, tuple[str, ...]] = {}
    for pattern, texts in raw.items():
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, (list, tuple)) or not texts or not all(isinstance(t, str) for t in texts):
            raise ConfigError(f"{origin} {pattern!r}", f"expected a list of expectation strings, not {texts!r}")
        out[str(pattern)] = tuple(texts)
    return out


def _command(raw: object, origin: str, base: Path) -> tuple[str, ...]:
    """A command to profile: a string (split like a shell would, without running one)
    or a list of arguments."""
    import shlex

    if isinstance(raw, str):
        try:
            argv = shlex.split(raw)
        except ValueError as exc:
            raise ConfigError(origin, f"cannot split the command {raw!r}: {exc}") from None
    elif isinstance(raw, (list, tuple)) and all(isinstance(a, (str, int, float)) for a in raw):
        argv = [str(a) for a in raw]
    else:
        raise ConfigError(origin, f"expected a command string or a list of arguments, not {raw!r}")
    if not argv:
        raise ConfigError(origin, "the command is empty")
    if any("\0" in a for a in argv):  # exec refuses it ("embedded null byte")
        raise ConfigError(origin, "the command contains a NUL byte")
    return tuple(argv)


def _seconds(raw: object, origin: str, base: Path) -> float:
    try:
        seconds = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(raw, bool) or not seconds > 0:
        raise ConfigError(origin, f"expected a positive number of seconds, not {raw!r}")
    return seconds


def _rank(raw: object, origin: str, base: Path) -> int:
    text = str(raw).strip() if isinstance(raw, (int, str)) and not isinstance(raw, bool) else ""
    if not text.isdigit():
        raise ConfigError(origin, f"expected an MPI rank (0, 1, ...), not {raw!r}")
    return int(text)


def _history(raw: object, origin: str, base: Path) -> StoreLocation:
    """A history store: a file path (SQLite), or a postgresql:// URL kept as a URL
    (``Path`` would fold its ``//`` and make it a file name)."""
    if isinstance(raw, StoreURL):
        return raw
    text = str(raw) if isinstance(raw, Path) else _string(raw, origin, base)
    if not is_url(text):
        return _path(text, origin, base)
    try:
        return store_location(text)
    except UsageError as exc:
        raise ConfigError(origin, str(exc)) from None


HISTORY_MODES = ("append", "read-only")


def _history_mode(raw: object, origin: str) -> str:
    """append: the runner appends each run to the store; read-only: the gate and
    detect read it, nothing is written (pull-request jobs naming the nightly store)."""
    text = raw.strip().lower() if isinstance(raw, str) else raw
    if text not in HISTORY_MODES:
        raise ConfigError(origin, f"expected \"append\" or \"read-only\", not {raw!r}")
    return str(text)


# Key -> converter. Every layer uses the same converters, so "5%" means the same on the
# command line, in PERFCHECK_TOLERANCES and in the config file.
def _flavour(raw: object, origin: str) -> str:
    """junit_flavour: the JUnit shape (see perfcheck/report/junit.py)."""
    if raw not in ("xunit", "gitlab"):
        raise ConfigError(origin, f"expected \"xunit\" or \"gitlab\", not {raw!r}")
    return str(raw)


_CONVERT: dict[str, Callable[[object, str, Path], object]] = {
    "config": _path,
    "arch": _string,
    "peaks": _paths,
    "machine": _path,
    "format": _string,
    "baseline_dir": _path,
    "tolerances": _tolerances,
    "aliases": _aliases,
    "update_baseline": _bool,
    "strict_baseline": _bool,
    "suites": _strings,
    "profiles": _paths,
    "expect": _expect,
    "skip_if_missing": _bool,
    "junit": _path,
    "markdown": _path,
    "json": _path,
    "openmetrics": _path,
    "roofline": _path,
    "junit_flavour": lambda raw, origin, base: _flavour(raw, origin),
    # profiling a command instead of reading profiles (perfcheck.run)
    "command": _command,
    "profiler": _string,
    "clock_control": _string,
    "launcher": _string,
    "timeout": _seconds,
    "rank": _rank,
    "runs_dir": _path,
    # the history store (perfcheck.history): the gate reads it, the runner appends the run
    "history": _history,
    "history_mode": lambda raw, origin, base: _history_mode(raw, origin),
    # the accepted-regressions file (perfcheck.history.accepted); default baselines/accepted.toml
    "accepted": _path,
}
# Keys a config file may set, at the top of [tool.perfcheck] and in a suite.
GLOBAL_KEYS = ("arch", "peaks", "machine", "format", "baseline_dir", "tolerances", "aliases", "strict_baseline",
               "junit", "markdown", "json", "openmetrics", "roofline", "junit_flavour",
               "profiler", "clock_control", "launcher", "timeout", "runs_dir", "history", "history_mode", "accepted")
SUITE_KEYS = ("profiles", "expect", "arch", "peaks", "machine", "format", "tolerances", "aliases", "skip_if_missing",
              "command", "profiler", "clock_control", "launcher", "timeout", "rank", "runs_dir")
# Written names that mean a canonical key ("device = mi100" is "arch": lookup takes both).
_SYNONYMS = {"device": "arch", "baseline-dir": "baseline_dir", "skip-if-missing": "skip_if_missing",
             "strict-baseline": "strict_baseline",
             "history-mode": "history_mode"}
# PERFCHECK_<NAME> -> key. Other PERFCHECK_* variables (PERFCHECK_DEBUG, ...) belong to others.
ENVIRONMENT = {
    "CONFIG": "config", "ARCH": "arch", "DEVICE": "arch", "PEAKS": "peaks", "MACHINE": "machine",
    "FORMAT": "format", "BASELINE_DIR": "baseline_dir", "TOLERANCES": "tolerances",
    "UPDATE_BASELINE": "update_baseline", "STRICT_BASELINE": "strict_baseline", "SUITES": "suites", "JUNIT": "junit",
    "MARKDOWN": "markdown", "JSON": "json", "OPENMETRICS": "openmetrics", "ROOFLINE": "roofline",
    "JUNIT_FLAVOUR": "junit_flavour",
    "PROFILER": "profiler", "CLOCK_CONTROL": "clock_control", "LAUNCHER": "launcher", "TIMEOUT": "timeout",
    "RUNS_DIR": "runs_dir",
    "HISTORY": "history", "HISTORY_MODE": "history_mode", "ACCEPTED": "accepted",
}


@dataclass
class Layer:
    """One source of settings: ``values`` apply everywhere; ``suites`` only to the named
    suite (the config file's ``[tool.perfcheck.suites.NAME]``), and win over ``values``."""

    name: str
    values: dict[str, Value] = field(default_factory=dict)
    suites: dict[str, dict[str, Value]] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, name: str, raw: Mapping[str, object], origin: Callable[[str], str], base: Path) -> "Layer":
        """Convert ``raw`` (None values are "not given") with each key's converter."""
        layer = cls(name)
        for key, value in raw.items():
            key = _SYNONYMS.get(key, key)
            if value is None or key not in _CONVERT:
                continue
            layer.values[key] = Value(_CONVERT[key](value, origin(key), base), origin(key))
        return layer


def ci_default_layer(env: Mapping[str, str]) -> Layer:
    """The defaults that depend on where perfcheck runs: with ``CI`` set to a true
    value (GitHub Actions, GitLab CI, Buildkite, CircleCI, Travis, Azure Pipelines
    and most others set CI=true), baselines are strict: a missing or re-fingerprinted
    baseline is an error, never a silent new recording (as ``jest --ci`` never
    writes a snapshot). Below every other layer: ``--no-strict-baseline``,
    PERFCHECK_STRICT_BASELINE=0 or ``strict_baseline = false`` still opt out."""
    layer = Layer("ci")
    value = env.get("CI")
    if value is not None and value.strip().lower() in _TRUE:
        layer.values["strict_baseline"] = Value(True, f"CI={value.strip()}")
    return layer


def environment_layer(env: Mapping[str, str], base: Path) -> Layer:
    raw = {}
    names = {}
    for suffix, key in ENVIRONMENT.items():
        value = env.get(ENV_PREFIX + suffix)
        if value is not None and value != "" and key not in raw:
            raw[key], names[key] = value, ENV_PREFIX + suffix
    return Layer.from_mapping("environment", raw, lambda key: names[key], base)


# --- the config file ----------------------------------------------------------------------

@dataclass(frozen=True)
class ConfigFile:
    """The perfcheck table of one file. ``prefix`` is the TOML path of that table
    ("tool.perfcheck", or "" for keys at the top of a perfcheck.toml)."""

    path: Path
    table: Mapping[str, object]
    prefix: str
    text: str = ""  # the file's text: tomllib keeps no positions, expectation_lines finds them

    @property
    def display(self) -> str:
        """The file as errors name it: relative to the working directory when under it."""
        try:
            return str(self.path.relative_to(Path.cwd()))
        except ValueError:
            return str(self.path)

    def table_name(self, suite: str | None = None, sub: str | None = None) -> str:
        """``[tool.perfcheck.suites.stencil.expect]``; "" for the top of a bare perfcheck.toml."""
        parts = [self.prefix, f"suites.{_toml_key(suite)}" if suite is not None else "", sub or ""]
        parts = [p for p in parts if p]
        return f"[{'.'.join(parts)}]" if parts else ""

    def origin(self, key: str, suite: str | None = None) -> str:
        """``pyproject.toml [tool.perfcheck.suites.stencil] profiles``; the expectations
        are named by their table, ``... [tool.perfcheck.suites.stencil.expect]``."""
        if key == "expect" and suite is not None:
            return f"{self.display} {self.table_name(suite, 'expect')}"
        return " ".join(p for p in (self.display, self.table_name(suite), key) if p)

    def suite_names(self) -> list[str]:
        return list(self.suites_table())

    def expectation_lines(self, suite: str) -> dict[str, dict[str, int]]:
        """{pattern: {expectation: 1-based line}} of a suite's expectations, for reports
        that point at them (pytest's JUnit, GitHub annotations). tomllib keeps no
        positions, so the text is searched: the suite's first table header, then each
        pattern's key, then the expectation as a TOML string after it. Not found: the
        pattern's line, else the header's; absent when the suite has no header."""
        body = self.suites_table().get(suite, {})
        expect = body.get("expect", {}) if isinstance(body, Mapping) else {}
        if not isinstance(expect, Mapping) or not self.text:
            return {}
        lines = self.text.splitlines()
        keys = {suite, f'"{suite}"', f"'{suite}'"}
        prefix = f"{self.prefix}.suites." if self.prefix else "suites."
        start = None
        for number, line in enumerate(lines):
            head = line.strip().lstrip("[").split("]", 1)[0].replace(" ", "")
            if line.strip().startswith("[") and head.startswith(prefix):
                rest = head[len(prefix):]
                if any(rest == k or rest.startswith(k + ".") for k in keys):
                    start = number
                    break
        if start is None:
            return {}

        def find(needles: Sequence[str], frm: int) -> int | None:
            for number in range(frm, len(lines)):
                if any(n in lines[number] for n in needles):
                    return number
            return None

        out: dict[str, dict[str, int]] = {}
        for pattern, texts in expect.items():
            texts = [texts] if isinstance(texts, str) else texts
            if not isinstance(texts, (list, tuple)):
                continue
            at = find([f"{_json_quote(pattern)}", f"'{pattern}'", f"{pattern} ="], start)
            frm = at if at is not None else start
            out[str(pattern)] = {}
            for text in texts:
                if isinstance(text, str):
                    hit = find([_json_quote(text), f"'{text}'"], frm)
                    out[str(pattern)][text] = (hit if hit is not None else frm) + 1
        return out

    def suites_table(self) -> Mapping[str, Mapping[str, object]]:
        suites = self.table.get("suites", {})
        if not isinstance(suites, Mapping):
            raise ConfigError(self.origin("suites"), "expected tables [suites.NAME]")
        for name, body in suites.items():
            if not isinstance(body, Mapping):
                raise ConfigError(self.origin("suites"), f"suite {name!r} must be a table ([suites.{name}])")
        return suites

    def layer(self) -> Layer:
        """The file's settings as a layer, checked for unknown keys (with a suggestion)."""
        base = self.path.parent
        top = {k: v for k, v in self.table.items() if k != "suites"}
        _check_keys(top, GLOBAL_KEYS, lambda key: self.origin(key))
        layer = Layer.from_mapping("config", top, lambda key: self.origin(key), base)
        for name, body in self.suites_table().items():
            origin: Callable[[str], str] = lambda key, name=name: self.origin(key, name)  # noqa: E731
            _check_keys(body, SUITE_KEYS, origin)
            layer.suites[name] = Layer.from_mapping("config", body, origin, base).values
        return layer


def _json_quote(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)


def _toml_key(key: str | None) -> str:
    key = key or ""
    return key if key.replace("_", "").replace("-", "").isalnum() else f'"{key}"'


def _check_keys(table: Mapping[str, object], allowed: Sequence[str], origin: Callable[[str], str]) -> None:
    known = [*allowed, *(s for s, k in _SYNONYMS.items() if k in allowed)]
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"
            raise ConfigError(origin(key), f"unknown key{hint}")
    both = [s for s, k in _SYNONYMS.items() if s in table and k in table]
    if both:
        raise ConfigError(origin(both[0]), f"give either {both[0]!r} or {_SYNONYMS[both[0]]!r}, not both")


def read_config(path: str | Path) -> ConfigFile:
    """Read a pyproject.toml ([tool.perfcheck]) or perfcheck.toml. Errors name the file."""
    path = Path(path).expanduser().resolve()
    shown = _shown(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(shown, "no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(shown, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        doc = toml_loads(text, shown)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(shown, f"not valid TOML: {exc}") from None
    tool = doc.get("tool", {})
    if isinstance(tool, Mapping) and "perfcheck" in tool:
        table, prefix = tool["perfcheck"], "tool.perfcheck"
    elif path.name == PYPROJECT:
        raise ConfigError(shown, "has no [tool.perfcheck] table")
    else:  # a perfcheck.toml may hold the keys at its top level
        table, prefix = {k: v for k, v in doc.items() if k != "tool"}, ""
    if not isinstance(table, Mapping):
        raise ConfigError(shown, "[tool.perfcheck] must be a table")
    return ConfigFile(path=path, table=table, prefix=prefix, text=text)


def has_perfcheck_table(path: Path) -> bool:
    """Whether ``path`` is a config file perfcheck should use (never raises)."""
    if path.name == CONFIG_FILE:
        return path.is_file()
    if path.name != PYPROJECT or not path.is_file():
        return False
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    try:
        doc = toml_loads(text, path)
    except (tomllib.TOMLDecodeError, InputError):
        # broken, but meant for perfcheck: let read_config say what is wrong
        return "[tool.perfcheck" in text
    tool = doc.get("tool")
    return isinstance(tool, Mapping) and "perfcheck" in tool


# Files that mark a project's root for pytest (its ini files) or perfcheck.
ANCHOR_FILES = (CONFIG_FILE, PYPROJECT, "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg")


def anchor_dir(start: Path) -> Path:
    """The directory a test's default baselines hang off when no perfcheck config
    names them: the nearest directory from ``start`` (the test file's) up holding a
    perfcheck config or a pytest ini file, else ``start`` itself. Never the working
    directory: ``pytest --perf`` inside a project and ``pytest --perf project`` from
    its parent must find the same baselines (else a new one is recorded, silently,
    and a slower kernel passes)."""
    start = Path(start).resolve()
    for directory in (start, *start.parents):
        if any((directory / name).is_file() for name in ANCHOR_FILES):
            return directory
    return start


def find_config(start: Path, stop: Path | None = None) -> Path | None:
    """The nearest perfcheck.toml, or pyproject.toml with [tool.perfcheck], in ``start``
    or its parents (up to ``stop`` inclusive, when given)."""
    start = start.resolve()
    for directory in (start, *start.parents):
        for name in (CONFIG_FILE, PYPROJECT):
            if has_perfcheck_table(directory / name):
                return directory / name
        if stop is not None and directory == stop.resolve():
            break
    return None


# --- resolved settings ----------------------------------------------------------------------

@dataclass(frozen=True)
class SuiteSettings:
    """Everything needed to check one suite, resolved. Paths are absolute."""

    name: str
    profiles: tuple[Path, ...]
    expect: Mapping[str, tuple[str, ...]]
    arch: str | None
    peaks: tuple[Path, ...]
    format: str | None
    tolerances: Mapping[str, float]
    baseline_dir: Path
    update_baseline: bool
    origins: Mapping[str, str] = field(default_factory=dict)  # key -> where its value came from
    # A missing or re-fingerprinted baseline is an ERROR check, never recorded
    # (CI=true, --strict-baseline, strict_baseline = true); see perfcheck.checking.
    strict_baseline: bool = False
    # Where the expectations were written, for reports that point at them:
    # the config file and {pattern: {expectation: line}} (empty when not from a file).
    config_file: Path | None = None
    expect_lines: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    missing: str | None = None  # skip_if_missing: why the suite is skipped (a profile is absent)
    # A suite with a command profiles it (perfcheck.run) and checks what it measured.
    command: tuple[str, ...] | None = None
    profiler: str | None = None  # rocprofv3 | rocprof | ncu; None: the installed one
    clock_control: str | None = None  # ncu --clock-control: base | none; None: base under ncu
    launcher: str | None = None  # "srun -n 4": one profiler per rank
    timeout: float | None = None  # seconds for the whole run
    rank: int | None = None  # check this rank only (None: all ranks together)
    runs_dir: Path | None = None  # parent of the run directories (default: perfcheck-runs/ by the baselines)
    workdir: Path | None = None  # where the command runs (the config file's directory)
    aliases: Mapping[str, str] = field(default_factory=dict)  # old kernel name -> new (baselines follow)
    history: StoreLocation | None = None  # the history store the gate reads (perfcheck.history.gate)
    history_read_only: bool = False  # history_mode read-only: the gate opens the store so (no migration either)
    # the accepted-regressions file the gate reads and baseline updates append to
    # (perfcheck.history.accepted); None: accepted.toml in baseline_dir
    accepted: Path | None = None

    @property
    def accepted_file(self) -> Path:
        return self.accepted if self.accepted is not None else self.baseline_dir / "accepted.toml"

    def origin(self, key: str) -> str:
        return self.origins.get(key, "default")

    def as_dict(self) -> dict[str, object]:
        """Plain data (for pytest-xdist: workers send it to the controller)."""
        return {
            "name": self.name, "profiles": [str(p) for p in self.profiles],
            "expect": {k: list(v) for k, v in self.expect.items()}, "arch": self.arch,
            "peaks": [str(p) for p in self.peaks], "format": self.format, "tolerances": dict(self.tolerances),
            "baseline_dir": str(self.baseline_dir), "update_baseline": self.update_baseline,
            "strict_baseline": self.strict_baseline,
            "config_file": str(self.config_file) if self.config_file else None,
            "expect_lines": {k: dict(v) for k, v in self.expect_lines.items()},
            "origins": dict(self.origins), "missing": self.missing,
            "command": list(self.command) if self.command is not None else None, "profiler": self.profiler,
            "clock_control": self.clock_control,
            "launcher": self.launcher, "timeout": self.timeout, "rank": self.rank,
            "runs_dir": str(self.runs_dir) if self.runs_dir else None, "workdir": str(self.workdir) if self.workdir else None,
            "aliases": dict(self.aliases),
            # a URL masked: this dict travels in pytest reports (pytest-xdist, report logs);
            # whoever reads it back renders the run, the store is opened by its own settings
            "history": str(self.history) if self.history else None,
            "history_read_only": self.history_read_only,
            "accepted": str(self.accepted) if self.accepted else None,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, object]) -> "SuiteSettings":
        return cls(
            name=str(doc["name"]), profiles=tuple(Path(p) for p in doc["profiles"]),  # type: ignore[union-attr]
            expect={k: tuple(v) for k, v in doc["expect"].items()},  # type: ignore[union-attr]
            arch=doc["arch"], peaks=tuple(Path(p) for p in doc["peaks"]),  # type: ignore[arg-type,union-attr]
            format=doc["format"], tolerances=dict(doc["tolerances"]),  # type: ignore[arg-type]
            baseline_dir=Path(doc["baseline_dir"]), update_baseline=bool(doc["update_baseline"]),  # type: ignore[arg-type]
            strict_baseline=bool(doc.get("strict_baseline", False)),
            config_file=Path(doc["config_file"]) if doc.get("config_file") else None,  # type: ignore[arg-type]
            expect_lines={k: dict(v) for k, v in (doc.get("expect_lines") or {}).items()},  # type: ignore[union-attr]
            origins=dict(doc["origins"]), missing=doc["missing"],  # type: ignore[arg-type]
            command=tuple(doc["command"]) if doc.get("command") else None,  # type: ignore[arg-type]
            profiler=doc.get("profiler"), clock_control=doc.get("clock_control"),  # type: ignore[arg-type]
            launcher=doc.get("launcher"), timeout=doc.get("timeout"),  # type: ignore[arg-type]
            rank=doc.get("rank"), runs_dir=Path(doc["runs_dir"]) if doc.get("runs_dir") else None,  # type: ignore[arg-type]
            workdir=Path(doc["workdir"]) if doc.get("workdir") else None,  # type: ignore[arg-type]
            aliases=dict(doc.get("aliases") or {}),  # type: ignore[arg-type]
            history=store_location(str(doc["history"])) if doc.get("history") else None,
            history_read_only=bool(doc.get("history_read_only", False)),
            accepted=Path(doc["accepted"]) if doc.get("accepted") else None,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class Settings:
    """A run: the selected suites and where to write reports (None: not written)."""

    suites: Mapping[str, SuiteSettings]
    config: Path | None
    junit: Path | None = None
    markdown: Path | None = None
    json: Path | None = None
    openmetrics: Path | None = None
    roofline: Path | None = None  # a directory: <suite>.png / .svg
    junit_flavour: str = "xunit"  # "xunit" (junit-10.xsd valid) | "gitlab" (file/line on testcases)
    write_baselines: bool = True  # False in pytest-xdist workers: only the controller writes
    history: StoreLocation | None = None  # the history store this run is appended to (perfcheck.history)
    history_mode: str = "append"  # "read-only": the gate reads the store, the run is not appended
    origins: Mapping[str, str] = field(default_factory=dict)

    @property
    def reports(self) -> dict[str, Path]:
        return {k: p for k in ("junit", "markdown", "json", "openmetrics", "roofline")
                if (p := getattr(self, k)) is not None}


class Resolver:
    """The one place that decides which value wins (see the module docstring)."""

    def __init__(self, layers: Sequence[Layer], config: ConfigFile | None, cwd: Path,
                 anchor: Path | None = None) -> None:
        self.layers = list(layers)
        self.config = config
        self.cwd = cwd
        self.anchor = anchor  # base of default paths when there is no config file (see anchor_dir)

    def with_layer(self, layer: Layer) -> "Resolver":
        """A resolver with ``layer`` on top (a pytest marker, a fixture call)."""
        return Resolver([layer, *self.layers], self.config, self.cwd, self.anchor)

    def get(self, key: str, suite: str | None = None) -> Value | None:
        for layer in self.layers:
            if suite is not None and key in layer.suites.get(suite, {}):
                return layer.suites[suite][key]
            if key in layer.values:
                return layer.values[key]
        return None

    def _default_base(self) -> Path:
        """Where default paths (``baselines/``) live: the config file's directory, else
        the anchor (a test's project directory), else the working directory."""
        if self.config is not None:
            return self.config.path.parent
        return self.anchor if self.anchor is not None else self.cwd

    def accepted_file(self) -> Path:
        """The accepted-regressions file: the ``accepted`` setting, else accepted.toml in
        the baseline directory (``perfcheck history accept`` and ``detect``)."""
        value = self.get("accepted")
        if value is not None:
            return value.value  # type: ignore[return-value]
        base = self.get("baseline_dir")
        folder = base.value if base is not None else (self._default_base() / "baselines").resolve()
        return folder / "accepted.toml"  # type: ignore[operator]

    def suite_names(self) -> list[str]:
        names = list(self.config.suite_names()) if self.config is not None else []
        for layer in self.layers:
            names += [n for n in layer.suites if n not in names]
        return names

    def suite(
        self,
        name: str,
        *,
        profiles: Sequence[str | Path] | None = None,
        expect: Mapping[str, Sequence[str]] | None = None,
        validate: bool = True,
        measured: bool = False,
        profiles_origin: str = GIVEN_PROFILES,
    ) -> SuiteSettings:
        """Resolve suite ``name``. ``profiles``/``expect`` define an ad-hoc suite (the pytest
        fixture, ``perfcheck check PATH --expect ...``) when the config has none by that name;
        ``profiles_origin`` says where given ``profiles`` came from (``perf.load(...)``).
        ``validate`` parses the expectations and checks the device and files (needs pandas for
        the metric list: the pytest plugin validates only when --perf is given). ``measured``:
        the suite has no profile files, its Profile is measured in memory (``perf.measure``)."""
        origins: dict[str, str] = {}

        def get(key: str, default: object = None) -> object:
            value = self.get(key, name)
            if value is None:
                return default
            origins[key] = value.origin
            return value.value

        if measured:
            origins["profiles"] = MEASURED
            profile_paths: tuple[Path, ...] = ()
        elif profiles is not None:
            origins["profiles"] = profiles_origin
            profile_paths = _paths([str(p) for p in profiles], "profile path", self.cwd)
        else:
            profile_paths = get("profiles")  # type: ignore[assignment]
            if not profile_paths and self.get("command", name) is not None:
                profile_paths = ()  # measured by running the command (perfcheck.run)
            elif not profile_paths:
                known = self.suite_names()
                where = self.config.display if self.config is not None else "the command line"
                if name not in known:
                    close = difflib.get_close_matches(name, known, n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else (f"; suites: {', '.join(known)}" if known else "")
                    raise ConfigError(where, f"no suite {name!r}{hint}")
                raise ConfigError(self._origin_for("profiles", name),
                                  "a suite needs profiles = [\"...\"] (or a command = \"...\" to profile)")
        if expect is not None:
            origins["expect"] = "expectations given"
            expectations = {str(k): tuple(v) for k, v in expect.items()}
        else:
            expectations = get("expect", {})  # type: ignore[assignment]
            origins.setdefault("expect", self._origin_for("expect", name))
        machine = get("machine")
        peaks = tuple(get("peaks", ()))  # type: ignore[arg-type]
        if machine is not None:
            peaks = (*peaks, machine)  # type: ignore[assignment]
        arch = get("arch")
        baseline_dir = get("baseline_dir") or (self._default_base() / "baselines").resolve()
        settings = SuiteSettings(
            name=name,
            profiles=profile_paths,  # type: ignore[arg-type]
            expect=expectations,
            arch=arch,  # type: ignore[arg-type]
            peaks=peaks,  # type: ignore[arg-type]
            format=get("format"),  # type: ignore[arg-type]
            tolerances=dict(get("tolerances", {})),  # type: ignore[arg-type]
            baseline_dir=baseline_dir,  # type: ignore[arg-type]
            update_baseline=bool(get("update_baseline", False)),
            strict_baseline=bool(get("strict_baseline", False)),
            origins=origins,
            command=get("command"),  # type: ignore[arg-type]
            profiler=get("profiler"),  # type: ignore[arg-type]
            clock_control=get("clock_control"),  # type: ignore[arg-type]
            launcher=get("launcher"),  # type: ignore[arg-type]
            timeout=get("timeout"),  # type: ignore[arg-type]
            rank=get("rank"),  # type: ignore[arg-type]
            runs_dir=get("runs_dir"),  # type: ignore[arg-type]
            aliases=dict(get("aliases", {})),  # type: ignore[arg-type]
            history=get("history"),  # type: ignore[arg-type]
            history_read_only=getattr(self.get("history_mode", name), "value", None) == "read-only",
            accepted=get("accepted"),  # type: ignore[arg-type]
        )
        if settings.command is not None:
            settings = _replace(settings, workdir=self._default_base())
        if self.config is not None and expect is None and origins.get("expect") == self.config.origin("expect", name):
            settings = _replace(settings, config_file=self.config.path,
                                expect_lines=self.config.expectation_lines(name))
        skip_if_missing = bool(get("skip_if_missing", False))
        missing = [p for p in settings.profiles if not p.exists()]
        if missing and skip_if_missing:
            return _replace(settings, missing=f"profile not available: {missing[0]} (skip_if_missing)")
        if validate:
            _validate(settings, missing)
        return settings

    def _origin_for(self, key: str, suite: str) -> str:
        if self.config is not None:
            return self.config.origin(key, suite)
        return f"suite {suite!r} {key}"

    def settings(self, suites: Sequence[str] | None = None, *, validate: bool = True,
                 profiles: Sequence[str | Path] | None = None,
                 expect: Mapping[str, Sequence[str]] | None = None) -> Settings:
        """The run: ``suites`` (else the ``suites`` setting, else every suite of the config).
        ``profiles``/``expect`` replace those of the single selected suite, or make an
        ad-hoc suite named "check" when there is no config suite."""
        selected = self.get("suites")
        names = list(suites) if suites else list(selected.value) if selected else self.suite_names()  # type: ignore[arg-type]
        if not names and (profiles or expect):
            names = ["check"]
        if not names:
            where = self.config.display if self.config is not None else "no config file found"
            raise ConfigError(where, "no suites to check: add [tool.perfcheck.suites.NAME] with profiles and expect, "
                              "or give PATH... with --expect PATTERN EXPECTATION")
        if (profiles or expect) and len(names) > 1:
            raise ConfigError("PATH/--expect", f"apply to one suite; the config has {len(names)} "
                              f"({', '.join(names)}): choose one with --suite")
        suites_out = {n: self.suite(n, profiles=profiles or None, expect=expect or None, validate=validate) for n in names}
        return self.report_settings(suites_out)

    def report_settings(self, suites: Mapping[str, SuiteSettings]) -> Settings:
        """Settings for ``suites`` with the report outputs this resolver gives."""
        origins: dict[str, str] = {}
        outputs: dict[str, Path | None] = {}
        for key in ("junit", "markdown", "json", "openmetrics", "roofline", "history"):
            value = self.get(key)
            outputs[key] = value.value if value is not None else None  # type: ignore[assignment]
            if value is not None:
                origins[key] = value.origin
        flavour = self.get("junit_flavour")
        mode = self.get("history_mode")
        if mode is not None:
            origins["history_mode"] = mode.origin
        return Settings(suites=dict(suites), config=self.config.path if self.config else None,
                        origins=origins, junit_flavour=str(flavour.value) if flavour is not None else "xunit",
                        history_mode=str(mode.value) if mode is not None else "append",
                        **outputs)  # type: ignore[arg-type]


def _replace(settings: SuiteSettings, **changes: object) -> SuiteSettings:
    from dataclasses import replace

    return replace(settings, **changes)  # type: ignore[arg-type]


def _validate(settings: SuiteSettings, missing: Sequence[Path]) -> None:
    """Fail early, naming the origin: absent files, an unknown device, a malformed
    expectation or tolerance metric (before any profile is read)."""
    if settings.command is not None and settings.profiles and settings.origin("profiles") != MEASURED:
        raise ConfigError(settings.origin("command"), "give either profiles (files to read) or a command (to profile), "
                          "not both")
    if settings.profiler is not None:
        from perfcheck.run.profilers import PROFILERS

        if settings.profiler not in PROFILERS:
            raise ConfigError(settings.origin("profiler"), f"unknown profiler {settings.profiler!r}; "
                              f"choose one of: {', '.join(PROFILERS)}")
    if settings.clock_control is not None:
        from perfcheck.run.profilers import CLOCK_CONTROLS

        if settings.clock_control not in CLOCK_CONTROLS:
            raise ConfigError(settings.origin("clock_control"), f"clock_control must be one of "
                              f"{', '.join(CLOCK_CONTROLS)}, not {settings.clock_control!r}")
        if settings.profiler not in (None, "ncu"):
            raise ConfigError(settings.origin("clock_control"), f"clock_control is an ncu setting; "
                              f"profiler {settings.profiler} does not lock clocks")
    if not settings.profiles and settings.origin("profiles") != MEASURED and settings.command is None:
        raise ConfigError(settings.origin("profiles"), "no profiles given")
    if missing:
        raise MissingFile(settings.origin("profiles"), missing[0])
    for peak in settings.peaks:
        if not peak.exists():
            key = "machine" if "machine" in settings.origins and peak == settings.peaks[-1] else "peaks"
            raise MissingFile(settings.origin(key), peak)
    if settings.arch is not None:
        from perfcheck.arch import lookup

        try:
            lookup(settings.arch)
        except UsageError as exc:
            raise ConfigError(settings.origin("arch"), str(exc)) from None
    from perfcheck.expect import ExpectationError, known_metrics, parse

    if not settings.expect and settings.origins.get("expect") != "expectations given":
        raise ConfigError(settings.origin("expect"), "no expectations: add a table of kernel pattern = [\"...\"]")
    for pattern, texts in settings.expect.items():
        for text in texts:
            try:
                parse(text)
            except ExpectationError as exc:
                raise ConfigError(f"{settings.origin('expect')} {pattern!r}", str(exc)) from None
    known = known_metrics()
    for metric in settings.tolerances:
        if metric not in known:
            close = difflib.get_close_matches(metric, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(settings.origin("tolerances"), f"unknown metric {metric!r}{hint}")


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def resolver(
    *,
    cli: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    ini: Layer | None = None,
    config: str | Path | None = None,
    cwd: str | Path | None = None,
    discover: bool = True,
    overrides: Layer | None = None,
    search_from: str | Path | None = None,
    cli_prefix: str = "--",
) -> Resolver:
    """Build the resolver: ``cli`` maps keys to values as argparse gives them (None: not
    given; each origin is the option, ``--`` + key with dashes); ``env`` defaults to
    os.environ; ``config`` is a file given by the caller (else --config / PERFCHECK_CONFIG
    / the ini's, else the nearest config file from ``search_from`` (default ``cwd``) up when
    ``discover``). ``cli_prefix`` names command-line origins ("--perf-" in pytest)."""
    base = Path(cwd).resolve() if cwd is not None else Path.cwd()
    env = os.environ if env is None else env
    cli_layer = Layer.from_mapping("cli", dict(cli or {}), lambda key: cli_prefix + key.replace("_", "-"), base)
    env_layer = environment_layer(env, base)
    layers = [layer for layer in (overrides, cli_layer, env_layer, ini) if layer is not None]
    probe = Resolver(layers, None, base)
    chosen = probe.get("config")
    path: Path | None
    if config is not None:
        path = Path(config).resolve()
    elif chosen is not None:
        path = chosen.value  # type: ignore[assignment]
        if path.is_dir():  # --config DIR: its perfcheck.toml, or pyproject.toml with [tool.perfcheck]
            found = next((path / n for n in (CONFIG_FILE, PYPROJECT) if has_perfcheck_table(path / n)), None)
            if found is None:
                raise ConfigError(chosen.origin, f"{_shown(path)!r} is a directory without {CONFIG_FILE} or "
                                  f"{PYPROJECT} with [tool.perfcheck]: name the config file")
            path = found
        if not path.is_file():
            raise ConfigError(chosen.origin, f"no such config file {_shown(path)!r}")
    else:
        path = find_config(Path(search_from) if search_from is not None else base) if discover else None
    config_file = read_config(path) if path is not None else None
    if config_file is not None:
        layers.append(config_file.layer())
    layers.append(ci_default_layer(env))
    anchor = anchor_dir(Path(search_from)) if search_from is not None and config_file is None else None
    return Resolver(layers, config_file, base, anchor)

