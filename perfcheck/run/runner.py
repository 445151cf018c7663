"""Profile a command: plan the passes, run them, keep the outputs, say what failed.

``run(command, profiler=..., expect={...})`` derives the counters from the
expectations (``perfcheck.run.plan``), runs one profiler invocation per pass
(``perfcheck.run.profilers``; with a launcher, through ``perfcheck.run.rank`` so
that each rank writes its own outputs), checks each pass's outputs as soon as it
ends, and returns a ``RunResult`` whose ``path()`` is a profile every perfcheck
command reads. The run directory (``perfcheck.run.rundir``) is never deleted:
every failure names it, and its manifest records what happened.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from perfcheck.errors import (
    ApplicationFailed,
    InputError,
    ProfilerError,
    ProfilerNotFound,
    RunTimeout,
    UsageError,
)
from perfcheck.run import rundir
from perfcheck.run.plan import Pass, Plan, metrics_of
from perfcheck.run.process import format_seconds, run_process
from perfcheck.run.profilers import Profiler, candidates, choose, with_clock_control
from perfcheck.run.rank import NO_RANK_MARKER, TOKEN

if TYPE_CHECKING:
    from perfcheck.model import Profile

HEARTBEAT_SECONDS = 30.0
_TAIL_CHARS = 300


def _stderr_progress(line: str) -> None:
    print(f"perfcheck: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    profiler: str
    plan: Plan
    command: tuple[str, ...]
    ranks: tuple[int, ...] | None  # None: no launcher
    elapsed: float

    def path(self, rank: int | None = None) -> Path:
        """The profile to read: the whole run, or one rank of a launched run."""
        if rank is None:
            return self.run_dir
        if self.ranks is None:
            raise UsageError(f"rank {rank} asked for, but the run had no launcher (one process, no ranks)")
        if rank not in self.ranks:
            raise UsageError(f"rank {rank} asked for, but the run had ranks {', '.join(map(str, self.ranks))}")
        return rundir.rank_dir(self.run_dir, rank)

    def profile(self, rank: int | None = None) -> "Profile":
        from perfcheck.ingest.runs import load_run

        return load_run(self.run_dir, rank)

    def describe(self) -> str:
        ranks = f", {len(self.ranks)} ranks" if self.ranks else ""
        return f"{self.profiler}: {self.plan.describe()}{ranks}; outputs in {self.run_dir}"


def split_command(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise UsageError("no command to profile: give it after --, e.g. perfcheck run -- ./app")
    return argv


def _vendor_and_arch(arch: str | None) -> tuple[str | None, str | None]:
    if not arch:
        return None, None
    from perfcheck.arch import lookup

    target = lookup(arch)
    return target.arch.vendor, target.arch.name


def _tail(lines: Sequence[str]) -> str:
    kept = [line.strip() for line in lines if line.strip() and not line.startswith(("==PROF==", "perfcheck"))]
    text = " | ".join(kept[-3:])
    return text if len(text) <= _TAIL_CHARS else "..." + text[-_TAIL_CHARS:]


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    if code > 128 and code - 128 in signal.valid_signals():  # a shell or launcher reporting a signal
        return f"exited with status {code} (signal {signal.Signals(code - 128).name})"
    return f"exited with status {code}"


def _located(error: ProfilerError, run_dir: Path) -> ProfilerError:
    """``error`` again, naming the run directory."""
    if error.run_dir:
        return error
    located = type(error)(error.what, run_dir=run_dir, hint=error.hint)
    return located


def _tool_messages(paths: Sequence[Path]) -> str:
    """ncu writes its own ==ERROR== lines into --log-file: the lines a tool marks."""
    lines: list[str] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines += [line.rstrip("\n") for line in fh if line.startswith("==")]
        except OSError:
            continue
    return "\n".join(lines)


class _Runner:
    def __init__(self, profiler: Profiler, plan: Plan, argv: list[str], run_dir: Path, *, launcher: list[str],
                 timeout: float | None, env: Mapping[str, str] | None, cwd: str | Path | None,
                 progress: Callable[[str], None] | None, heartbeat: float | None, echo: IO[str] | None) -> None:
        self.profiler, self.plan, self.argv, self.run_dir = profiler, plan, argv, run_dir
        self.launcher, self.timeout, self.env, self.cwd = launcher, timeout, env, cwd
        self.progress, self.heartbeat, self.echo = progress, heartbeat, echo
        self.start = time.monotonic()
        self.ranks: list[int] | None = None

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def run(self) -> None:
        exe = self.profiler.which()
        if exe is None:
            raise ProfilerNotFound(f"{self.profiler.name} is not installed (not found on PATH)", hint=self.profiler.install_hint)
        if self.launcher and shutil.which(self.launcher[0]) is None:
            raise ProfilerNotFound(f"launcher {self.launcher[0]!r} is not installed (not found on PATH)",
                                   hint="run where it exists (a login or compute node of the cluster) or drop --launcher")
        for step in self.plan.passes:
            self.run_pass(exe, step)

    def run_pass(self, exe: str, step: Pass) -> None:
        total = len(self.plan.passes)
        where = f"pass {step.index} of {total}"
        remaining = None if self.timeout is None else self.timeout - self.elapsed()
        if remaining is not None and remaining <= 0:
            raise RunTimeout(f"timed out after {self.timeout:g} s before {where}")
        self.say(f"{where} ({self.profiler.name}: {step.reason}), elapsed {format_seconds(self.elapsed())}")
        if self.launcher:
            out = str(rundir.rank_dir(self.run_dir, TOKEN) / f"pass_{step.index}")
        else:
            out = str(rundir.pass_dir(self.run_dir, step.index))
        invocation = self.profiler.invocation(exe, step, out, self.run_dir / "inputs", self.argv)
        for path, text in invocation.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if self.launcher:
            own = len(invocation.argv) - len(self.argv)  # the profiler's arguments before the application's
            mkdirs = [a for d in invocation.directories for a in ("--mkdir", d)]
            argv = [*self.launcher, sys.executable, "-m", "perfcheck.run.rank", *mkdirs, "--args", str(own),
                    "--", *invocation.argv]
        else:
            for directory in invocation.directories:
                Path(directory).mkdir(parents=True, exist_ok=True)
            argv = invocation.argv
        try:
            done = run_process(
                argv, logs=self.run_dir / "logs" / f"pass_{step.index}", env=self.env, cwd=self.cwd,
                timeout=remaining, heartbeat=self.heartbeat, echo=self.echo,
                on_heartbeat=lambda _: self.say(f"{where} still running, elapsed {format_seconds(self.elapsed())}"),
            )
        except FileNotFoundError as exc:
            raise ProfilerNotFound(f"cannot run {argv[0]!r}: {exc.strerror}") from None
        if done.timed_out:
            raise RunTimeout(f"timed out after {self.timeout:g} s in {where} ({self.profiler.name} running "
                             f"{shlex.join(self.argv)}); its process group was killed")
        bases = self._bases()
        outputs = [p for b in bases for p in self.profiler.outputs(rundir.pass_dir(b, step.index), step)]
        text = done.text + "\n" + _tool_messages(outputs)
        problem = self.profiler.diagnose(text, step)
        if problem is not None:
            raise problem
        if NO_RANK_MARKER in text:
            raise ProfilerError(f"the launcher's processes found no MPI rank in their environment ({where})",
                                hint="use an MPI or Slurm launcher (srun, mpirun, mpiexec) that sets one")
        if done.returncode:
            tail = _tail(done.stderr_tail) or _tail(done.stdout_tail)
            raise ApplicationFailed(f"{shlex.join(self.argv)} {_exit_text(done.returncode)} under {self.profiler.name} "
                                    f"({where})" + (f"; its stderr ended: {tail}" if tail else "; it printed nothing"))
        self._check_outputs(step, bases, where)

    def _bases(self) -> list[Path]:
        """Where this pass's outputs are: the run directory, or each rank's."""
        if not self.launcher:
            return [self.run_dir]
        ranks = rundir.ranks_in(self.run_dir)
        if self.ranks is None:
            self.ranks = ranks
        return [rundir.rank_dir(self.run_dir, r) for r in ranks]

    def _check_outputs(self, step: Pass, bases: list[Path], where: str) -> None:
        from perfcheck.ingest.runs import read_pass
        from perfcheck.run.plan import missing_counters
        from perfcheck.run.profilers import unknown_counters

        if self.launcher:
            ranks = rundir.ranks_in(self.run_dir)
            if not ranks:
                raise ProfilerError(f"the launcher started no rank that ran {self.profiler.name} ({where})",
                                    hint="check the launcher options and the pass's logs")
            if ranks != self.ranks:
                raise ProfilerError(f"{where} ran ranks {ranks}, pass 1 ranks {self.ranks}",
                                    hint="every pass must run the same ranks")
        for base in bases:
            try:
                frame, sources, _ = read_pass(base, self.profiler.name, step)
            except InputError as exc:
                raise ProfilerError(f"{self.profiler.name} left no readable output for {where}: {exc}",
                                    hint="did the application launch GPU kernels? see the pass's logs") from None
            missing = missing_counters(frame.columns, step)
            if missing:
                device = next((s.arch or s.device for s in sources if s.arch or s.device), None)
                raise unknown_counters(missing, self.profiler.name, device)


def run(
    command: str | Sequence[str],
    *,
    profiler: str | None = None,
    clock_control: str | None = None,
    launcher: str | Sequence[str] | None = None,
    timeout: float | None = None,
    run_dir: str | Path | None = None,
    runs_dir: str | Path | None = None,
    name: str = "run",
    expect: Mapping[str, Sequence[str]] | None = None,
    metrics: Sequence[str] = (),
    counters: Sequence[str] = (),
    arch: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    progress: Callable[[str], None] | None = _stderr_progress,
    heartbeat: float | None = HEARTBEAT_SECONDS,
    echo: IO[str] | None = None,
) -> RunResult:
    """Profile ``command`` with ``profiler`` (default: the installed one) collecting
    what ``expect`` ({kernel pattern: [expectation, ...]}), ``metrics`` and raw
    ``counters`` need; ``clock_control`` ("base" | "none", ncu only; default "base")
    is ncu's --clock-control, recorded in the manifest. ``launcher`` ("srun -n 4") starts ranks; ``timeout`` (s) bounds
    the whole run. Outputs go to ``run_dir`` (new or empty), else a fresh directory
    under ``runs_dir`` (default ``perfcheck-runs/`` in ``cwd``). ``progress`` gets a line
    per pass and every ``heartbeat`` seconds of a long pass; ``echo`` gets the
    command's own output as it runs (it is always kept in the run directory's logs/).
    Raises a ProfilerError subclass naming the run directory on failure."""
    argv = split_command(command)
    launcher_argv = (shlex.split(launcher) if isinstance(launcher, str) else list(launcher)) if launcher else []
    if timeout is not None and timeout <= 0:
        raise UsageError(f"timeout must be a positive number of seconds, not {timeout!r}")
    vendor, arch_name = _vendor_and_arch(arch)
    chosen, clocks = with_clock_control(choose(profiler, vendor), clock_control)  # not installed: fails here, before a run directory exists
    if launcher_argv and shutil.which(launcher_argv[0]) is None:
        raise ProfilerNotFound(f"launcher {launcher_argv[0]!r} is not installed (not found on PATH)",
                               hint="run where it exists (a login or compute node of the cluster) or drop --launcher")
    from perfcheck.run.plan import plan as make_plan

    plan = make_plan(chosen.name, chosen.vendor, chosen.family, [*metrics_of(expect), *metrics], counters, arch_name)
    if run_dir is not None:
        directory = rundir.claim(Path(run_dir).resolve())
    else:
        parent = Path(runs_dir) if runs_dir is not None else rundir.default_parent(cwd)
        directory = rundir.new_run_dir(parent.resolve(), name)
    manifest: dict[str, object] = {
        "profiler": chosen.name, "clock_control": clocks, "command": argv, "launcher": launcher_argv or None,
        "cwd": str(Path(cwd).resolve()) if cwd is not None else os.getcwd(), "arch": arch_name,
        "passes": [p.as_dict() for p in plan.passes], "plan": plan.describe(),
        "needs": [{"quantity": n.quantity, "metrics": list(n.metrics), "counters": list(n.counters)} for n in plan.needs],
        "layout": rundir.RANKS if launcher_argv else rundir.SINGLE, "ranks": None, "rank": None,
        "status": rundir.RUNNING, "error": None, "created": rundir.now(),
    }
    rundir.write_manifest(directory, manifest)
    runner = _Runner(chosen, plan, argv, directory, launcher=launcher_argv, timeout=timeout, env=env, cwd=cwd,
                     progress=progress, heartbeat=heartbeat, echo=echo)
    if profiler is None:  # say which were looked for, and which one runs
        runner.say(f"profiler {chosen.name}: the first installed of {', '.join(candidates(vendor))} "
                   "(--profiler names one)")
    try:
        runner.run()
        ranks = tuple(runner.ranks) if launcher_argv else None
        manifest.update(status=rundir.COMPLETE, ranks=list(ranks) if ranks is not None else None,
                        finished=rundir.now(), elapsed_s=round(runner.elapsed(), 3))
        rundir.write_manifest(directory, manifest)
        _load_check(directory)
        for rank in ranks or ():  # each rank's directory is a profile of that rank alone
            rundir.write_manifest(rundir.rank_dir(directory, rank),
                                  {**manifest, "layout": rundir.SINGLE, "ranks": None, "rank": rank})
    except ProfilerError as exc:
        located = _located(exc, directory)
        _fail(directory, manifest, str(located))
        raise located from None
    except InputError as exc:  # an output perfcheck's readers cannot read
        _fail(directory, manifest, str(exc))
        raise ProfilerError(f"the profiler outputs cannot be read: {exc}", run_dir=directory) from None
    except BaseException as exc:  # Ctrl-C, a bug: the manifest still says the run failed
        _fail(directory, manifest, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        raise
    ranks = tuple(runner.ranks or ()) if launcher_argv else None
    result = RunResult(directory, chosen.name, plan, tuple(argv), ranks, runner.elapsed())
    runner.say(f"{len(plan.passes)} pass{'es' if len(plan.passes) != 1 else ''} in {format_seconds(result.elapsed)}; "
               f"outputs in {directory}")
    return result


def _fail(directory: Path, manifest: dict[str, object], error: str) -> None:
    manifest.update(status=rundir.FAILED, error=error, finished=rundir.now())
    try:
        rundir.write_manifest(directory, manifest)
    except OSError:
        pass


def _load_check(directory: Path) -> None:
    """Merge the passes once now, so that a run whose outputs cannot be merged fails
    here, naming the run directory, and not later in a check."""
    from perfcheck.ingest.runs import scan_run

    scan = scan_run(directory)
    for _ in scan.chunks:
        pass
