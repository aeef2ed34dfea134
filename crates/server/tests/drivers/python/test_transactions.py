"""Multi-document transactions through pymongo on a replica-set server: the convenient API,
commit and abort, snapshot isolation, write conflicts with their labels, retried commits,
commands refused inside a transaction, the lifetime limit, and kill -9 during commits."""

import os
import threading
import time

import pymongo
import pytest
from pymongo.errors import OperationFailure
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern
from conftest import StrataProcess


def initiated(path, *extra):
    process = StrataProcess(path, extra_args=["--replSet", "tx0", *extra])
    direct = process.client(directConnection=True)
    direct.admin.command("replSetInitiate")
    direct.close()
    return process


def connect(process, selection_ms=10000):
    uri = process.uri(replicaSet="tx0", heartbeatFrequencyMS=500)
    return pymongo.MongoClient(uri, serverSelectionTimeoutMS=selection_ms)


@pytest.fixture(scope="module")
def rs(workdir):
    process = initiated(os.path.join(workdir, "tx"), "--setParameter", "transactionLifetimeLimitSeconds=2")
    client = connect(process)
    yield client
    client.close()
    process.stop()


def test_with_transaction_commits_both_or_neither(rs):
    db = rs.tx_test
    db.accounts.drop()
    db.log.drop()
    db.accounts.insert_many([{"_id": "a", "balance": 100}, {"_id": "b", "balance": 0}])
    db.log.insert_one({"_id": "init"})

    def transfer(session):
        db.accounts.update_one({"_id": "a"}, {"$inc": {"balance": -30}}, session=session)
        db.accounts.update_one({"_id": "b"}, {"$inc": {"balance": 30}}, session=session)
        db.log.insert_one({"_id": "t1", "amount": 30}, session=session)
        inside = db.accounts.find_one({"_id": "a"}, session=session)
        outside = db.accounts.find_one({"_id": "a"})
        assert (inside["balance"], outside["balance"]) == (70, 100), "own writes visible, others' not"

    with rs.start_session() as session:
        session.with_transaction(transfer)
    assert [d["balance"] for d in db.accounts.find().sort("_id")] == [70, 30]
    assert db.log.count_documents({}) == 2
    entry = rs.local["oplog.rs"].find_one({"o.applyOps": {"$exists": True}}, sort=[("$natural", -1)])
    assert entry is not None and len(entry["o"]["applyOps"]) == 3 and "lsid" in entry


def test_abort_discards_and_snapshot_isolation(rs):
    c = rs.tx_test.iso
    c.drop()
    c.insert_one({"_id": 1, "v": "before"})
    with rs.start_session() as session:
        session.start_transaction()
        assert c.find_one({"_id": 1}, session=session)["v"] == "before"
        c.insert_one({"_id": 2}, session=session)
        rs.tx_test.iso.insert_one({"_id": 3})  # committed outside, after the snapshot
        assert c.count_documents({}, session=session) == 2, "the snapshot does not see _id 3"
        session.abort_transaction()
    assert sorted(d["_id"] for d in c.find()) == [1, 3]


def test_write_conflicts_fail_at_once_with_the_transient_label(rs):
    c = rs.tx_test.conflict
    c.drop()
    c.insert_one({"_id": 1, "n": 0})
    first, second = rs.start_session(), rs.start_session()
    first.start_transaction()
    second.start_transaction()
    c.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=first)
    with pytest.raises(OperationFailure) as conflict:
        c.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=second)
    assert conflict.value.code == 112 and conflict.value.has_error_label("TransientTransactionError")
    first.commit_transaction()
    with pytest.raises(OperationFailure) as gone:
        second.commit_transaction()
    assert gone.value.code == 251  # NoSuchTransaction: the conflict aborted it
    first.end_session()
    second.end_session()
    assert c.find_one({"_id": 1})["n"] == 1


def test_a_plain_write_waits_for_the_transaction(rs):
    c = rs.tx_test.waits
    c.drop()
    c.insert_one({"_id": 1, "n": 0})
    done = {}
    with rs.start_session() as session:
        session.start_transaction()
        c.update_one({"_id": 1}, {"$inc": {"n": 10}}, session=session)

        def plain():
            done["result"] = rs.tx_test.waits.update_one({"_id": 1}, {"$inc": {"n": 1}}).modified_count

        thread = threading.Thread(target=plain)
        thread.start()
        time.sleep(0.3)
        assert thread.is_alive(), "the plain update waits for the transaction holding the document"
        session.commit_transaction()
        thread.join(timeout=10)
    assert done["result"] == 1 and c.find_one({"_id": 1})["n"] == 11


def test_commit_is_retryable_and_commands_are_checked(rs):
    db = rs.tx_test
    with rs.start_session() as session:
        session.start_transaction()
        db.retry.insert_one({"x": 1}, session=session)
        session.commit_transaction()
        session.commit_transaction()  # a retried commit succeeds again
        session.start_transaction()
        with pytest.raises(OperationFailure) as refused:
            db.command("count", "retry", session=session)
        assert refused.value.code == 263  # OperationNotSupportedInTransaction
        session.abort_transaction()
    with pytest.raises(OperationFailure) as standalone_flags:
        db.command({"find": "retry", "startTransaction": True})
    assert standalone_flags.value.code == 72


