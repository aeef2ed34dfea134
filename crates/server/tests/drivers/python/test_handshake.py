"""Handshake, diagnostics, compression and error shapes through pymongo against the real
binary."""

import pymongo
import pytest
from pymongo.errors import OperationFailure


def test_hello_and_build_info(client):
    hello = client.admin.command("hello")
    assert hello["isWritablePrimary"] is True
    assert hello["maxWireVersion"] == 21
    assert hello["maxBsonObjectSize"] == 16 * 1024 * 1024
    assert hello["maxMessageSizeBytes"] == 48_000_000
    assert hello["maxWriteBatchSize"] == 100_000
    info = client.server_info()
    assert info["version"].startswith("7.0")
    assert info["versionArray"][:2] == [7, 0]


def test_diagnostics(client):
    for name in ["ping", "whatsmyuri", "getCmdLineOpts", "connectionStatus", "listCommands", "hostInfo"]:
        assert client.admin.command(name)["ok"] == 1.0
    status = client.admin.command("serverStatus")
    assert status["connections"]["current"] >= 1
    assert "opcounters" in status
    fcv = client.admin.command({"getParameter": 1, "featureCompatibilityVersion": 1})
    assert fcv["featureCompatibilityVersion"]["version"] == "7.0"


def test_unknown_command(client):
    with pytest.raises(OperationFailure) as failure:
        client.admin.command("frobnicate")
    assert failure.value.code == 59
    assert failure.value.details["codeName"] == "CommandNotFound"


@pytest.mark.parametrize("compressor", ["zlib", "snappy", "zstd"])
def test_compression(server, compressor):
    if compressor == "snappy":
        pytest.importorskip("snappy")
    if compressor == "zstd":
        try:
            import backports.zstd  # noqa: F401
        except ImportError:
            pytest.importorskip("zstandard")
    client = server.client(compressors=compressor)
    assert client.admin.command("ping")["ok"] == 1.0
    assert client.admin.command("serverStatus")["ok"] == 1.0
    client.close()


def test_a_standalone_hello_is_awaitable(server, client):
    """A standalone reports a topologyVersion that never changes: an awaitable hello repeating it
    waits its maxAwaitTimeMS (drivers' streaming monitor), a stale one is answered at once."""
    import time

    import bson

    version = client.admin.command("hello")["topologyVersion"]
    assert set(version) == {"processId", "counter"} and version["counter"] == 0
    direct = server.client(directConnection=True)
    started = time.monotonic()
    reply = direct.admin.command({"hello": 1, "topologyVersion": version, "maxAwaitTimeMS": 500})
    assert 0.4 <= time.monotonic() - started < 5 and reply["topologyVersion"] == version
    stale = dict(version, processId=bson.ObjectId())
    started = time.monotonic()
    direct.admin.command({"hello": 1, "topologyVersion": stale, "maxAwaitTimeMS": 5000})
    assert time.monotonic() - started < 1
    direct.close()
