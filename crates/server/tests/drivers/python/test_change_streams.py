"""Change streams on a replica-set server: events of every kind, the three scopes, resume
tokens, a pipeline after $changeStream, and getMore waiting for events."""

import os
import threading
import time

import pymongo
import pytest
from conftest import StrataProcess


@pytest.fixture(scope="module")
def rs(workdir):
    process = StrataProcess(os.path.join(workdir, "cs"), extra_args=["--replSet", "cs0"])
    direct = process.client(directConnection=True)
    direct.admin.command("replSetInitiate")
    direct.close()
    client = pymongo.MongoClient(process.uri(replicaSet="cs0", heartbeatFrequencyMS=500), serverSelectionTimeoutMS=10000)
    yield client
    client.close()
    process.stop()


def drain(stream, count, timeout=10):
    events = []
    deadline = time.monotonic() + timeout
    while len(events) < count and time.monotonic() < deadline:
        event = stream.try_next()
        if event is not None:
            events.append(event)
    return events


def test_collection_stream_sees_every_kind_of_change(rs):
    c = rs.cs_test.c
    c.drop()
    c.insert_one({"_id": 0})
    with c.watch(max_await_time_ms=200) as stream:
        c.insert_one({"_id": 1, "a": 1, "arr": [1, 2, 3]})
        c.update_one({"_id": 1}, {"$set": {"a": 2, "b.c": 1}, "$unset": {"zzz": 1}, "$pop": {"arr": 1}})
        c.replace_one({"_id": 1}, {"x": 1})
        c.delete_one({"_id": 1})
        rs.cs_test.other.insert_one({"_id": "not in this stream"})
        c.rename("c2")
        events = drain(stream, 6)
    kinds = [e["operationType"] for e in events]
    assert kinds == ["insert", "update", "replace", "delete", "rename", "invalidate"], kinds
    insert, update, replace, delete, rename, _ = events
    assert insert["fullDocument"] == {"_id": 1, "a": 1, "arr": [1, 2, 3]}
    assert insert["ns"] == {"db": "cs_test", "coll": "c"} and insert["documentKey"] == {"_id": 1}
    assert update["updateDescription"]["updatedFields"] == {"a": 2, "b": {"c": 1}}
    assert update["updateDescription"]["truncatedArrays"] == [{"field": "arr", "newSize": 2}]
    assert replace["fullDocument"] == {"_id": 1, "x": 1}
    assert delete["documentKey"] == {"_id": 1} and "fullDocument" not in delete
    assert rename["to"] == {"db": "cs_test", "coll": "c2"}
    assert all("clusterTime" in e and "_data" in e["_id"] for e in events)


def test_update_description_is_mongodb_s(rs):
    c = rs.cs_test.u
    c.drop()
    c.insert_one({"_id": 1, "a": 1, "gone": True, "arr": [1, 2, 3], "sub": {"x": 1}})
    with c.watch(max_await_time_ms=200) as stream:
        c.update_one({"_id": 1}, {"$set": {"a": 2, "sub.x": 5}, "$unset": {"gone": 1}, "$pop": {"arr": 1}})
        (event,) = drain(stream, 1)
    description = event["updateDescription"]
    assert description["updatedFields"] == {"a": 2, "sub.x": 5}
    assert description["removedFields"] == ["gone"]
    assert description["truncatedArrays"] == [{"field": "arr", "newSize": 2}]


def test_update_lookup_and_pipeline(rs):
    c = rs.cs_test.p
    c.drop()
    c.insert_one({"_id": 1, "n": 0})
    pipeline = [{"$match": {"operationType": "update"}}, {"$project": {"fullDocument": 1, "operationType": 1}}]
    with c.watch(pipeline, full_document="updateLookup", max_await_time_ms=200) as stream:
        c.insert_one({"_id": 2})
        c.update_one({"_id": 1}, {"$inc": {"n": 1}})
        (event,) = drain(stream, 1)
    assert event["operationType"] == "update" and event["fullDocument"] == {"_id": 1, "n": 1}
    assert "ns" not in event
    with pytest.raises(pymongo.errors.OperationFailure):
        with c.watch([{"$project": {"_id": 0}}], max_await_time_ms=100) as stream:
            c.insert_one({"_id": 3})
            drain(stream, 1, timeout=2)


