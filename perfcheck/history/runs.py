"""One run's identity and values: who ran it, when and where (from git and the CI
environment), and reading a JSON results file (``check --json``) into what the
store keeps.

Run provenance, first found wins:

* commit: ``GITHUB_SHA``, ``CI_COMMIT_SHA`` (GitLab), ``PERFCHECK_COMMIT``, else
  ``git rev-parse HEAD`` in the working directory;
* branch: ``GITHUB_HEAD_REF`` (a pull request's branch), ``GITHUB_REF_NAME``,
  ``CI_COMMIT_REF_NAME``, ``PERFCHECK_BRANCH``, else git's current branch;
* CI job: GitHub Actions (``GITHUB_RUN_ID``/``GITHUB_RUN_ATTEMPT``, URL from
  ``GITHUB_SERVER_URL``/``GITHUB_REPOSITORY``), GitLab (``CI_JOB_ID``, ``CI_JOB_URL``),
  Slurm (``SLURM_JOB_ID``, array jobs as ``ARRAYJOB_TASK``, ``SLURM_CLUSTER_NAME``).

A results file written by an older perfcheck (no ``run`` block) still imports: its
run id is a hash of the file's bytes (so importing it twice adds it once) and its
time the file's modification time, with a notice.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.documents import json_loads
from perfcheck.errors import InputError
from perfcheck.history.store import MAX_TIME, MIN_TIME, Machine, Result, RunRecord, ValueRows, finite, machine_key

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis


def _env(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def _git(*args: str, cwd: Path | None = None) -> str | None:
    # subprocess, secrets, socket and hashlib are imported where they are used: reading a
    # results file (`history add`) needs none of them, and they were 10 ms of its start
    import subprocess

    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out and out != "HEAD" else None


def new_run_id(now: float) -> str:
    """Sortable by time, unique across hosts: ``20260124T031500Z-<12 hex>``."""
    import secrets

    stamp = dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(6)}"


def ci_job(env: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """(system, job id, URL) of the CI job or batch job this process runs in."""
    if env.get("GITHUB_ACTIONS") == "true" or env.get("GITHUB_RUN_ID"):
        run_id = env.get("GITHUB_RUN_ID")
        attempt = env.get("GITHUB_RUN_ATTEMPT")
        job = f"{run_id}/{attempt}" if run_id and attempt else run_id
        server, repo = env.get("GITHUB_SERVER_URL", "https://github.com"), env.get("GITHUB_REPOSITORY")
        url = f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else None
        return "github", job, url
    if env.get("GITLAB_CI") or env.get("CI_JOB_ID"):
        return "gitlab", env.get("CI_JOB_ID"), env.get("CI_JOB_URL")
    if env.get("SLURM_JOB_ID"):
        array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
        job = f"{array}_{task}" if array and task else env["SLURM_JOB_ID"]
        cluster = env.get("SLURM_CLUSTER_NAME")
        return "slurm", f"{cluster}:{job}" if cluster else job, None
    if env.get("CI"):
        return "ci", _env(env, "BUILD_ID", "BUILD_NUMBER"), _env(env, "BUILD_URL")
    return None, None, None


def current_run(env: Mapping[str, str] | None = None, *, now: float | None = None, cwd: Path | None = None) -> RunRecord:
    """This process's run: a fresh id, the time, commit, branch, CI job and host."""
    import socket

    env = os.environ if env is None else env
    now = time.time() if now is None else now
    commit = _env(env, "GITHUB_SHA", "CI_COMMIT_SHA", "PERFCHECK_COMMIT") or _git("rev-parse", "HEAD", cwd=cwd)
    branch = _env(env, "GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME", "PERFCHECK_BRANCH") or _git(
        "rev-parse", "--abbrev-ref", "HEAD", cwd=cwd)
    system, job, url = ci_job(env)
    return RunRecord(run_id=new_run_id(now), time=now, commit=commit, branch=branch, ci_system=system,
                     ci_job=job, ci_url=url, host=socket.gethostname() or None)


