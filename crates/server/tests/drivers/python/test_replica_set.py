"""Replica-set mode (`strata serve --replSet rs0`): initiation, hello, the oplog, cluster times.

One server for the module, started with --replSet and initiated the way mongosh's
rs.initiate() does; the driver then connects with replicaSet=rs0, as applications do.
"""

import os
import threading
import time

import pymongo
import pytest
from bson import Timestamp
from conftest import StrataProcess


@pytest.fixture(scope="module")
def rs_server(workdir):
    process = StrataProcess(os.path.join(workdir, "rs"), extra_args=["--replSet", "rs0", "--oplogSizeMB", "64"])
    yield process
    process.stop()


@pytest.fixture(scope="module")
def rs_client(rs_server):
    direct = rs_server.client(directConnection=True)
    hello = direct.admin.command("hello")
    assert hello["isWritablePrimary"] is False and hello["setName"] == "rs0"
    assert "Does not have a valid replica set config" in hello["info"]
    with pytest.raises(pymongo.errors.NotPrimaryError) as refused:
        direct.t.c.insert_one({"before": "initiate"})
    assert refused.value.details["code"] == 10107  # NotWritablePrimary
    with pytest.raises(pymongo.errors.OperationFailure) as early:
        direct.admin.command("replSetGetStatus")
    assert early.value.code == 94  # NotYetInitialized
    direct.admin.command("replSetInitiate")
    with pytest.raises(pymongo.errors.OperationFailure) as again:
        direct.admin.command("replSetInitiate")
    assert again.value.code == 23  # AlreadyInitialized
    direct.close()
    client = pymongo.MongoClient(rs_server.uri(replicaSet="rs0"), serverSelectionTimeoutMS=10000)
    yield client
    client.close()


def test_hello_reports_a_primary_of_one_member(rs_server, rs_client):
    hello = rs_client.admin.command("hello")
    me = f"{rs_server.host}:{rs_server.port}"
    assert hello["isWritablePrimary"] is True and hello["secondary"] is False
    assert (hello["setName"], hello["hosts"], hello["primary"], hello["me"]) == ("rs0", [me], me, me)
    assert hello["setVersion"] == 1
    assert set(hello["topologyVersion"]) == {"processId", "counter"}
    assert hello["lastWrite"]["opTime"]["t"] == 1
    assert "$clusterTime" in hello and isinstance(hello["operationTime"], Timestamp)
    assert rs_client.topology_description.topology_type_name == "ReplicaSetWithPrimary"


def test_status_and_config(rs_client):
    status = rs_client.admin.command("replSetGetStatus")
    assert status["set"] == "rs0" and status["myState"] == 1
    assert [m["stateStr"] for m in status["members"]] == ["PRIMARY"]
    config = rs_client.admin.command("replSetGetConfig")["config"]
    assert config["_id"] == "rs0" and len(config["members"]) == 1


def test_every_change_is_in_the_oplog_in_order(rs_client):
    db = rs_client.oplog_test
    db.drop_collection("c")
    start = rs_client.admin.command("ping")["operationTime"]
    db.c.insert_many([{"_id": i, "v": i} for i in range(3)])
    db.c.update_one({"_id": 1}, {"$set": {"v": 10}, "$unset": {"gone": 1}})
    db.c.replace_one({"_id": 2}, {"w": 1})
    db.c.delete_one({"_id": 0})
    db.c.create_index("v")
    after = rs_client.admin.command("ping")["operationTime"]
    assert after > start
    entries = list(rs_client.local["oplog.rs"].find({"ts": {"$gt": start}}))
    ops = [(e["op"], e["ns"]) for e in entries]
    assert ops == [("c", "oplog_test.$cmd")] + [("i", "oplog_test.c")] * 3 + [
        ("u", "oplog_test.c"),
        ("u", "oplog_test.c"),
        ("d", "oplog_test.c"),
        ("c", "oplog_test.$cmd"),
    ]
    assert entries[4]["o"] == {"$v": 2, "diff": {"u": {"v": 10}}} and entries[4]["o2"] == {"_id": 1}
    assert entries[5]["o"] == {"_id": 2, "w": 1}
    assert entries[6]["o"] == {"_id": 0}
    assert entries[7]["o"]["createIndexes"] == "c" and entries[7]["o"]["key"] == {"v": 1}
    stamps = [e["ts"] for e in entries]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    with pytest.raises(pymongo.errors.OperationFailure):
        rs_client.local["oplog.rs"].insert_one({"op": "forged"})


def test_awaitable_hello_waits_without_a_change(rs_server, rs_client):
    """The streaming protocol: hello with the current topologyVersion parks for maxAwaitTimeMS,
    while other commands on other connections go on."""
    direct = rs_server.client(directConnection=True)
    version = direct.admin.command("hello")["topologyVersion"]
    done = {}

    def awaitable():
        started = time.monotonic()
        reply = direct.admin.command({"hello": 1, "topologyVersion": version, "maxAwaitTimeMS": 700})
        done["waited"] = time.monotonic() - started
        done["reply"] = reply

    thread = threading.Thread(target=awaitable)
    thread.start()
    for _ in range(20):
        rs_client.admin.command("ping")
    thread.join(timeout=10)
    assert 0.6 <= done["waited"] < 5, done
    assert done["reply"]["topologyVersion"] == version
    stale = dict(version, counter=version["counter"] - 1)
    started = time.monotonic()
    direct.admin.command({"hello": 1, "topologyVersion": stale, "maxAwaitTimeMS": 5000})
    assert time.monotonic() - started < 1, "a stale topologyVersion is answered at once"
    direct.close()


def test_the_set_survives_a_restart(workdir):
    path = os.path.join(workdir, "rs-restart")
    first = StrataProcess(path, extra_args=["--replSet", "rs1"])
    client = first.client(directConnection=True)
    client.admin.command("replSetInitiate")
    client.t.get_collection("c", write_concern=pymongo.WriteConcern(j=True)).insert_one({"_id": 1})
    last = client.admin.command("ping")["operationTime"]
    client.close()
    first.kill()
    second = StrataProcess(path, extra_args=["--replSet", "rs1"])
    try:
        client = second.client(directConnection=True)
        hello = client.admin.command("hello")
        assert hello["isWritablePrimary"] is True, "a stored configuration makes it primary at once"
        client.t.c.insert_one({"_id": 2})
        assert client.admin.command("ping")["operationTime"] > last
        inserted = [e["o"]["_id"] for e in client.local["oplog.rs"].find({"op": "i", "ns": "t.c"})]
        assert inserted == [1, 2]
        client.close()
    finally:
        second.stop()


def test_a_standalone_data_directory_restarts_as_a_replica_set(workdir):
    path = os.path.join(workdir, "standalone-then-rs")
    first = StrataProcess(path)
    client = first.client()
    client.t.c.insert_many([{"_id": i} for i in range(5)])
    with pytest.raises(pymongo.errors.OperationFailure) as refused:
        client.admin.command("replSetGetStatus")
    assert refused.value.code == 76  # NoReplicationEnabled
    client.close()
    first.stop()
    second = StrataProcess(path, extra_args=["--replSet", "rs2"])
    try:
        client = second.client(directConnection=True)
        client.admin.command("replSetInitiate", {"_id": "rs2", "members": [{"_id": 0, "host": "x:1"}]})
        assert client.t.c.count_documents({}) == 5
        client.t.c.insert_one({"_id": 5})
        assert client.t.c.count_documents({}) == 6
        client.close()
    finally:
        second.stop()