def test_resume_after_and_start_at_operation_time(rs):
    c = rs.cs_test.r
    c.drop()
    start = rs.admin.command("ping")["operationTime"]
    with c.watch(max_await_time_ms=200) as stream:
        for i in range(5):
            c.insert_one({"_id": i})
        events = drain(stream, 2)
        token = events[1]["_id"]
    with c.watch(resume_after=token, max_await_time_ms=200) as resumed:
        rest = drain(resumed, 3)
    assert [e["documentKey"]["_id"] for e in rest] == [2, 3, 4]
    with c.watch(start_at_operation_time=start, max_await_time_ms=200) as replay:
        assert [e["documentKey"]["_id"] for e in drain(replay, 5) if e["operationType"] == "insert"][:5] == [0, 1, 2, 3, 4]
    with c.watch(max_await_time_ms=200) as quiet:
        assert quiet.try_next() is None
        assert quiet.resume_token is not None, "postBatchResumeToken with no event"


def test_database_and_cluster_streams(rs):
    db = rs.cs_db
    db.drop_collection("a")
    with db.watch(max_await_time_ms=200) as db_stream, rs.watch(max_await_time_ms=200) as cluster:
        db.a.insert_one({"_id": 1})
        db.b.insert_one({"_id": 2})
        rs.cs_elsewhere.z.insert_one({"_id": 3})
        db_events = drain(db_stream, 2)
        cluster_events = drain(cluster, 3)
    assert [(e["ns"]["coll"], e["documentKey"]["_id"]) for e in db_events] == [("a", 1), ("b", 2)]
    assert {e["ns"]["db"] for e in cluster_events} == {"cs_db", "cs_elsewhere"}
    with db.watch(max_await_time_ms=200) as db_stream:
        rs.drop_database("cs_db")
        kinds = [e["operationType"] for e in drain(db_stream, 4)]
    assert kinds[-2:] == ["dropDatabase", "invalidate"], kinds


def test_get_more_waits_for_events_without_blocking_others(rs):
    c = rs.cs_test.w
    c.drop()
    got = {}
    with c.watch(max_await_time_ms=5000) as stream:

        def wait_for_one():
            started = time.monotonic()
            got["event"] = stream.next()
            got["waited"] = time.monotonic() - started

        thread = threading.Thread(target=wait_for_one)
        thread.start()
        time.sleep(0.5)
        for _ in range(10):
            rs.admin.command("ping")
        c.insert_one({"_id": "wake"})
        thread.join(timeout=10)
    assert got["event"]["documentKey"] == {"_id": "wake"}
    assert 0.4 < got["waited"] < 4, got["waited"]


def test_a_standalone_server_refuses_change_streams(client):
    with pytest.raises(pymongo.errors.OperationFailure):
        client.t.c.watch()