def test_durable_commit_and_read_concerns(rs):
    c = rs.tx_test.get_collection("durable")
    c.drop()
    with rs.start_session() as session:
        with session.start_transaction(read_concern=ReadConcern("snapshot"), write_concern=WriteConcern(w="majority", j=True)):
            c.insert_one({"_id": 1}, session=session)
    assert c.find_one({"_id": 1}) == {"_id": 1}
    with rs.start_session(causal_consistency=True) as session:
        c.insert_one({"_id": 2}, session=session)
        assert c.find_one({"_id": 2}, session=session) == {"_id": 2}, "afterClusterTime reads see the write"


def test_a_stalled_transaction_is_aborted_after_its_lifetime(rs):
    c = rs.tx_test.stalled
    c.drop()
    c.insert_one({"_id": 1, "n": 0})
    session = rs.start_session()
    session.start_transaction()
    c.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
    time.sleep(3.5)
    started = time.monotonic()
    c.update_one({"_id": 1}, {"$inc": {"n": 100}})  # not blocked past the lifetime limit
    assert time.monotonic() - started < 3
    with pytest.raises(OperationFailure) as aborted:
        session.commit_transaction()
    assert aborted.value.code == 251
    session.end_session()
    assert c.find_one({"_id": 1})["n"] == 100


def test_kill_9_during_commits_leaves_every_transaction_whole(workdir):
    """Transactions each insert a pair of documents and update a counter, committed j:true,
    from two threads; the server is killed with SIGKILL mid-stream. After the restart every
    acknowledged transaction is there, every pair is whole, the counter equals the pairs, and
    the oplog's applyOps entries name exactly the documents present."""
    path = os.path.join(workdir, "tx-kill")
    process = initiated(path)
    client = connect(process, selection_ms=1000)
    db = client.get_database("kill_test", write_concern=WriteConcern(j=True))
    db.counter.insert_one({"_id": "n", "n": 0})
    acknowledged = set()
    stop = threading.Event()

    def writer(base):
        i = 0
        while not stop.is_set():
            key = base + i
            try:
                with client.start_session() as session:
                    with session.start_transaction(write_concern=WriteConcern(j=True)):
                        db.pairs.insert_many([{"_id": f"{key}-a", "pair": key}, {"_id": f"{key}-b", "pair": key}], session=session)
                        db.counter.update_one({"_id": "n"}, {"$inc": {"n": 1}}, session=session)
                acknowledged.add(key)
            except pymongo.errors.PyMongoError:
                if stop.is_set():
                    return
            i += 1

    threads = [threading.Thread(target=writer, args=(base,)) for base in (0, 1_000_000)]
    for thread in threads:
        thread.start()
    time.sleep(2)
    process.kill()
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    client.close()
    assert len(acknowledged) > 10, "transactions committed before the kill"

    restarted = StrataProcess(path, extra_args=["--replSet", "tx0"])
    try:
        client = restarted.client(directConnection=True)
        db = client.kill_test
        pairs = {}
        for document in db.pairs.find():
            pairs.setdefault(document["pair"], []).append(document["_id"])
        assert all(len(halves) == 2 for halves in pairs.values()), "every transaction is whole"
        assert acknowledged <= set(pairs), "every acknowledged transaction survived"
        assert db.counter.find_one({"_id": "n"})["n"] == len(pairs)
        logged = set()
        for entry in client.local["oplog.rs"].find({"op": "c", "o.applyOps": {"$exists": True}}):
            logged |= {op["o"]["_id"] for op in entry["o"]["applyOps"] if op["op"] == "i"}
        assert logged == {i for halves in pairs.values() for i in halves}, "the oplog matches the data"
        assert db.command("validate", "pairs")["valid"]
        client.close()
    finally:
        restarted.stop()


def test_snapshot_sessions_read_one_point_in_time(rs):
    c = rs.tx_test.snap
    c.drop()
    c.insert_many([{"_id": 1}, {"_id": 2}])
    with rs.start_session(snapshot=True) as session:
        assert len(list(c.find({}, session=session))) == 2
        c.insert_one({"_id": 3})  # after the session's snapshot
        assert len(list(c.find({}, session=session))) == 2, "later reads stay at atClusterTime"
        assert len(list(c.aggregate([{"$match": {}}], session=session))) == 2
        assert sorted(c.distinct("_id", session=session)) == [1, 2]
    assert c.count_documents({}) == 3
    stale = rs.admin.command("ping")["operationTime"]
    c.insert_one({"_id": 4})
    with pytest.raises(OperationFailure) as too_old:
        rs.tx_test.command({"find": "snap", "readConcern": {"level": "snapshot", "atClusterTime": stale}})
    assert too_old.value.code == 239  # SnapshotTooOld: no snapshot held at that time
