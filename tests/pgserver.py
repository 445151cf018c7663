"""A real PostgreSQL server for the tests: initdb into a private directory, started
on a private socket directory and a free loopback port, stopped by its PID.

Debian's ``postgresql`` package puts the programs in /usr/lib/postgresql/N/bin (not on
PATH). initdb and postgres refuse to run as root ("cannot be run as root": a server
that owns the data files must not own the machine), so as root the server runs as
the package's own ``postgres`` user, or ``nobody`` without it: the child switches
user before exec (``subprocess``'s ``user=``), so its PID is the server's.

Authentication: trust on the socket (the tests' superuser ``perfcheck``), password
(scram-sha-256) on TCP for the user ``alice``, so a wrong password is a real refusal.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "perfcheck"
PASSWORD_USER, PASSWORD = "alice", "s3cret-Pa55"


def binaries() -> Path | None:
    """The directory of initdb and postgres, or None."""
    found = shutil.which("initdb")
    if found:
        real = Path(found).resolve().parent
        if (real / "postgres").exists():
            return real
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[3]) if
                      Path(p).parts[3].isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


def why_not() -> str | None:
    """Why no server can be started here (None: it can)."""
    if binaries() is None:
        return "PostgreSQL is not installed (initdb not on PATH nor in /usr/lib/postgresql/*/bin; apt install postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]', perfcheck's postgres extra)"
    if os.geteuid() == 0 and _server_user() is None:
        return "running as root and neither a postgres nor a nobody user exists to run the server as"
    return None


def _server_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.getuid())
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    directory: Path  # data/ and the socket live here
    port: int
    process: subprocess.Popen  # type: ignore[type-arg]

    @property
    def socket_dir(self) -> str:
        return str(self.directory)

    def url(self, database: str = "postgres") -> str:
        """Superuser over the private socket (trust)."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}&port={self.port}"

    def password_url(self, database: str, password: str = PASSWORD) -> str:
        """The password user over loopback TCP."""
        return f"postgresql://{PASSWORD_USER}:{password}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> list[tuple]:  # type: ignore[type-arg]
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as db:
            cursor = db.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def create_database(self, name: str) -> str:
        self.execute(f'CREATE DATABASE "{name}" OWNER {PASSWORD_USER}')
        return self.url(name)

    def stop(self) -> None:
        """Fast shutdown by PID (SIGINT: roll back open transactions, then exit)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def start(*, durable: bool = False, tuning: dict[str, str] | None = None) -> Server:
    """initdb and start a server; ``durable``: fsync on (timings), else off (tests on a
    busy machine: a killed process is still rolled back, only an OS crash could lose data);
    ``tuning``: more ``postgres -c`` settings, or other values for these (a benchmark's
    shared_buffers)."""
    bin_dir = binaries()
    assert bin_dir is not None
    user = _server_user()
    assert user is not None
    # not under pytest's tmp_path: as root that is root's 0700 directory the server
    # user cannot enter; and a socket path must stay under 107 bytes
    directory = Path(tempfile.mkdtemp(prefix="pcpg-"))
    data = directory / "data"
    pwfile = directory / "pw"
    pwfile.write_text("unused-superuser-password\n")
    if os.geteuid() == 0:
        os.chown(directory, user.pw_uid, user.pw_gid)
        os.chown(pwfile, user.pw_uid, user.pw_gid)
    as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if os.geteuid() == 0 else {}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(directory)}
    subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--pwfile", str(pwfile),
                    "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions"],
                   check=True, capture_output=True, env=env, cwd=directory, **as_user)
    port = _free_port()
    settings = {
        "listen_addresses": "127.0.0.1", "port": str(port), "unix_socket_directories": str(directory),
        "max_connections": "60", "shared_buffers": "16MB", "fsync": "on" if durable else "off",
        "synchronous_commit": "on" if durable else "off", "full_page_writes": "on" if durable else "off",
        "log_min_messages": "fatal", "logging_collector": "off", **(tuning or {}),
    }
    argv = [str(bin_dir / "postgres"), "-D", str(data)]
    for key, value in settings.items():
        argv += ["-c", f"{key}={value}"]
    log = open(directory / "server.log", "wb")  # noqa: SIM115 (the server's lifetime)
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=directory,
                               start_new_session=True, **as_user)
    log.close()
    server = Server(directory, port, process)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            text = (directory / "server.log").read_text(errors="replace")[-2000:]
            shutil.rmtree(directory, ignore_errors=True)
            raise RuntimeError(f"postgres exited with {process.returncode}: {text}")
        try:
            server.execute("SELECT 1")
            break
        except Exception:  # noqa: BLE001 (starting up: refused until ready)
            if time.monotonic() > deadline:
                server.stop()
                raise
            time.sleep(0.1)
    server.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")
    return server
