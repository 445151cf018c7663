"""A real single-node Slurm cluster on loopback, for tests: Debian's slurmctld,
slurmd and munge packages (22.05), started from a private directory and stopped
again by PID.

Nothing of the machine's own Slurm or munge is touched: munged runs as the munge
user with its own socket, PID and log files in the cluster's directory (the key is
the one the package created, /etc/munge/munge.key); slurm.conf lives there too and
names free ports, so a cluster already running on the host is not disturbed. The
configuration is the smallest that runs jobs in a container: this host as the
only node (its ``slurmd -C`` line) at 127.0.0.1, ``proctrack/linuxproc`` and
``task/none`` (no cgroups), ``select/cons_tres``, no accounting.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "munged")
CLIENTS = ("sbatch", "srun", "sinfo", "scontrol", "scancel", "munge")
PACKAGES = "slurmctld slurmd slurm-client munge"
MUNGE_KEY = Path("/etc/munge/munge.key")
START_TIMEOUT_S = 30.0


def missing() -> str | None:
    """Why a cluster cannot be started here, or None."""
    absent = [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name) is None
              and not Path("/usr/sbin", name).exists()]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing; apt-get install {PACKAGES})"
    if os.geteuid() != 0:
        return "a test Slurm cluster needs root (slurmd starts job steps as their user)"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no munge user (the munge package creates it)"
    if not MUNGE_KEY.is_file():
        return f"no munge key at {MUNGE_KEY} (the munge package creates it)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


@dataclass
class Cluster:
    root: Path
    conf: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    startup_s: float = 0.0

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm's clients (and the jobs: sbatch exports it)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 120.0) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), cwd=cwd, env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def submit(self, script: Path, *, cwd: Path, env: dict[str, str] | None = None,
               timeout: float = 180.0) -> tuple[str, int]:
        """``sbatch`` the script and wait for the job to end; returns (job id, exit
        status). Polls ``scontrol`` every 0.2 s: ``sbatch --wait`` sleeps 2 s and
        longer between its own polls, seconds lost per job."""
        done = self.run("sbatch", "--parsable", str(script), cwd=cwd, env=env, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"sbatch failed ({done.returncode}): {done.stderr.strip()}")
        job = done.stdout.strip().split(";")[0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.run("scontrol", "--oneliner", "show", "job", job, timeout=30).stdout
            fields = dict(part.split("=", 1) for part in shown.split() if "=" in part)
            state = fields.get("JobState", "")
            if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
                code, _, signal = fields.get("ExitCode", "0:0").partition(":")
                return job, int(code) if int(signal or 0) == 0 else 128 + int(signal)
            time.sleep(0.2)
        raise RuntimeError(f"job {job} did not end within {timeout:.0f} s:\n{self.logs()}")

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munged.log"):
            path = self.root / "log" / name
            if path.exists():
                parts.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel what is left of the jobs, then stop every daemon this cluster started,
        by PID: TERM, then KILL after 10 s."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            try:
                self.run("scancel", "--full", "--quiet", "--state=RUNNING", timeout=15)
                self.run("scancel", "--quiet", "--state=PENDING", timeout=15)
            except subprocess.TimeoutExpired:
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self.processes.clear()


def start(root: Path | None = None) -> Cluster:
    """Start munged, slurmctld and slurmd; return once the node is idle. The caller
    calls ``stop()`` (a pytest finalizer); when starting fails, whatever had
    started is stopped here and the error raised."""
    own_root = root is None
    if root is None:
        # not under pytest's tmp_path: that is root-only (0700), and munged, running
        # as the munge user, must reach its socket directory
        root = Path(tempfile.mkdtemp(prefix="perfcheck-slurm-"))
    root.chmod(0o755)
    for sub in ("munge", "state", "spool", "log"):
        (root / sub).mkdir(exist_ok=True)
    munge = pwd.getpwnam("munge")
    os.chown(root / "munge", munge.pw_uid, munge.pw_gid)
    socket_path = root / "munge" / "munge.socket"
    conf = root / "slurm.conf"
    cluster = Cluster(root, conf)
    try:
        _configure(conf, root, socket_path)
        _start(cluster, root, conf, socket_path, munge)
    except BaseException:
        cluster.stop()
        if own_root:
            shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


def _configure(conf: Path, root: Path, socket_path: Path) -> None:
    """slurm.conf: this host (its ``slurmd -C`` line) as the only node, at 127.0.0.1."""
    node = subprocess.run([_sbin("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    hostname = node.split()[0].split("=", 1)[1]
    conf.write_text("\n".join([
        "ClusterName=perfcheck-test",
        f"SlurmctldHost={hostname}(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={socket_path}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "ReturnToService=2",
        # start a submitted batch job at once (the default waits up to 3 s to batch them)
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
        # a finished job stays known for 30 s: long enough for scontrol to read its exit code
        "MinJobAge=30",
        f"{node} NodeAddr=127.0.0.1 State=UNKNOWN",
        f"PartitionName=test Nodes={hostname} Default=YES MaxTime=INFINITE State=UP",
        "",
    ]))


def _start(cluster: Cluster, root: Path, conf: Path, socket_path: Path, munge: pwd.struct_passwd) -> None:
    began = time.monotonic()
    log = root / "log"
    cluster.processes["munged"] = subprocess.Popen(
        [_sbin("munged"), "--foreground", f"--socket={socket_path}", f"--pid-file={root / 'munge' / 'munged.pid'}",
         f"--seed-file={root / 'munge' / 'munged.seed'}", f"--log-file={log / 'munged.log'}", f"--key-file={MUNGE_KEY}"],
        user=munge.pw_uid, group=munge.pw_gid, extra_groups=[], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, cwd=root / "munge")
    _wait(lambda: socket_path.exists(), "munged did not create its socket", cluster)
    for daemon in ("slurmctld", "slurmd"):
        cluster.processes[daemon] = subprocess.Popen(
            [_sbin(daemon), "-D", "-f", str(conf)], env=cluster.env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, cwd=root)

    def idle() -> bool:
        for name, process in cluster.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with status {process.returncode}:\n{cluster.logs()}")
        state = cluster.run("sinfo", "--noheader", "--format=%T", timeout=10)
        return state.returncode == 0 and state.stdout.strip() == "idle"

    _wait(idle, "the node did not become idle", cluster)
    cluster.startup_s = time.monotonic() - began


def _wait(ready, what: str, cluster: Cluster) -> None:  # noqa: ANN001
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {START_TIMEOUT_S:.0f} s:\n{cluster.logs()}")
        time.sleep(0.2)