def run_dict(run: RunRecord) -> dict[str, object]:
    """The ``run`` block of a results file."""
    return {
        "id": run.run_id, "time": run.time,
        "time_iso": dt.datetime.fromtimestamp(run.time, dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": run.commit, "branch": run.branch,
        "ci": {"system": run.ci_system, "job": run.ci_job, "url": run.ci_url}, "host": run.host,
    }


# --- what a run measured --------------------------------------------------------------------


def measurements(analysis: "Analysis") -> dict[str, dict[str, float]]:
    """kernel -> {metric: value} for every finite numeric metric of the kernel table."""
    import pandas as pd

    table = analysis.kernels
    if not len(table):
        return {}
    numeric = [c for c in table.columns if c != "kernel" and pd.api.types.is_numeric_dtype(table[c])]
    values = table[numeric].astype("float64")
    values.index = table["kernel"].astype(str)
    stacked = values.stack().dropna()
    stacked = stacked[stacked.map(math.isfinite)]
    out: dict[str, dict[str, float]] = {}
    for (kernel, metric), value in stacked.items():
        out.setdefault(kernel, {})[metric] = float(value)
    return out


def duration_samples(analysis: "Analysis") -> dict[str, dict[str, float | int]]:
    """kernel -> {n, median, spread} of its dispatch durations; spread is the relative
    robust spread 1.4826 x MAD / median."""
    import numpy as np

    out: dict[str, dict[str, float | int]] = {}
    for kernel, samples in analysis.duration_samples.items():
        x = np.asarray(samples, dtype="float64")
        x = x[np.isfinite(x) & (x > 0)]
        if not len(x):
            continue
        median = float(np.median(x))
        out[str(kernel)] = {"n": int(len(x)), "median": median,
                            "spread": float(1.4826 * np.median(np.abs(x - median)) / median)}
    return out


# --- reading a results file -------------------------------------------------------------------

@dataclass(frozen=True)
class ImportedRun:
    run: RunRecord
    values: ValueRows  # what the store writes: give it to ``add`` as it is
    machines: tuple[Machine, ...]
    notices: tuple[str, ...] = ()

    @property
    def results(self) -> tuple[Result, ...]:
        """The values as ``Result``s, made when asked for (``add`` takes ``values``)."""
        return tuple(self.values.results())


_WORST = {"error": 3, "failed": 2, "recorded": 1, "passed": 0}


def read_results(path: str | Path) -> ImportedRun:
    """A results file (``perfcheck check --json``) as a run for the store."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "no such results file") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a results file", hint="give the JSON files, e.g. results/*.json") from None
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror})") from None
    try:
        doc = json_loads(raw.decode("utf-8"), path, parse_constant=_no_constant,
                         hint="a results file is written by `perfcheck check --json`")
    except UnicodeDecodeError:
        raise InputError(path, "is not UTF-8 text, not a results file") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno,
                         hint="a results file is written by `perfcheck check --json`") from None
    except ValueError as exc:  # NaN / Infinity: never written by perfcheck (allow_nan=False)
        raise InputError(path, f"is not strict JSON ({exc})", hint="a results file is written by `perfcheck check --json`") from None
    if not isinstance(doc, dict) or "suites" not in doc or not isinstance(doc.get("suites"), dict):
        raise InputError(path, "is JSON but not a perfcheck results file (no 'suites')", line=1,
                         hint="a results file is written by `perfcheck check --json`")
    _validate(path, raw, doc)
    notices: list[str] = []
    run = _run_of(doc.get("run"), path, raw, notices)
    groups: dict[tuple[str, str], dict[tuple[str, str], tuple[object, ...]]] = {}
    machines: dict[str, Machine] = {}
    for suite, entry in doc["suites"].items():
        if not isinstance(entry, dict):
            raise InputError(path, f"suite {suite!r} is not an object", line=_line(raw, suite))
        fingerprint = entry.get("fingerprint")
        if fingerprint is not None and not isinstance(fingerprint, dict):
            raise InputError(path, f"field suites.{suite}.fingerprint: must be an object, not "
                             f"{type(fingerprint).__name__}", line=_line(raw, "fingerprint"))
        if fingerprint is None:
            fingerprint = _fingerprint_from_target(entry)
            if all(fingerprint[k] == "unknown" for k in ("device", "arch")) and not entry.get("machine"):
                # Without it the values would join whatever other machine is "unknown" too.
                raise InputError(path, f"field suites.{suite}.fingerprint: missing (and no target or profiles "
                                 "to take the machine from)", line=_line(raw, str(suite)),
                                 hint="a results file is written by `perfcheck check --json`")
        fingerprint = {str(k): str(v) for k, v in fingerprint.items()}
        machine = str(entry.get("machine") or machine_key(fingerprint))
        machines.setdefault(machine, Machine(machine, fingerprint))
        rows = _suite_results(path, raw, str(suite), entry)
        if rows:
            groups[(machine, str(suite))] = rows
    return ImportedRun(run, ValueRows(groups), tuple(machines.values()), tuple(notices))


def read_results_files(paths: "Sequence[str | Path]") -> list[ImportedRun]:
    """Every results file read and validated before anything is stored: one bad file
    and none is imported (the error names the file and says so)."""
    out = []
    for path in paths:
        try:
            out.append(read_results(path))
        except InputError as exc:
            if len(paths) < 2:
                raise
            note = f"none of the {len(paths)} files was imported (each is checked before any is stored)"
            raise InputError(exc.path, exc.what, line=exc.line, column=exc.column,
                             hint=f"{exc.hint.rstrip('.')}; {note}" if exc.hint else note) from None
    return out


def _no_constant(token: str) -> object:
    raise ValueError(f"{token} is not a number JSON allows")


# No quantity perfcheck stores comes near this (bytes, FLOP and seconds of any real run
# are below 1e30); an export scales values by up to 1e9 (s -> ns) and by (1 + spread),
# so anything larger could overflow to inf in a file perfcheck writes.
MAX_MAGNITUDE = 1e250
MAX_INTEGER = 2**63 - 1  # SQLite's INTEGER is 64-bit signed


def _field(trail: tuple[object, ...]) -> str:
    """``suites.s.checks[3].kernel``; text that is not UTF-8 shown as escapes."""
    text = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(trail))
    return text.encode("utf-8", "backslashreplace").decode("utf-8") or "<top>"


# What the walk in ``_validate`` refuses can only come from these in the file's bytes:
# a lone surrogate from a \\ud800-\\udfff escape (UTF-8 itself cannot hold one), an
# integer past 2**63 - 1 (19 digits or more), a magnitude past 1e250 (a positive exponent
# of 3 digits, or 19 digits or more before the point; fewer digits and an exponent of
# at most 99 stay below 1e117). With every digit made "0", each is a substring search
# (a regular expression tried at every digit took as long as the walk); a digit run
# inside a string (a commit's hex) is told from a number by the byte before its token.
# Every "+" is dropped, so "e+100" is found as "e000" too (one search of the bytes less;
# a "+" can only be in a number right after its "e": a token it joins elsewhere is text,
# and at most sends the file through the walk).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_ZERO_DIGITS = bytes.maketrans(b"123456789E", b"000000000e")
_DROPPED = b"+"
_LONG_TOKENS = (b"0" * 19, b"e000")
_NUMBER_BYTES = frozenset(b"0.-e")  # a number token's bytes, digits made "0" (and "+" dropped)
_NUMBER_RUN = re.compile(rb"[0.\-e]*")
_BEFORE_NUMBER = frozenset(b" \t\r\n:[,")  # what a JSON number token follows


def _maybe_refused(raw: bytes) -> bool:
    """Whether the walk of ``_validate`` could refuse something in ``raw``."""
    if _SURROGATE_ESCAPE.search(raw):
        return True
    flat = raw.translate(_ZERO_DIGITS, _DROPPED)
    for token in _LONG_TOKENS:
        found = flat.find(token)
        while found >= 0:
            start = found
            while start > 0 and flat[start - 1] in _NUMBER_BYTES:  # back to the start of the token
                start -= 1
            if start == 0 or flat[start - 1] in _BEFORE_NUMBER:
                return True
            # on past the whole run (each byte of a long digit string looked at once)
            found = flat.find(token, _NUMBER_RUN.match(flat, found).end())  # type: ignore[union-attr]
    return False


def _validate(path: Path, raw: bytes, doc: dict) -> None:
    """Refuse, before anything is stored, what a store or an export cannot hold: text
    that is not UTF-8 (lone surrogates from ``\\ud800`` escapes), integers past 64 bits,
    numbers of absurd magnitude, and run times outside 1970-2200. One walk, no recursion,
    and only over a file whose bytes could hold one of those (a results file of 32,000
    values is 500,000 items to walk: a third of reading it)."""
    stack: list[tuple[tuple[object, ...], object]] = [((), doc)] if _maybe_refused(raw) else []
    while stack:
        trail, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                _text_ok(path, raw, trail + (key,), key)
                stack.append((trail + (key,), item))
        elif isinstance(value, list):
            stack.extend((trail + (i,), item) for i, item in enumerate(value))
        elif isinstance(value, str):
            _text_ok(path, raw, trail, value)
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int) and abs(value) > MAX_INTEGER:
            raise InputError(path, f"field {_field(trail)}: integer of {len(str(abs(value)))} digits does not fit "
                             "64 bits", line=_line(raw, str(trail[-1])) if trail else None)
        elif isinstance(value, (int, float)) and abs(value) > MAX_MAGNITUDE:
            raise InputError(path, f"field {_field(trail)}: {float(value):g} is beyond any measured quantity "
                             f"(at most {MAX_MAGNITUDE:g})", line=_line(raw, str(trail[-1])) if trail else None)
    run = doc.get("run")
    if isinstance(run, dict) and "time" in run:
        when = finite(run.get("time"))
        if when is not None and not MIN_TIME <= when <= MAX_TIME:
            raise InputError(path, f"field run.time: {when:g} is outside 1970-2200 (Unix seconds)",
                             line=_line(raw, "time"), hint="a results file is written by `perfcheck check --json`")


def _text_ok(path: Path, raw: bytes, trail: tuple[object, ...], text: object) -> None:
    if not isinstance(text, str):
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(path, f"field {_field(trail)}: lone surrogate {text[exc.start]!r} at character "
                         f"{exc.start + 1} is not text", line=_line(raw, str(trail[-1])) if trail else None,
                         hint="write the file as UTF-8 without \\ud800-\\udfff escapes") from None


def _line(raw: bytes, key: str) -> int | None:
    at = raw.find(json.dumps(key).encode())
    return raw.count(b"\n", 0, at) + 1 if at >= 0 else None


def _run_of(block: object, path: Path, raw: bytes, notices: list[str]) -> RunRecord:
    if isinstance(block, dict) and isinstance(block.get("id"), str) and block["id"]:
        when = finite(block.get("time"))
        if when is None:
            raise InputError(path, "run 'time' must be Unix seconds", line=_line(raw, "time"))
        ci = block.get("ci") if isinstance(block.get("ci"), dict) else {}
        text = lambda v: str(v) if v not in (None, "") else None  # noqa: E731
        return RunRecord(block["id"], when, text(block.get("commit")), text(block.get("branch")),
                         text(ci.get("system")), text(ci.get("job")), text(ci.get("url")), text(block.get("host")),
                         str(path))
    import hashlib

    stat_time = path.stat().st_mtime
    run_id = "file-" + hashlib.sha256(raw).hexdigest()[:24]
    notices.append(f"{path}: no run block (an older perfcheck wrote it): run id {run_id}, time from the file's "
                   "modification time")
    return RunRecord(run_id, stat_time, source=str(path))


def _fingerprint_from_target(entry: Mapping[str, object]) -> dict[str, str]:
    """Older files: the device and arch of the target, the profiler of the profiles."""
    target = entry.get("target") if isinstance(entry.get("target"), dict) else {}
    profiles = [p for p in entry.get("profiles", []) if isinstance(p, dict)]  # type: ignore[union-attr]

    def distinct(values: list[object]) -> str:
        seen = sorted({str(v) for v in values if v})
        return "+".join(seen) if seen else "unknown"

    return {
        "device": str(target.get("device") or distinct([p.get("device") for p in profiles])),  # type: ignore[union-attr]
        "arch": str(target.get("arch") or distinct([p.get("arch") for p in profiles])),  # type: ignore[union-attr]
        "tool": distinct([p.get("tool") for p in profiles]),
        "tool_version": distinct([p.get("tool_version") for p in profiles]),
    }


class _UnitsByName(dict[str, str]):
    """metric -> its unit by its name (``schema.metric_unit``), each worked out once."""

    def __missing__(self, metric: str) -> str:
        from perfcheck.schema import metric_unit

        unit = self[metric] = metric_unit(metric)
        return unit


def _suite_results(path: Path, raw: bytes, suite: str, entry: Mapping[str, object]) -> dict[tuple[str, str], tuple[object, ...]]:
    """(kernel, metric) -> the stored columns (``store.ValueRows``) of one suite of a results document."""
    outcome: dict[tuple[str, str], str] = {}
    units: dict[tuple[str, str], str] = {}
    observed: dict[tuple[str, str], float | None] = {}
    lows: dict[tuple[str, str], float] = {}
    highs: dict[tuple[str, str], float] = {}
    checks = entry.get("checks", [])
    if not isinstance(checks, list):
        raise InputError(path, f"suite {suite!r}: 'checks' must be a list", line=_line(raw, "checks"))
    for check in checks:
        if not isinstance(check, dict) or not isinstance(check.get("kernel"), str) or not isinstance(check.get("metric"), str):
            continue
        if check.get("kernel") == check.get("pattern") and check.get("observed") is None:
            continue  # a pattern that matched no kernel: nothing was measured
        key = (check["kernel"], check["metric"])
        previous = outcome.get(key)
        now = str(check.get("outcome") or "")
        if previous is None or _WORST.get(now, 0) > _WORST.get(previous, 0):
            outcome[key] = now
        units[key] = str(check.get("unit") or "")
        observed.setdefault(key, finite(check.get("observed")))
        # the budget: the tightest limit of each side any check held the value to
        # (a two-sided check names one bound only: left out)
        relation, reference = str(check.get("relation") or ""), finite(check.get("reference"))
        if reference is not None and ".." not in relation:
            if relation in (">=", ">", "=="):
                lows[key] = max(lows.get(key, reference), reference)
            if relation in ("<=", "<", "=="):
                highs[key] = min(highs.get(key, reference), reference)
    # the stored columns of each (kernel, metric), built in one pass over the values with
    # no object per value (32,000 a night): value, unit, n, median, spread, outcome, low, high
    unit_of, outcome_of, low_of, high_of = units.get, outcome.get, lows.get, highs.get
    by_name = _UnitsByName()  # a results file has few metrics and many kernels

    def row(key: tuple[str, str], value: float | None) -> tuple[object, ...]:
        return value, unit_of(key) or by_name[key[1]], None, None, None, outcome_of(key), low_of(key), high_of(key)

    rows: dict[tuple[str, str], tuple[object, ...]] = {key: row(key, value) for key, value in observed.items()}
    table = entry.get("measurements", {})
    if isinstance(table, dict):
        for kernel, metrics in table.items():
            if not isinstance(metrics, dict):
                continue
            kernel = str(kernel)
            for metric, value in metrics.items():  # a JSON object's keys are text
                rows[(kernel, metric)] = row((kernel, metric), finite(value))
    samples = entry.get("samples", {}) if isinstance(entry.get("samples"), dict) else {}
    for kernel, stats in samples.items():  # a kernel's duration: its dispatches' count, median and spread
        row = rows.get((kernel, "duration"))
        if isinstance(stats, dict) and row is not None:
            n = stats.get("n")
            n = int(n) if isinstance(n, int) and not isinstance(n, bool) else None
            rows[(kernel, "duration")] = (*row[:2], n, finite(stats.get("median")), finite(stats.get("spread")), *row[5:])
    return rows


# --- from a finished run (the suite runner) ---------------------------------------------------

def suite_extras(analysis: "Analysis") -> dict[str, object]:
    """What a results file carries per suite for the history: fingerprint, machine,
    every kernel's measurements and its duration samples; and for `perfcheck compare`
    the kernels' text columns (occupancy limiter, bound) as "labels"."""
    from perfcheck.baseline import fingerprint
    from perfcheck.comparison import kernel_labels

    fp = fingerprint(analysis)
    return {"fingerprint": fp, "machine": machine_key(fp), "measurements": measurements(analysis),
            "samples": duration_samples(analysis), "labels": kernel_labels(analysis)}


def results_of(document: Mapping[str, object], suites: Sequence[str]) -> tuple[ValueRows, list[Machine]]:
    """The store's rows of ``suites`` (the suites that were read) of a finished run's
    results document (``perfcheck.checking.results_of_run``: what the JSON results
    file holds). The same rows ``read_results`` makes of the results file written from it."""
    # Read as it is, not through JSON: every field the rows are made of is already what
    # the file holds, a builtin str, int, float or None (``results_document`` passes the
    # checks' numbers through ``_number``; ``measurements`` and ``duration_samples`` make
    # floats, ints and str kernel names), and the rows' numbers go through ``finite``
    # anyway. The round trip (json.dumps then loads of the kept fields) cost 0.06 s of
    # CPU a run at 2,000 kernels x 16 metrics; tests/test_history_cli.py compares the
    # appended run with ``history add`` of the file.
    entries = document["suites"]
    groups: dict[tuple[str, str], dict[tuple[str, str], tuple[object, ...]]] = {}
    machines: dict[str, Machine] = {}
    for name in suites:
        entry = entries[name]  # type: ignore[index]
        machine = entry["machine"]
        machines.setdefault(machine, Machine(machine, entry["fingerprint"]))
        rows = _suite_results(Path("<run>"), b"", name, entry)
        if rows:
            groups[(machine, name)] = rows
    return ValueRows(groups), list(machines.values())