def test_pre_and_post_images(rs):
    db = rs.cs_images
    db.drop_collection("kept")
    db.create_collection("kept", changeStreamPreAndPostImages={"enabled": True})
    db.kept.insert_one({"_id": 1, "n": 1, "tag": "x"})
    options = dict(full_document="required", full_document_before_change="required", max_await_time_ms=200)
    with db.kept.watch(**options) as stream:
        db.kept.update_one({"_id": 1}, {"$inc": {"n": 1}, "$unset": {"tag": 1}})
        db.kept.replace_one({"_id": 1}, {"n": 10})
        with rs.start_session() as session:
            with session.start_transaction():
                db.kept.update_one({"_id": 1}, {"$set": {"in": "txn"}}, session=session)
        db.kept.delete_one({"_id": 1})
        update, replace, in_txn, delete = drain(stream, 4)
    assert update["fullDocumentBeforeChange"] == {"_id": 1, "n": 1, "tag": "x"}
    assert update["fullDocument"] == {"_id": 1, "n": 2}
    assert replace["fullDocumentBeforeChange"] == {"_id": 1, "n": 2} and replace["fullDocument"] == {"_id": 1, "n": 10}
    assert in_txn["fullDocumentBeforeChange"] == {"_id": 1, "n": 10} and in_txn["fullDocument"]["in"] == "txn"
    assert "lsid" in in_txn and "txnNumber" in in_txn
    assert delete["fullDocumentBeforeChange"] == {"_id": 1, "n": 10, "in": "txn"}

    db.drop_collection("plain")
    db.plain.insert_one({"_id": 1})
    with db.plain.watch(full_document_before_change="whenAvailable", max_await_time_ms=200) as stream:
        db.plain.delete_one({"_id": 1})
        (event,) = drain(stream, 1)
    assert event["fullDocumentBeforeChange"] is None
    db.plain.insert_one({"_id": 2})
    with pytest.raises(pymongo.errors.OperationFailure):
        with db.plain.watch(full_document_before_change="required", max_await_time_ms=200) as stream:
            db.plain.delete_one({"_id": 2})
            drain(stream, 1, timeout=2)
    db.command("collMod", "plain", changeStreamPreAndPostImages={"enabled": True})
    db.plain.insert_one({"_id": 3})
    with db.plain.watch(full_document_before_change="required", max_await_time_ms=200) as stream:
        db.plain.delete_one({"_id": 3})
        (event,) = drain(stream, 1)
    assert event["fullDocumentBeforeChange"] == {"_id": 3}
    with pytest.raises(pymongo.errors.OperationFailure) as refused:
        db.command("collMod", "plain", recordPreImages=True)
    assert refused.value.code == 72


def collection_uuid(db, name):
    (info,) = db.list_collections(filter={"name": name})
    return info["info"]["uuid"]


def test_expanded_events_name_the_collection_by_the_uuid_list_collections_shows(rs):
    db = rs.cs_uuid
    db.drop_collection("a")
    db.drop_collection("b")
    db.create_collection("a")
    db.create_collection("b")
    a, b = collection_uuid(db, "a"), collection_uuid(db, "b")
    assert a != b
    with db.a.watch(max_await_time_ms=200, show_expanded_events=True) as expanded, db.a.watch(
        max_await_time_ms=200
    ) as plain:
        db.a.insert_one({"_id": 1})
        db.a.create_index("x")
        db.a.rename("b", dropTarget=True)
        events = drain(expanded, 3)
        plain_events = drain(plain, 2)
    assert [e["operationType"] for e in events] == ["insert", "createIndexes", "rename"]
    assert all(e["collectionUUID"] == a for e in events), events
    assert events[2]["operationDescription"] == {"to": {"db": "cs_uuid", "coll": "b"}, "dropTarget": b}
    assert all("collectionUUID" not in e and "operationDescription" not in e for e in plain_events)
    assert collection_uuid(db, "b") == a, "a rename within a database keeps the UUID"


def test_a_collection_keeps_its_uuid_over_a_restart(workdir):
    process = StrataProcess(os.path.join(workdir, "uuid"))
    client = process.client()
    client.u.c.insert_one({"_id": 1})
    before = collection_uuid(client.u, "c")
    assert before.subtype == 4 and len(before) == 16
    client.close()
    process.stop()
    process = StrataProcess(os.path.join(workdir, "uuid"))
    client = process.client()
    assert collection_uuid(client.u, "c") == before
    client.u.c.drop()
    client.u.c.insert_one({"_id": 1})
    assert collection_uuid(client.u, "c") != before, "a collection made again is a new one"
    client.close()
    process.stop()
