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
