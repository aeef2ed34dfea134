"""Replica-set mode (`strata serve --replSet rs0`): initiation, hello, the oplog, cluster times.

One server for the module, started with --replSet and initiated the way mongosh's
rs.initiate() does; the driver then connects with replicaSet=rs0, as applications do.
"""

import os
import threading
import time
import uuid

import pymongo
import pytest
from bson import Binary, Int64, Timestamp
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
    client = pymongo.MongoClient(rs_server.uri(replicaSet="rs0", heartbeatFrequencyMS=500), serverSelectionTimeoutMS=10000)
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
    # (Each retryable write also commits a no-op carrying its record for the other members.)
    entries = list(rs_client.local["oplog.rs"].find({"ts": {"$gt": start}, "op": {"$ne": "n"}}))
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
        with pytest.raises(pymongo.errors.OperationFailure) as elsewhere:
            client.admin.command("replSetInitiate", {"_id": "rs2", "members": [{"_id": 0, "host": "x:1"}]})
        assert elsewhere.value.code == 93  # InvalidReplicaSetConfig: no member is this server
        me = f"{second.host}:{second.port}"
        client.admin.command("replSetInitiate", {"_id": "rs2", "members": [{"_id": 0, "host": me}]})
        assert client.t.c.count_documents({}) == 5
        client.t.c.insert_one({"_id": 5})
        assert client.t.c.count_documents({}) == 6
        client.close()
    finally:
        second.stop()


# Retryable writes: the fail point makes the first attempt's reply fail after the write, so the
# driver retries with the same txnNumber; the server must answer from its record.


@pytest.fixture(scope="module")
def rs_test_server(workdir):
    process = StrataProcess(
        os.path.join(workdir, "rs-test"), extra_args=["--replSet", "rs9", "--setParameter", "enableTestCommands=1"]
    )
    direct = process.client(directConnection=True)
    direct.admin.command("replSetInitiate")
    direct.close()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def retrying(rs_test_server):
    uri = rs_test_server.uri(replicaSet="rs9", retryWrites="true", heartbeatFrequencyMS=500)
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)
    yield client
    client.close()


def fail_next(client, command, **data):
    client.admin.command(
        "configureFailPoint", "failCommand", mode={"times": 1}, data={"failCommands": [command], **data}
    )


# Not a state-change code (91 would make the driver rediscover the server first); the label
# comes with it, as mongod sends it.
WRITE_CONCERN_ERROR = {
    "writeConcernError": {"code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting for replication timed out"},
    "errorLabels": ["RetryableWriteError"],
}


def test_a_retried_write_is_applied_once(retrying):
    c = retrying.retry_test.c
    c.drop()
    c.insert_one({"_id": "counter", "n": 0})
    fail_next(retrying, "insert", **WRITE_CONCERN_ERROR)
    c.insert_one({"_id": 1})
    fail_next(retrying, "update", **WRITE_CONCERN_ERROR)
    c.update_one({"_id": "counter"}, {"$inc": {"n": 1}})
    assert c.find_one({"_id": "counter"})["n"] == 1, "the retried $inc was applied once"
    fail_next(retrying, "findAndModify", **WRITE_CONCERN_ERROR)
    returned = c.find_one_and_update({"_id": "counter"}, {"$inc": {"n": 1}}, return_document=True)
    assert returned["n"] == 2 and c.find_one({"_id": "counter"})["n"] == 2
    fail_next(retrying, "delete", **WRITE_CONCERN_ERROR)
    assert c.delete_one({"_id": 1}).deleted_count == 1
    fail_next(retrying, "insert", closeConnection=True)
    c.insert_one({"_id": 2})
    assert {d["_id"] for d in c.find()} == {2, "counter"}
    inserts = retrying.local["oplog.rs"].count_documents({"op": "i", "ns": "retry_test.c"})
    assert inserts == 3, "one oplog entry per write, none for the retries"


def test_retry_labels_and_stale_transaction_numbers(retrying):
    db = retrying.retry_test
    db.d.drop()
    with retrying.start_session() as session:
        first = db.command({"insert": "d", "documents": [{"_id": 1}, {"_id": 2}], "txnNumber": Int64(5)}, session=session)
        again = db.command({"insert": "d", "documents": [{"_id": 1}, {"_id": 2}], "txnNumber": Int64(5)}, session=session)
        assert first["n"] == again["n"] == 2 and "writeErrors" not in again, "the retry answers from the records"
        with pytest.raises(pymongo.errors.OperationFailure) as too_old:
            db.command({"insert": "d", "documents": [{"_id": 3}], "txnNumber": Int64(4)}, session=session)
        assert too_old.value.code == 225  # TransactionTooOld
        fail_next(retrying, "insert", errorCode=262)
        with pytest.raises(pymongo.errors.OperationFailure) as failed:
            db.command({"insert": "d", "documents": [{"_id": 3}], "txnNumber": Int64(6)}, session=session)
        assert "RetryableWriteError" in failed.value.details.get("errorLabels", [])
        # The driver would reuse this session with its own numbers: end it on the server.
        retrying.admin.command("endSessions", [session.session_id])
    assert db.d.count_documents({}) == 2


