"""Replica sets of several members (`strata serve --replSet rs3` three times, then
rs.initiate() naming all three), through pymongo as applications use them: replication,
write concerns, reads from secondaries, failover after kill -9, rollback of a primary's writes
that never reached a majority, stepping down, adding and removing members.

Every member listens on 127.0.0.1 on a port picked free for the test (restarts reuse it);
every wait is bounded by a deadline.
"""

import glob
import os
import signal
import threading
import time

import bson
from bson import Int64, ObjectId
import pymongo
import pytest
from pymongo import ReadPreference
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern
from conftest import StrataProcess
from faults import assert_cannot_join, free_port, wait_for

SET = "rs3"


class Member:
    def __init__(self, workdir, index, oplog_mb=64):
        self.dbpath = os.path.join(workdir, f"m{index}")
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.process = None
        self.oplog_mb = oplog_mb

    def start(self):
        args = ["--replSet", SET, "--oplogSizeMB", str(self.oplog_mb)]
        self.process = StrataProcess(self.dbpath, port=self.port, extra_args=args)
        return self

    def log_text(self):
        with open(self.dbpath.rstrip("/") + ".log", encoding="utf-8", errors="replace") as log:
            return log.read()

    def alive(self):
        return self.process is not None and self.process.process.poll() is None

    def kill(self):
        self.process.kill()

    def direct(self, **options):
        return pymongo.MongoClient(
            "127.0.0.1", self.port, directConnection=True, serverSelectionTimeoutMS=2000, **options
        )

    def hello(self):
        with self.direct() as client:
            return client.admin.command("hello")


def primary_of(members):
    for member in members:
        if member.alive():
            try:
                if member.hello().get("isWritablePrimary"):
                    return member
            except pymongo.errors.PyMongoError:
                pass
    return None


def documents(member, collection="c"):
    with member.direct(readPreference="secondaryPreferred") as client:
        return sorted(client.t[collection].find(), key=lambda d: repr(d["_id"]))


# Failover tests are quicker with a shorter election timeout than mongod's default of 10 s.
QUICK_ELECTIONS = {"electionTimeoutMillis": 1000}


def initiate(members, settings=QUICK_ELECTIONS):
    config = {"_id": SET, "members": [{"_id": i, "host": m.host} for i, m in enumerate(members)]}
    if settings is not None:
        config["settings"] = settings
    with members[0].direct() as client:
        client.admin.command("replSetInitiate", config)
    return wait_for("a primary", lambda: primary_of(members))


def set_client(members):
    seeds = ",".join(m.host for m in members)
    return pymongo.MongoClient(f"mongodb://{seeds}/?replicaSet={SET}", serverSelectionTimeoutMS=15000)


@pytest.fixture
def three(workdir, request):
    path = os.path.join(workdir, request.node.name)
    members = [Member(path, i).start() for i in range(3)]
    yield members
    for member in members:
        if member.alive():
            member.process.stop()


