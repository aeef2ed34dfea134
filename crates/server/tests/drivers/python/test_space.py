"""Space: a dropped collection's space goes back to the operating system (`compact`, while
writes go on), nothing is lost, and serverStatus tells where the file's bytes are; the
compression a server is started with is the one its blocks are written with."""

import os
import threading

import pytest
from pymongo import InsertOne
from pymongo.errors import OperationFailure

from conftest import StrataProcess


def strata_status(client):
    return client.admin.command("serverStatus")["strata"]


def load(collection, count, pad):
    for start in range(0, count, 1000):
        collection.bulk_write([InsertOne({"_id": i, "k": i % 997, "pad": os.urandom(pad).hex()}) for i in range(start, start + 1000)])


def test_compact_returns_a_dropped_collections_space_while_serving(server):
    client = server.client()
    db = client.space_test
    db.kept.create_index("k")
    load(db.kept, 5_000, 100)
    load(db.doomed, 40_000, 200)
    full = db.command("compact", "kept")["fileBytesAfter"]
    db.doomed.drop()
    # Writes go on while compact runs.
    stop = threading.Event()
    written = []

    def writer():
        n = 100_000
        while not stop.is_set():
            db.kept.insert_one({"_id": n, "k": n % 997, "pad": "w"})
            written.append(n)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        reply = db.command("compact", "kept")
    finally:
        stop.set()
        thread.join()
    assert reply["ok"] == 1.0
    # Writes went on meanwhile, so the file may have grown by what they added.
    assert reply["bytesFreed"] == max(0, reply["fileBytesBefore"] - reply["fileBytesAfter"])
    status = strata_status(client)
    assert status["dataFileBytes"] * 2 < full, f"the dropped collection's space went back: {reply}, {status} (was {full})"
    for field in ("blockBytes", "freeBytes", "retiredBytes", "bytesReturned"):
        assert field in status
    assert status["blockBytes"] <= status["dataFileBytes"]
    assert db.kept.count_documents({}) == 5_000 + len(written)
    assert db.command("validate", "kept")["valid"] is True
    assert db.kept.find_one({"k": 5, "_id": 5})["_id"] == 5


def test_compact_of_a_missing_collection_is_namespace_not_found(client):
    with pytest.raises(OperationFailure) as error:
        client.space_test.command("compact", "no_such_collection")
    assert error.value.code == 26


def test_compression_is_the_servers_choice_and_survives_restart(workdir):
    sizes = {}
    for compression in ("none", "zstd"):
        dbpath = os.path.join(workdir, f"compression-{compression}")
        process = StrataProcess(dbpath, extra_args=("--compression", compression))
        try:
            client = process.client()
            # Repetitive text: what compression is for.
            load_text = [InsertOne({"_id": i, "text": f"record {i % 50} of the same shape " * 8}) for i in range(20_000)]
            client.compressed.docs.bulk_write(load_text)
            client.compressed.command("compact", "docs")
            sizes[compression] = strata_status(client)["blockBytes"]
        finally:
            process.stop()
        reopened = StrataProcess(dbpath)
        try:
            assert reopened.client().compressed.docs.count_documents({}) == 20_000
        finally:
            reopened.stop()
    assert sizes["zstd"] * 4 < sizes["none"], f"zstd blocks are far smaller than uncompressed ones: {sizes}"


def test_compression_per_collection_and_per_index(client):
    db = client.compression_choice
    db.create_collection("plain", storageEngine={"strata": {"compression": "none"}})
    db.create_collection("small", storageEngine={"wiredTiger": {"configString": "block_compressor=zstd"}})
    spec = {"strata": {"compression": "zstd:9"}}
    db.small.create_index("text", storageEngine=spec)
    docs = [{"_id": i, "text": f"the same words again and again, number {i % 100}"} for i in range(20_000)]
    db.plain.insert_many(docs)
    db.small.insert_many(docs)
    db.command("compact", "small")
    plain, small = db.command("collStats", "plain"), db.command("collStats", "small")
    assert plain["strata"]["compression"]["collection"] == "none"
    assert small["strata"]["compression"]["collection"] == "zstd:3"
    assert small["strata"]["compression"]["indexes"]["text_1"] == "zstd:9"
    assert small["storageSize"] * 3 < plain["storageSize"], (small["storageSize"], plain["storageSize"])
    assert small["size"] == plain["size"], "size is the logical size, the same for both"
    assert small["indexSizes"]["text_1"] > 0 and small["totalSize"] == small["storageSize"] + small["totalIndexSize"]
    index = next(i for i in db.small.list_indexes() if i["name"] == "text_1")
    assert index["storageEngine"] == spec
    stats = db.command("dbStats")
    assert stats["storageSize"] == plain["storageSize"] + small["storageSize"]
    assert stats["strata"]["dataFileBytes"] >= stats["storageSize"] + stats["indexSize"]
    with pytest.raises(OperationFailure) as error:
        db.create_collection("bad", storageEngine={"strata": {"compression": "brotli"}})
    assert error.value.code == 2  # BadValue
    with pytest.raises(OperationFailure):
        db.small.create_index("other", storageEngine={"strata": {"compression": 7}})
