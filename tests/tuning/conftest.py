"""Fixtures for the tuning tests: a tiny real workload, a cheap space, a real PostgreSQL server."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

PG_PASSWORD = "s3cret-Pw9"


@pytest.fixture(scope="session")
def tiny_workload():
    """Digits, 300 training and 150 test images, the mlp model."""
    from dltune import Workload

    return Workload.from_name("digits", "mlp", n_train=300, n_test=150)


@pytest.fixture
def cheap_space():
    """Few choices, fixed threads (one warm numpy worker serves every trial), 1-3 epochs."""
    from dltune.tuning import SearchSpace

    return SearchSpace(cores=1).update(
        learning_rate={"low": 0.01, "high": 0.3, "log": True},
        batch_size=[16, 32, 64],
        epochs={"low": 1, "high": 3},
        optimizer=["sgd", "momentum"],
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port() -> int:
    return _free_port()


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@pytest.fixture(scope="session")
def pg_password() -> str:
    return PG_PASSWORD


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A PostgreSQL server from Debian's binaries on a free loopback port, with a password.

    Root cannot run postgres, so as root the server runs as the ``postgres`` system user
    (``runuser``). Missing binaries skip the tests, except under CI=true, where they fail.
    """
    bindir = _pg_bin()
    if bindir is None:
        message = "PostgreSQL binaries not found (apt-get install -y postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    base = tmp_path_factory.mktemp("pg")
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    pwfile = base / "pw"
    pwfile.write_text(PG_PASSWORD + "\n")
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        shutil.chown(pwfile, "postgres")
        os.chmod(base, 0o755)
        # The temp tree's parents must be traversable by the postgres user.
        for parent in base.parents:
            if str(parent).startswith(("/tmp", str(tmp_path_factory.getbasetemp()))):
                os.chmod(parent, os.stat(parent).st_mode | 0o711)
        prefix = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*prefix, str(bindir / "initdb"), "-D", str(data), "-U", "dltune",
                    f"--pwfile={pwfile}", "-A", "scram-sha-256", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    port = _free_port()
    log = base / "server.log"
    if os.geteuid() == 0:
        log.touch()
        shutil.chown(log, "postgres")
    server = subprocess.Popen(
        [*prefix, str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1",
         "-k", str(sock), "-c", "fsync=off", "-c", "max_connections=50"],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT,
    )
    env = {**os.environ, "PGPASSWORD": PG_PASSWORD}
    deadline = time.monotonic() + 60
    while True:
        ready = subprocess.run([str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                               capture_output=True)
        if ready.returncode == 0:
            break
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"PostgreSQL did not start: {log.read_text()[-2000:]}")
        time.sleep(0.3)
    subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "dltune",
                    "dltune_test"], check=True, env=env, capture_output=True, timeout=60)
    yield f"postgresql://dltune:{PG_PASSWORD}@127.0.0.1:{port}/dltune_test"
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