def test_three_members_replicate_in_order(three):
    # mongod's default election timeout: a member busy storing the large documents below must
    # not be taken for dead.
    primary = initiate(three, settings=None)
    client = set_client(three)
    c = client.t.c
    c.insert_many([{"_id": i, "n": i} for i in range(200)])
    c.create_index("n")
    c.update_many({"n": {"$lt": 10}}, {"$set": {"low": True}})
    c.delete_many({"n": {"$gte": 190}})
    client.t.other.insert_one({"_id": "x"})
    client.t.other.drop()
    # The default write concern is majority: once acknowledged, a majority holds it; wait for
    # every member with w: 3.
    c.with_options(write_concern=WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": "last"})
    want = documents(primary)
    assert len(want) == 191
    for member in three:
        assert documents(member) == want, member.host
        with member.direct(readPreference="secondaryPreferred") as direct:
            assert [i["name"] for i in direct.t.c.list_indexes()] == ["_id_", "n_1"]
            assert "other" not in direct.t.list_collection_names()
    # Every member's oplog holds the same entries (ts, term and operation) in the same order.
    oplogs = []
    for member in three:
        with member.direct(readPreference="secondaryPreferred") as direct:
            entries = direct.local["oplog.rs"].find({"ns": {"$regex": "^t\\."}})
            oplogs.append([(e["ts"], e["t"], e["op"], e.get("o2", e.get("o"))) for e in entries])
    assert oplogs[0] == oplogs[1] == oplogs[2] and len(oplogs[0]) > 200

    # Large documents replicate too (consensus entries and members' messages are cut to fit the
    # engine's and the wire's limits). (Tens of MiB of them back to back can make the primary
    # step down: docs/replication.md, "Known limits".)
    big = [{"_id": f"big-{i}", "x": "a" * (15 << 20) if i == 0 else "b" * (1 << 20)} for i in range(5)]
    client.t.big.insert_many(big)
    wait_for("the large documents on every member", lambda: all(
        m.direct(readPreference="secondaryPreferred").t.big.count_documents({}) == 5 for m in three), seconds=60)
    for member in three:
        with member.direct(readPreference="secondaryPreferred") as direct:
            assert direct.t.big.count_documents({}) == 5, member.host

    hello = primary.hello()
    assert hello["setName"] == SET and hello["isWritablePrimary"] is True
    assert sorted(hello["hosts"]) == sorted(m.host for m in three)
    assert hello["primary"] == primary.host and "electionId" in hello
    secondary = next(m for m in three if m is not primary)
    seen = secondary.hello()
    assert seen["secondary"] is True and seen["isWritablePrimary"] is False and seen["primary"] == primary.host

    # Secondaries refuse writes with NotWritablePrimary; a write concern no set can meet fails.
    with secondary.direct() as direct, pytest.raises(pymongo.errors.NotPrimaryError) as refused:
        direct.t.c.insert_one({"_id": "on-a-secondary"})
    assert refused.value.details["code"] == 10107
    with pytest.raises(pymongo.errors.WriteConcernError) as unsatisfiable:
        c.with_options(write_concern=WriteConcern(w=5)).insert_one({"_id": "five"})
    assert unsatisfiable.value.code == 100
    # A read preference sends reads to a secondary.
    # (The w: 5 insert stayed, as in MongoDB, and reaches the secondaries as every write does.)
    secondaries = client.t.get_collection("c", read_preference=ReadPreference.SECONDARY)
    wait_for("the secondaries to serve every document", lambda: secondaries.count_documents({}) == 192)

    status = client.admin.command("replSetGetStatus")
    states = sorted(m["stateStr"] for m in status["members"])
    assert states == ["PRIMARY", "SECONDARY", "SECONDARY"], status
    client.close()


def test_failover_after_kill_keeps_every_majority_write(three):
    old = initiate(three)
    client = set_client(three)
    acknowledged = []
    for i in range(300):
        client.t.c.insert_one({"_id": i})
        acknowledged.append(i)
    # A retryable write (lsid + txnNumber) on the old primary: its record replicates with it.
    retrier = set_client(three)
    session = retrier.start_session()
    increment = {"update": "counter", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}, "upsert": True}],
                 "txnNumber": Int64(7)}
    assert retrier.t.command(increment, session=session)["n"] == 1
    # A transaction committed on the old primary: its commit, retried on the new one, is
    # answered "committed" (not NoSuchTransaction, which would make the driver run it again).
    transaction = retrier.start_session()
    transaction.start_transaction()
    retrier.t.tx.insert_one({"_id": "a"}, session=transaction)
    retrier.t.tx.insert_one({"_id": "b"}, session=transaction)
    transaction.commit_transaction()
    old.kill()
    killed_at = time.monotonic()
    survivors = [m for m in three if m is not old]
    new = wait_for("a new primary", lambda: primary_of(survivors), seconds=10)
    elapsed = time.monotonic() - killed_at
    print(f"new primary {new.host} accepts writes {elapsed:.2f}s after kill -9 of {old.host}")
    assert elapsed < 3.0, f"failover took {elapsed:.2f}s"
    # The driver finds the new primary; the writes go on.
    for i in range(300, 400):
        client.t.c.insert_one({"_id": i})
        acknowledged.append(i)
    have = {d["_id"] for d in documents(new)}
    assert set(acknowledged) <= have
    # The driver's retry of that write, after the failover, is answered from the record.
    again = retrier.t.command(increment, session=session)
    assert again["n"] == 1 and "writeErrors" not in again, again
    assert client.t.counter.find_one({"_id": 1})["n"] == 1, "the retried write was applied twice"
    transaction.commit_transaction()  # the driver sends commitTransaction again
    assert sorted(d["_id"] for d in client.t.tx.find()) == ["a", "b"]
    transaction.end_session()
    retrier.close()
    # The old primary comes back as a secondary and catches up.
    old.start()
    wait_for("the old primary to rejoin", lambda: old.hello().get("secondary"))
    client.t.c.with_options(write_concern=WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": "all"})
    wait_for("convergence", lambda: documents(old) == documents(new))
    client.close()


def test_a_secondary_refuses_out_and_merge_and_stays_in_step(three):
    """An aggregate ending in $out or $merge sent to a secondary is refused with
    NotWritablePrimary (10107): run there, its writes entered the secondary's oplog as its own,
    and the secondary could apply nothing from the primary after that (pymongo's own
    test_aggregate_write found it). The set still takes w: 3 writes, and the members agree."""
    primary = initiate(three)
    client = set_client(three)
    source = client.t.c.with_options(write_concern=WriteConcern(w=3, wtimeout=10000))
    source.insert_many([{"_id": i} for i in range(5)])
    secondary = next(m for m in three if m is not primary)
    for stage in [{"$out": "copy"}, {"$merge": {"into": "copy"}}]:
        with secondary.direct(readPreference="secondaryPreferred") as direct:
            with pytest.raises(pymongo.errors.PyMongoError) as refused:
                list(direct.t.c.aggregate([stage]))
        details = getattr(refused.value, "details", None) or getattr(refused.value, "errors", None) or {}
        assert details.get("code") == 10107, refused.value
    list(source.aggregate([{"$out": "copy"}]))
    source.insert_one({"_id": 5})
    for member in three:
        assert documents(member, "copy") == [{"_id": i} for i in range(5)], member.host
        assert documents(member) == [{"_id": i} for i in range(6)], member.host
    client.close()


def test_a_change_stream_returns_only_what_a_majority_holds(three):
    """On the primary, a change stream returns an event only once a majority of the set holds
    its write, as mongod's streams read at majority: a rollback can then never undo an event a
    client saw. With both secondaries stopped (SIGSTOP, shorter than the default 10 s election
    timeout), a w:1 insert is acknowledged but not returned; once they run again it is. A stream
    asking for readConcern local is refused (InvalidOptions, 72)."""
    primary = initiate(three, settings=None)
    secondaries = [m for m in three if m is not primary]
    with primary.direct() as client:
        coll = client.t.c.with_options(write_concern=WriteConcern(w=3, wtimeout=10000))
        coll.insert_one({"_id": "before"})
        with coll.watch(max_await_time_ms=200) as stream:
            for member in secondaries:
                member.process.process.send_signal(signal.SIGSTOP)
            try:
                client.t.c.with_options(write_concern=WriteConcern(w=1)).insert_one({"_id": "unconfirmed"})
                deadline = time.monotonic() + 1.5
                while time.monotonic() < deadline:
                    assert stream.try_next() is None, "an event before a majority held its write"
            finally:
                for member in secondaries:
                    member.process.process.send_signal(signal.SIGCONT)
            event = wait_for("the event once a majority holds it", stream.try_next)
            assert event["documentKey"] == {"_id": "unconfirmed"}
        with pytest.raises(pymongo.errors.OperationFailure) as refused:
            coll.with_options(read_concern=ReadConcern("local")).watch()
        assert refused.value.code == 72


def test_a_member_takes_no_message_from_another_set(three):
    """The set gets a replicaSetId when initiated (rs.conf() shows it; a reconfig keeps it and may
    not change it), and members' messages carry it: a member refuses another set's (93), which
    before crashed its consensus node (a leader of a set of the same name, whose members once
    had these addresses, sent it a commit index past its log)."""
    primary = initiate(three)
    with primary.direct() as client:
        config = client.admin.command("replSetGetConfig")["config"]
        set_id = config["settings"]["replicaSetId"]
        assert isinstance(set_id, ObjectId)
        for member in three:
            with member.direct() as direct:
                assert direct.admin.command("replSetGetConfig")["config"]["settings"]["replicaSetId"] == set_id
        with pytest.raises(pymongo.errors.OperationFailure) as foreign:
            client.admin.command("replSetRaftMessage", 1, messages=[], setId=ObjectId())
        assert foreign.value.code == 93
        changed = {**config, "version": config["version"] + 1, "settings": {**config["settings"], "replicaSetId": ObjectId()}}
        with pytest.raises(pymongo.errors.OperationFailure) as refused:
            client.admin.command("replSetReconfig", changed)
        assert refused.value.code == 103
        client.admin.command("replSetRaftMessage", 1, messages=[], setId=set_id)
    set_client(three).t.c.with_options(write_concern=WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": 1})


def test_write_concern_modes_follow_the_members_tags(three):
    """`w: "<mode>"` names a mode of settings.getLastErrorModes ({dc: 2}: members in two
    different dc's hold the write); it times out (64) when the only member of one dc is down,
    an unknown mode is refused (79), and hello's tags serve read preferences by tag."""
    dcs = ["east", "east", "west"]
    members = [{"_id": i, "host": m.host, "tags": {"dc": dc}} for i, (m, dc) in enumerate(zip(three, dcs))]
    members[2]["priority"] = 0  # the west member is never primary: killing it is no failover
    settings = {**QUICK_ELECTIONS, "getLastErrorModes": {"twoDCs": {"dc": 2}}}
    with three[0].direct() as first:
        first.admin.command("replSetInitiate", {"_id": SET, "members": members, "settings": settings})
    wait_for("a primary", lambda: primary_of(three))
    client = set_client(three)
    two_dcs = client.t.tags.with_options(write_concern=WriteConcern(w="twoDCs", wtimeout=10000))
    two_dcs.insert_one({"_id": 1})
    west = client.t.tags.with_options(read_preference=pymongo.read_preferences.Secondary(tag_sets=[{"dc": "west"}]))
    assert west.find_one({"_id": 1}) == {"_id": 1}, "acknowledged by twoDCs: the west member holds it"
    three[2].kill()
    with pytest.raises(pymongo.errors.WriteConcernError) as timed_out:
        two_dcs.with_options(write_concern=WriteConcern(w="twoDCs", wtimeout=1000)).insert_one({"_id": 2})
    assert timed_out.value.code == 64
    with pytest.raises(pymongo.errors.WriteConcernError) as unknown:
        client.t.tags.with_options(write_concern=WriteConcern(w="threeDCs")).insert_one({"_id": 3})
    assert unknown.value.code == 79
    assert {d["_id"] for d in client.t.tags.find()} == {1, 2, 3}, "the writes stay"
    client.close()


def test_a_primary_cut_off_rolls_back_what_the_set_never_committed(three):
    old = initiate(three)
    client = set_client(three)
    client.t.c.insert_many([{"_id": i} for i in range(50)])
    # Kill both secondaries: the primary still commits w:1 writes locally (until it notices it
    # lost its majority and steps down), which no majority will ever hold. (Stopping them with
    # SIGSTOP would not do: what the primary sent waits in their sockets and reaches them.)
    others = [m for m in three if m is not old]
    for member in others:
        member.kill()
    # (j: the writes are durable on the lone primary, so its rollback must keep every one.)
    lone = old.direct(w=1, journal=True)
    lost = 0
    for i in range(20):
        try:
            lone.t.c.insert_one({"_id": f"lost-{i}"})
            lost += 1
        except pymongo.errors.PyMongoError:
            break
    assert lost > 0, "the primary took no w:1 write before stepping down"
    lone.close()
    old.kill()
    for member in others:
        member.start()
    new = wait_for("a new primary", lambda: primary_of(others))
    client.t.c.insert_one({"_id": "after"})
    old.start()
    wait_for("the old primary to roll back and rejoin", lambda: old.hello().get("secondary"))
    client.t.c.with_options(write_concern=WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": "all"})
    wait_for("convergence", lambda: documents(old) == documents(new))
    assert not any(str(d["_id"]).startswith("lost-") for d in documents(old))
    saved = glob.glob(os.path.join(old.dbpath, "rollback", "*.bson"))
    assert saved, "no rollback file"
    with open(saved[0], "rb") as f:
        entries = bson.decode_all(f.read())
    assert {e["o"]["_id"] for e in entries if e.get("op") == "i"} >= {f"lost-{i}" for i in range(lost)}
    client.close()


def test_step_down_freeze_add_and_remove(three, workdir, request):
    old = initiate(three)
    client = set_client(three)
    client.t.c.insert_many([{"_id": i} for i in range(20)])
    with old.direct() as direct:
        direct.admin.command("replSetStepDown", 30)
    new = wait_for("another primary", lambda: primary_of([m for m in three if m is not old]))
    assert old.hello()["secondary"] is True
    with old.direct() as direct:
        direct.admin.command("replSetFreeze", 30)
        direct.admin.command("replSetFreeze", 0)
    # Add a fourth member that never votes nor becomes primary, builds no indexes (it copies
    # the data without them and skips later index builds) and applies 2 s late, then remove it.
    client.t.c.create_index("before")
    fourth = Member(os.path.join(workdir, request.node.name), 3).start()
    try:
        with new.direct() as direct:
            config = direct.admin.command("replSetGetConfig")["config"]
            assert config["settings"]["electionTimeoutMillis"] == 1000
            config["version"] += 1
            config["members"].append(
                {"_id": 3, "host": fourth.host, "priority": 0, "votes": 0, "buildIndexes": False,
                 "secondaryDelaySecs": 2})
            direct.admin.command("replSetReconfig", config)
        client.t.c.insert_one({"_id": "after-add"})
        client.t.c.create_index("after")
        wait_for("the new member to catch up", lambda: len(documents(fourth)) == 21)
        hello = fourth.hello()
        assert hello["secondary"] is True and fourth.host in hello["passives"]
        client.t.c.with_options(write_concern=WriteConcern(w=4, wtimeout=10000)).insert_one({"_id": "four"})
        with fourth.direct(readPreference="secondaryPreferred") as direct:
            assert [i["name"] for i in direct.t.c.list_indexes()] == ["_id_"]
            client.t.c.insert_one({"_id": "late"})
            written = time.monotonic()
            time.sleep(0.5)
            assert direct.t.c.find_one({"_id": "late"}) is None, "the delayed member applied at once"
            wait_for("the delayed write", lambda: direct.t.c.find_one({"_id": "late"}), seconds=20)
            assert time.monotonic() - written >= 1.9
        assert [i["name"] for i in client.t.c.list_indexes()] == ["_id_", "before_1", "after_1"]
        with new.direct() as direct:
            config = direct.admin.command("replSetGetConfig")["config"]
            config["version"] += 1
            config["members"][-1]["buildIndexes"] = True
            with pytest.raises(pymongo.errors.OperationFailure) as refused:
                direct.admin.command("replSetReconfig", config)
            assert refused.value.code == 103
        with new.direct() as direct:
            config = direct.admin.command("replSetGetConfig")["config"]
            config["version"] += 1
            config["members"] = [m for m in config["members"] if m["_id"] != 3]
            direct.admin.command("replSetReconfig", config)
            assert len(direct.admin.command("replSetGetConfig")["config"]["members"]) == 3
    finally:
        fourth.process.stop()
    client.close()


def test_members_prove_themselves_with_the_key_file(workdir, request):
    """--keyFile: members authenticate to each other as __system with the shared key (and
    access control is on); a stranger cannot send consensus messages, and a member with another
    key cannot join."""
    path = os.path.join(workdir, request.node.name)
    os.makedirs(path, exist_ok=True)
    keys = {}
    for name, text in (("good", "c2VjcmV0a2V5Zm9yc3RyYXRh\n"), ("other", "b3RoZXJrZXlvdGhlcmtleQ==\n")):
        keys[name] = os.path.join(path, f"{name}.key")
        with open(keys[name], "w") as f:
            f.write(text)
        os.chmod(keys[name], 0o600)

    def member(index, key):
        m = Member(path, index)
        m.process = StrataProcess(m.dbpath, port=m.port, extra_args=["--replSet", SET, "--keyFile", keys[key]])
        return m

    members = [member(i, "good") for i in range(3)]
    stranger = None
    try:
        primary = initiate(members)  # from localhost, before any user: the localhost exception
        with primary.direct() as direct:
            direct.admin.command("createUser", "root", pwd="a long secret", roles=["root"])
        seeds = ",".join(m.host for m in members)
        client = pymongo.MongoClient(
            f"mongodb://root:a%20long%20secret@{seeds}/?replicaSet={SET}&authSource=admin",
            serverSelectionTimeoutMS=15000,
        )
        client.t.c.with_options(write_concern=WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": 1})
        with members[1].direct() as anonymous, pytest.raises(pymongo.errors.OperationFailure) as refused:
            anonymous.admin.command("replSetRaftMessage", 1, messages=[])
        assert refused.value.code == 13  # Unauthorized
        stranger = member(3, "other")
        assert_cannot_join(client, stranger.host)
        client.close()
    finally:
        for m in members + ([stranger] if stranger else []):
            if m.alive():
                m.process.stop()


def test_a_member_copies_the_data_when_the_log_no_longer_reaches_back(workdir, request):
    """Initial sync: with a 1 MiB oplog the consensus log is compacted as the oplog is trimmed,
    so a member added later (and one that falls behind by more than the oplog holds) copies
    the data from a snapshot of another member while writes go on, then catches up."""
    path = os.path.join(workdir, request.node.name)
    members = [Member(path, i, oplog_mb=1).start() for i in range(4)]
    three, fourth = members[:3], members[3]
    try:
        initiate(three)
        client = set_client(three)
        c = client.t.c
        c.create_index("n")
        c.create_index("u", unique=True)
        client.t.command("create", "small", viewOn="c", pipeline=[{"$match": {"n": {"$lt": 10}}}])
        # One write per consensus entry, 3 MiB of them: the log is cut behind the oplog's cap.
        pad = "p" * 2000
        for i in range(1500):
            c.insert_one({"_id": i, "n": i % 50, "u": i, "pad": pad})
        c.update_many({"n": 7}, {"$set": {"seven": True}})
        c.delete_many({"n": 49})

        written = []
        stop = threading.Event()

        def writer():
            i = 10_000
            while not stop.is_set() and i < 20_000:
                client.t.live.insert_one({"_id": i})
                written.append(i)
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            with primary_of(three).direct() as direct:
                config = direct.admin.command("replSetGetConfig")["config"]
                config["version"] += 1
                config["members"].append({"_id": 3, "host": fourth.host})
                direct.admin.command("replSetReconfig", config)
            wait_for("the new member to report SECONDARY", lambda: fourth.hello().get("secondary"), seconds=90)
        finally:
            stop.set()
            thread.join(timeout=30)
        assert "initial sync: copied the set's data" in fourth.log_text()
        assert len(written) > 0
        c.with_options(write_concern=WriteConcern(w=4, wtimeout=30000)).insert_one({"_id": "all", "u": -1})
        primary = primary_of(three)
        for name in ("c", "live"):
            assert documents(fourth, name) == documents(primary, name), name
        with fourth.direct(readPreference="secondaryPreferred") as direct:
            assert sorted(i["name"] for i in direct.t.c.list_indexes()) == ["_id_", "n_1", "u_1"]
            assert direct.t.small.count_documents({}) == 10 * (1500 // 50)
            assert direct.t.c.count_documents({"seven": True}) == 1500 // 50

        # A member down while more than its oplog's worth is written copies the data again.
        fourth.kill()
        for i in range(20_000, 21_500):
            c.insert_one({"_id": i, "n": i % 50, "u": i, "pad": pad})
        fourth.start()
        wait_for("the member to catch up again", lambda: fourth.hello().get("secondary"), seconds=90)
        c.with_options(write_concern=WriteConcern(w=4, wtimeout=30000)).insert_one({"_id": "again", "u": -2})
        assert documents(fourth) == documents(primary_of(three))
        assert fourth.log_text().count("initial sync: copied the set's data") >= 2
        client.close()
    finally:
        for member in members:
            if member.alive():
                member.process.stop()


def test_a_set_of_one_over_existing_data_grows_and_a_copy_survives_kill_9(workdir, request):
    """A standalone's data, then `--replSet` and a set of one, then rs.add(): the new member
    joins without a vote, copies the data (killed with -9 halfway, it copies again when it
    starts), catches up, and gets its vote."""
    path = os.path.join(workdir, request.node.name)
    first, second = Member(path, 0), Member(path, 1)
    standalone = StrataProcess(first.dbpath, port=first.port)
    with standalone.client() as client:
        c = client.t.c
        c.create_index("n")
        c.create_index([("s", 1), ("n", -1)])
        for start in range(0, 60_000, 2000):
            c.insert_many([{"_id": i, "n": i % 997, "s": f"s{i % 13}", "pad": "x" * 200} for i in range(start, start + 2000)])
    standalone.stop()
    first.start()
    try:
        with first.direct() as direct:
            direct.admin.command("replSetInitiate", {
                "_id": SET, "members": [{"_id": 0, "host": first.host}], "settings": QUICK_ELECTIONS})
        wait_for("the set of one to be primary", lambda: first.hello().get("isWritablePrimary"))
        second.start()
        with first.direct() as direct:
            config = direct.admin.command("replSetGetConfig")["config"]
            config["version"] += 1
            config["members"].append({"_id": 1, "host": second.host})
            direct.admin.command("replSetReconfig", config)
        wait_for("the copy to start", lambda: "initial sync: copying" in second.log_text(), seconds=30, interval=0.01)
        second.kill()
        assert "initial sync: copied" not in second.log_text(), "the copy ended before the kill: make it larger"
        # Writes go on meanwhile: the new member has no vote yet, the set of one commits alone.
        with first.direct() as direct:
            direct.t.c.insert_one({"_id": "during"})
        second.start()
        wait_for("the new member to report SECONDARY", lambda: second.hello().get("secondary"), seconds=90)
        assert second.log_text().count("initial sync: copying") >= 2
        wait_for("the new member's vote", lambda: "votes from now on" in first.log_text(), seconds=30)
        client = set_client([first, second])
        client.t.c.with_options(write_concern=WriteConcern(w=2, wtimeout=30000)).insert_one({"_id": "after"})
        assert documents(second) == documents(first)
        with second.direct(readPreference="secondaryPreferred") as direct:
            assert sorted(i["name"] for i in direct.t.c.list_indexes()) == ["_id_", "n_1", "s_1_n_-1"]
            assert direct.t.c.count_documents({"s": "s3", "n": {"$lt": 100}}) == \
                client.t.c.count_documents({"s": "s3", "n": {"$lt": 100}})
        client.close()
    finally:
        for member in (first, second):
            if member.alive():
                member.process.stop()
