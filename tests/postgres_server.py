"""A real PostgreSQL server for the tests, started from the machine's binaries (`initdb`,
`pg_ctl`: Debian's `postgresql` package) in a temporary directory, on a free port of 127.0.0.1
and a unix socket in the same directory; stopped (and its directory removed) at the end.

`initdb` refuses to run as root: as root, the server runs as the `postgres` user Debian creates
(or `nobody`), which owns its directory. Where no binaries are found the tests that need the
server skip with the install line, and fail under CI (`CI` set), where `.ci/run` installs them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

__all__ = ["INSTALL", "PostgresServer", "binaries", "postgres", "shared"]

INSTALL = "apt-get install postgresql"
START_SECONDS = 60


def binaries() -> Path | None:
    """The folder holding `initdb`, `pg_ctl` and `postgres`: on the `PATH`, or the newest of
    Debian's `/usr/lib/postgresql/<version>/bin`."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl", path=str(Path(found).resolve().parent)):
        return Path(found).resolve().parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """One running server; `dsn()` gives each caller a schema of its own."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="agentforge-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._user: str | None = None
        self._schemas = itertools.count()
        if os.geteuid() == 0:
            self._user = "postgres" if _exists("postgres") else "nobody"
            account = pwd.getpwnam(self._user)
            os.chown(self.root, account.pw_uid, account.pw_gid)
        os.chmod(self.root, 0o700)

    def _command(self, *argv: str) -> list[str]:
        command = [str(self.bin_dir / argv[0]), *argv[1:]]
        return ["runuser", "-u", self._user, "--", *command] if self._user else command

    def _run(self, *argv: str) -> None:
        result = subprocess.run(
            self._command(*argv),
            capture_output=True,
            text=True,
            timeout=START_SECONDS,
            cwd=self.root,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")

    def start(self) -> None:
        self._run(
            "initdb", "-D", str(self.data), "-U", "agentforge", "-A", "trust", "-E", "UTF8",
            "--no-locale", "--no-sync",
        )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c synchronous_commit=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
            "-w", "-t", str(START_SECONDS), "start",
        )  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def url(self) -> str:
        """The server's `postgres` database, over TCP."""
        return f"postgresql://agentforge@127.0.0.1:{self.port}/postgres"

    @property
    def socket_url(self) -> str:
        """The same database over the unix socket."""
        return f"postgresql://agentforge@/postgres?host={quote(str(self.root), safe='')}&port={self.port}"

    def dsn(self) -> str:
        """A URL whose connections work in a new, empty schema of their own."""
        import psycopg

        schema = f"t{os.getpid()}_{next(self._schemas)}"
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {schema}")
        return f"{self.url}?options={quote(f'-csearch_path={schema}', safe='')}"


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


_SHARED: list[PostgresServer] = []


def shared() -> PostgresServer:
    """The one server of this test process, started on first use: skipped where PostgreSQL is
    not installed (failed under CI)."""
    if _SHARED:
        return _SHARED[0]
    found = binaries()
    if found is None:
        _missing(f"PostgreSQL is not installed (its initdb and pg_ctl): {INSTALL}")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed: pip install 'agentforge-typed[postgres]'")
    assert found is not None
    server = PostgresServer(found)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    _SHARED.append(server)
    return server


def _missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server (see the module), stopped at the end of the session. Bring it
    into a test module with `postgres = postgres_server.postgres`: every module that does shares
    the one server."""
    server = shared()
    yield server
    if _SHARED:
        _SHARED.pop().stop()
