"""Start the real `strata` binary on a free loopback port with a temporary dbpath.

STRATA_BIN names the binary (scripts/test builds it). Each test module gets a fresh server;
`strata_server` can also be started and killed by a test itself (see test_crash.py).
"""

import os
import shutil
import signal
import subprocess
import tempfile

import pymongo
import pytest

BIN = os.environ.get("STRATA_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "..", "..", "target", "release", "strata"
)


# Every server a test starts, so that one a failing test left running is killed at the end.
STARTED = []


@pytest.fixture(scope="session", autouse=True)
def no_server_outlives_the_session():
    yield
    for process in STARTED:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait(timeout=30)


class StrataProcess:
    """`wrapper` runs the server under another command (e.g. memcap's memory cgroup); the log
    goes to `log_path`, by default beside the dbpath (DBPATH.log)."""

    def __init__(self, dbpath, port=0, extra_args=(), wrapper=(), cache_size="64MiB", log_path=None):
        STARTED.append(self)
        self.dbpath = dbpath
        os.makedirs(dbpath, exist_ok=True)
        self.log = open(log_path or dbpath.rstrip("/") + ".log", "ab")
        self.process = subprocess.Popen(
            [*wrapper, BIN, "serve", "--dbpath", dbpath, "--port", str(port), "--cache-size", cache_size, *extra_args],
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        line = self.process.stdout.readline().decode()
        assert line.startswith("strata listening on "), f"unexpected first line {line!r}"
        self.host, port_text = line.split()[-1].rsplit(":", 1)
        self.port = int(port_text)

    def uri(self, **options):
        query = "&".join(f"{key}={value}" for key, value in options.items())
        return f"mongodb://{self.host}:{self.port}/?{query}"

    def client(self, **options):
        options.setdefault("serverSelectionTimeoutMS", 5000)
        return pymongo.MongoClient(self.host, self.port, **options)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            assert self.process.wait(timeout=60) == 0, "strata did not exit 0 on SIGTERM"
        self.log.close()

    def kill(self):
        self.process.kill()
        self.process.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="module")
def workdir():
    path = tempfile.mkdtemp(prefix="strata-pytest-")
    yield path
    if os.environ.get("STRATA_KEEP_WORKDIR"):
        print(f"servers' data and logs kept in {path}")
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def server(workdir):
    process = StrataProcess(os.path.join(workdir, "data"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(server):
    client = server.client()
    yield client
    client.close()


@pytest.fixture()
def db(client, request):
    name = "t_" + request.node.name[:40].replace("[", "_").replace("]", "_").replace("-", "_")
    client.drop_database(name)
    return client[name]
