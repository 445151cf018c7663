"""Shared by the stand-in executables in this directory (see README.md): logging
the command line, failing loudly, running the application, recorded data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

UNEXPECTED = 90


def log_call(tool: str, argv: list[str]) -> None:
    log = os.environ.get("STANDIN_LOG")
    if log:
        entry = {"tool": tool, "argv": argv, "rank": rank()}
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


def fail(tool: str, message: str) -> "NoReturn":  # noqa: F821
    print(f"stand-in {tool}: unexpected {message}", file=sys.stderr, flush=True)
    sys.exit(UNEXPECTED)


def run_app(app: list[str]) -> int:
    if not app:
        return 0
    return subprocess.call(app)


def data(tool: str, name: str) -> Path:
    root = os.environ.get("STANDIN_DATA")
    if not root:
        fail(tool, "run without STANDIN_DATA (the tests set it to the recorded outputs)")
    path = Path(root) / name
    if not path.is_file():
        fail(tool, f"run: no recorded {name} in {root}")
    return path


def values() -> dict[str, dict[str, object]]:
    path = os.environ.get("STANDIN_VALUES")
    if not path:
        return {}
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    return {k: v if isinstance(v, dict) else {"value": v, "unit": ""} for k, v in raw.items()}


def value_of(tool: str, name: str) -> dict[str, object]:
    known = values()
    if name not in known:
        fail(tool, f"counter {name}: no recorded value (add it to STANDIN_VALUES)")
    return known[name]


def rank() -> int | None:
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def rank_scale() -> float:
    factors = [f for f in os.environ.get("STANDIN_RANK_SCALE", "").split(",") if f.strip()]
    r = rank()
    if not factors or r is None:
        return 1.0
    return float(factors[r % len(factors)])


def mode() -> str:
    return os.environ.get("STANDIN_MODE", "")


def unknown() -> str:
    return os.environ.get("STANDIN_UNKNOWN", "")
