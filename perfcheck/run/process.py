"""Running one profiler pass: a child process in its own process group, its output
kept in log files (and its last lines for error messages), a timeout that kills
the whole group, and progress lines while it runs.

The child gets a new session (``start_new_session``): the profiler, the launcher,
the application and whatever they start share its process group, so a timeout or
Ctrl-C kills all of them (SIGTERM, then SIGKILL after a grace period), not just
the process perfcheck started. Processes a launcher starts on other nodes belong
to the launcher (srun and mpirun stop their remote tasks when they are killed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

TAIL_LINES = 40
GRACE_SECONDS = 3.0


@dataclass
class Completed:
    returncode: int | None  # None: killed on timeout
    elapsed: float
    timed_out: bool = False
    stdout_tail: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The kept output, for recognising a tool's error messages."""
        return "\n".join([*self.stdout_tail, *self.stderr_tail])


def format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _pump(stream: IO[bytes], log: IO[bytes], tail: deque[str], echo: IO[str] | None) -> None:
    for raw in iter(stream.readline, b""):
        log.write(raw)
        log.flush()
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        tail.append(line)
        if echo is not None:
            try:
                echo.write(line + "\n")
                echo.flush()
            except (OSError, ValueError):  # a closed pipe must not stop the logging
                pass
    stream.close()


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_process(
    argv: Sequence[str],
    *,
    logs: Path,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    heartbeat: float | None = None,
    on_heartbeat: Callable[[float], None] | None = None,
    echo: IO[str] | None = None,
) -> Completed:
    """Run ``argv`` to completion (or until ``timeout`` seconds, then kill its process
    group). stdout and stderr go to ``logs`` + ``.stdout.log`` / ``.stderr.log`` (and
    to ``echo`` when given); ``on_heartbeat(elapsed)`` is called every ``heartbeat``
    seconds while it runs. Raises FileNotFoundError when argv[0] cannot be run."""
    logs.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    out_log = open(logs.with_name(logs.name + ".stdout.log"), "wb")
    err_log = open(logs.with_name(logs.name + ".stderr.log"), "wb")
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
        )
    except BaseException:
        out_log.close()
        err_log.close()
        raise
    tails: tuple[deque[str], deque[str]] = (deque(maxlen=TAIL_LINES), deque(maxlen=TAIL_LINES))
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, out_log, tails[0], echo), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, err_log, tails[1], echo), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    timed_out = False
    try:
        while True:
            elapsed = time.monotonic() - start
            remaining = None if timeout is None else timeout - elapsed
            if remaining is not None and remaining <= 0:
                timed_out = True
                break
            wait = min(x for x in (remaining, heartbeat, 3600.0) if x is not None)
            try:
                proc.wait(timeout=max(wait, 0.01))
                break
            except subprocess.TimeoutExpired:
                if on_heartbeat is not None and heartbeat is not None:
                    elapsed = time.monotonic() - start
                    if remaining is None or elapsed < timeout:  # type: ignore[operator]
                        on_heartbeat(elapsed)
    except BaseException:  # Ctrl-C: do not leave the profiled job running
        _terminate(proc)
        raise
    finally:
        if timed_out:
            _terminate(proc)
        # A process left in the group (a daemon the application started) can hold the
        # pipes open: give the readers a moment, then end the group for good.
        for pump in pumps:
            pump.join(timeout=5.0)
        if any(p.is_alive() for p in pumps):
            _kill_group(proc.pid, signal.SIGKILL)
            for pump in pumps:
                pump.join(timeout=2.0)
        out_log.close()
        err_log.close()
    return Completed(
        returncode=None if timed_out else proc.returncode,
        elapsed=time.monotonic() - start,
        timed_out=timed_out,
        stdout_tail=list(tails[0]),
        stderr_tail=list(tails[1]),
    )


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole process group, SIGKILL to whatever is left after a grace period."""
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