def test_retries_are_recognised_after_a_restart(workdir):
    """One client and one session across a kill -9 and a restart on the same port."""
    path = os.path.join(workdir, "rs-retry-restart")
    first = StrataProcess(path, extra_args=["--replSet", "rs3"])
    initiating = first.client(directConnection=True)
    initiating.admin.command("replSetInitiate")
    initiating.close()
    client = first.client(directConnection=True, heartbeatFrequencyMS=500)
    command = {"insert": "c", "documents": [{"_id": 1}], "txnNumber": Int64(9), "writeConcern": {"j": True}}
    session = client.start_session()
    assert client.t.command(command, session=session)["n"] == 1
    first.kill()
    second = StrataProcess(path, port=first.port, extra_args=["--replSet", "rs3"])
    try:
        reply = None
        for _ in range(50):
            try:
                reply = client.t.command(command, session=session)
                break
            except pymongo.errors.AutoReconnect:
                time.sleep(0.1)
        assert reply["n"] == 1 and "writeErrors" not in reply, reply
        with pytest.raises(pymongo.errors.OperationFailure) as too_old:
            client.t.command(dict(command, txnNumber=Int64(8)), session=session)
        assert too_old.value.code == 225
        assert client.t.c.count_documents({}) == 1
        session.end_session()
        client.close()
    finally:
        second.stop()


def test_sessions_are_tracked_and_ended(retrying):
    with retrying.start_session() as session:
        retrying.retry_test.e.insert_one({"x": 1}, session=session)
        listed = list(retrying.admin.aggregate([{"$listLocalSessions": {}}]))
        assert any(s["_id"]["id"] == session.session_id["id"] for s in listed)
    # A session id no driver session will reuse: refreshed (so known), then ended.
    other = {"id": Binary(uuid.uuid4().bytes, 4)}
    retrying.admin.command("refreshSessions", [other])
    mine = [{"$listLocalSessions": {}}, {"$match": {"_id.id": other["id"]}}]
    assert len(list(retrying.admin.aggregate(mine))) == 1
    retrying.admin.command("endSessions", [other])
    assert list(retrying.admin.aggregate(mine)) == []
    retrying.admin.command("killAllSessions", [])
    with pytest.raises(pymongo.errors.OperationFailure):
        retrying.admin.command("refreshSessions", [{"id": "not a uuid"}])


def test_tailable_await_data_cursor_on_the_oplog(rs_server, rs_client):
    """The way replication tools read the oplog: a tailable awaitData cursor that returns the
    matching entries, then waits for new ones."""
    start = rs_client.admin.command("ping")["operationTime"]
    oplog = rs_client.local["oplog.rs"]
    cursor = oplog.find(
        {"ts": {"$gt": start}, "ns": "tail_test.c"}, cursor_type=pymongo.CursorType.TAILABLE_AWAIT
    ).max_await_time_ms(300)
    rs_client.tail_test.c.insert_one({"_id": 1})
    assert cursor.next()["o"] == {"_id": 1}
    started = time.monotonic()
    with pytest.raises(StopIteration):
        next(cursor)
    assert cursor.alive, "an empty getMore waits, and the cursor stays open"
    assert 0.2 < time.monotonic() - started < 3
    rs_client.tail_test.c.insert_one({"_id": 2})
    rs_client.tail_test.other.insert_one({"_id": "not matching"})
    assert cursor.next()["o"] == {"_id": 2}
    cursor.close()
    with pytest.raises(pymongo.errors.OperationFailure):
        next(rs_client.tail_test.c.find(cursor_type=pymongo.CursorType.TAILABLE))


def test_an_auth_replica_set_is_set_up_through_the_localhost_exception(workdir):
    """With --auth and no user: rs.initiate() from localhost, then the first user, as with mongod."""
    process = StrataProcess(os.path.join(workdir, "rs-auth"), extra_args=["--replSet", "rsa", "--auth"])
    try:
        client = process.client(directConnection=True)
        with pytest.raises(pymongo.errors.OperationFailure):
            client.admin.command("replSetGetStatus")
        client.admin.command("replSetInitiate")
        client.admin.command("createUser", "root", pwd="secret", roles=["root"])
        with pytest.raises(pymongo.errors.OperationFailure):
            client.admin.command("replSetInitiate")  # the exception ends with the first user
        client.close()
        user = process.client(directConnection=True, username="root", password="secret")
        assert user.admin.command("replSetGetStatus")["myState"] == 1
        user.close()
    finally:
        process.stop()
