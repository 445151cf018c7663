"""Per-rank wrapper: ``LAUNCHER python -m perfcheck.run.rank [--mkdir DIR]... --args N -- ARGV...``

A launcher (``srun -n 4``, ``mpirun -np 4``) starts one copy of this module per rank.
Each reads its rank from the environment the launcher set, substitutes it for
``@RANK@`` in the first N arguments of ARGV (the profiler's own options: its output
directory) and in the ``--mkdir`` directories, creates those, and replaces itself
with ARGV (exec: the profiler then is the rank's process, signals and exit status
pass straight through). So every rank's profiler writes into ``rank_R/``, which is
how perfcheck tells the ranks apart afterwards. This is the wrapper-script pattern
MPI profiling guides use for profilers (``exec PROFILER -o out.$RANK "$@"``);
rocprofv3's ``%rank%`` and ncu's ``%q{ENV}`` output-name tokens do the same for one
tool each, this does it for every profiler and launcher alike.

Rank variables, first found wins: ``OMPI_COMM_WORLD_RANK`` (Open MPI),
``PMIX_RANK`` (PMIx launchers, ``srun --mpi=pmix``), ``PMI_RANK`` (MPICH, Intel MPI,
MVAPICH), ``PALS_RANKID`` (HPE Cray PALS ``mpiexec``), ``SLURM_PROCID`` (``srun``).
``SLURM_PROCID`` comes last because an ``mpirun`` inside a Slurm allocation passes the
batch step's ``SLURM_PROCID=0`` on to every rank it starts.

Imports nothing but the standard library: it runs once per rank.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

TOKEN = "@RANK@"
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "PALS_RANKID", "SLURM_PROCID")
# Exit status when no rank is found, and the marker perfcheck looks for in the output.
NO_RANK_STATUS = 97
NO_RANK_MARKER = "perfcheck.run.rank: no rank"


def rank_from_environment(env: Mapping[str, str]) -> int | None:
    for name in RANK_VARIABLES:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def parse(argv: Sequence[str]) -> tuple[list[str], int, list[str]]:
    """``[--mkdir DIR]... --args N -- ARGV...`` -> (mkdirs, N, ARGV)."""
    mkdirs: list[str] = []
    substitute = 0
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return mkdirs, substitute, list(argv[i + 1:])
        if arg in ("--mkdir", "--args") and i + 1 < len(argv):
            if arg == "--mkdir":
                mkdirs.append(argv[i + 1])
            else:
                substitute = int(argv[i + 1])
            i += 2
            continue
        raise SystemExit(f"perfcheck.run.rank: unexpected argument {arg!r} (usage: [--mkdir DIR]... --args N -- ARGV...)")
    raise SystemExit("perfcheck.run.rank: no command after --")


def main(argv: Sequence[str] | None = None) -> int:
    mkdirs, substitute, target = parse(sys.argv[1:] if argv is None else argv)
    if not target:
        raise SystemExit("perfcheck.run.rank: no command after --")
    rank = rank_from_environment(os.environ)
    if rank is None:
        print(f"{NO_RANK_MARKER} in the environment (looked for {', '.join(RANK_VARIABLES)}): "
              "is the launcher an MPI or Slurm launcher?", file=sys.stderr, flush=True)
        return NO_RANK_STATUS
    text = str(rank)
    for directory in mkdirs:
        os.makedirs(directory.replace(TOKEN, text), exist_ok=True)
    target = [a.replace(TOKEN, text) if i < substitute else a for i, a in enumerate(target)]
    try:
        os.execvp(target[0], target)
    except OSError as exc:
        print(f"perfcheck.run.rank: cannot run {target[0]!r} on rank {rank}: {exc.strerror}", file=sys.stderr, flush=True)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
