"""A fault harness for Strata replica sets: real `strata serve` processes, a proxy in front of
each member that the test controls link by link, workloads through pymongo, and checkers.

Addresses (all loopback): member j listens on 127.0.1.(j+1):PORT_j and its connections to other
members start from that address; its proxy listens on 127.0.0.(j+11):PORT_j, which is the host
the set's configuration names. A proxy tells who connects by the source address (another member,
or a client from 127.0.0.1), so every link i -> j can be cut (a partition, one-way or both ways)
or slowed on its own. Cutting a link closes its open connections and refuses new ones.

A member may run with a fake wall clock (libfaketime), which the test moves (`set_clock`).

Checkers: `lost_writes` (no acknowledged w:"majority" insert missing), `linearizable` (a
compare-and-set register's history, Wing & Gong's search with Lowe's memoization; operations
whose outcome is unknown may or may not have taken effect), `list_append.check` (transactions
appending to lists, checked for the anomalies Elle finds), and `converged` (every member holds
the same documents, indexes and oplog).
"""

import asyncio
import os
import random
import signal
import socket
import subprocess
import threading
import time

import pymongo
from pymongo import ReadPreference

import list_append
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

BIN = os.environ.get("STRATA_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "..", "..", "target", "release", "strata"
)
SET = "faults"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxies:
    """One proxy per member, run by an asyncio loop in a thread. `cut(i, j)` blocks i -> j
    (i, j: member indexes, or "client"); `delay(seconds)` slows every link."""

    def __init__(self, members):
        self.members = members
        self.blocked = set()
        self.latency = 0.0
        self.connections = {}
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.servers = []
        for member in self.members:
            server = self.loop.run_until_complete(
                asyncio.start_server(
                    lambda r, w, m=member: self._serve(m, r, w), member.proxy_ip, member.port, reuse_address=True
                )
            )
            self.servers.append(server)
        self.ready.set()
        self.loop.run_forever()

    def add(self, member):
        """A proxy for a member joining (the members list is the cluster's own)."""

        async def start():
            server = await asyncio.start_server(
                lambda r, w, m=member: self._serve(m, r, w), member.proxy_ip, member.port, reuse_address=True
            )
            self.servers.append(server)

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(5)

    def source(self, ip):
        for member in self.members:
            if member.ip == ip:
                return member.index
        return "client"

    async def _serve(self, member, reader, writer):
        link = (self.source(writer.get_extra_info("peername")[0]), member.index)
        if link in self.blocked:
            writer.close()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(member.ip, member.port)
        except OSError:
            writer.close()
            return
        self.connections.setdefault(link, set()).update({writer, upstream_writer})
        await asyncio.gather(
            self._pipe(link, reader, upstream_writer), self._pipe(link, upstream_reader, writer), return_exceptions=True
        )
        for w in (writer, upstream_writer):
            self.connections.get(link, set()).discard(w)
            w.close()

    async def _pipe(self, link, reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data or link in self.blocked:
                    break
                if self.latency:
                    await asyncio.sleep(self.latency)
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _call(self, function):
        done = threading.Event()

        def run():
            function()
            done.set()

        self.loop.call_soon_threadsafe(run)
        done.wait(5)

    def cut(self, source, target):
        def run():
            self.blocked.add((source, target))
            for w in self.connections.pop((source, target), set()):
                w.close()

        self._call(run)

    def heal(self):
        self._call(self.blocked.clear)
        self.latency = 0.0

    def isolate(self, index):
        """Both ways between member `index` and everyone (other members and clients)."""
        for other in [m.index for m in self.members if m.index != index] + ["client"]:
            self.cut(other, index)
            if other != "client":
                self.cut(index, other)

    def delay(self, seconds):
        self.latency = seconds

    def close(self):
        def stop():
            for server in self.servers:
                server.close()
            self.loop.stop()

        self.loop.call_soon_threadsafe(stop)
        self.thread.join(5)


# libfaketime, for the clock-jump scenario: a member started with a fake clock reads its wall
# clock's offset from a file the test rewrites (re-read every second); its monotonic clock
# (elections, timeouts) is left alone, as a wall clock stepped by NTP or an operator would be.
FAKETIME_LIBRARY = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


class Member:
    def __init__(self, workdir, index, fake_clock=False):
        self.index = index
        self.clock_file = os.path.join(workdir, f"m{index}.clock") if fake_clock else None
        self.ip = f"127.0.1.{index + 1}"
        self.proxy_ip = f"127.0.0.{index + 11}"
        self.port = free_port()
        self.host = f"{self.proxy_ip}:{self.port}"
        self.dbpath = os.path.join(workdir, f"m{index}")
        self.process = None
        self.stopped = False

    def start(self):
        os.makedirs(self.dbpath, exist_ok=True)
        log = open(self.dbpath + ".log", "ab")
        env = dict(os.environ)
        if self.clock_file:
            if not os.path.exists(self.clock_file):
                self.set_clock(0)
            env.update(LD_PRELOAD=FAKETIME_LIBRARY, FAKETIME_TIMESTAMP_FILE=self.clock_file,
                       FAKETIME_CACHE_DURATION="1", DONT_FAKE_MONOTONIC="1")
        self.process = subprocess.Popen(
            [BIN, "serve", "--dbpath", self.dbpath, "--bind", self.ip, "--port", str(self.port),
             "--replSet", SET, "--cache-size", "64MiB", "--oplogSizeMB", "64"],
            stdout=subprocess.PIPE, stderr=log, env=env,
        )
        line = self.process.stdout.readline().decode()
        assert line.startswith("strata listening on "), f"member {self.index} did not start: {line!r}"
        self.stopped = False

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def set_clock(self, offset_seconds):
        """Moves this member's wall clock `offset_seconds` from the real one (within a second;
        only for a member started with a fake clock)."""
        written = self.clock_file + ".new"
        with open(written, "w") as f:
            f.write(f"{offset_seconds:+d}\n")
        os.replace(written, self.clock_file)

    def kill(self):
        if self.alive():
            self.process.kill()
            self.process.wait(30)

    def pause(self):
        self.process.send_signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self):
        self.process.send_signal(signal.SIGCONT)
        self.stopped = False

    def direct(self):
        """A client straight to the member (not through its proxy)."""
        return pymongo.MongoClient(self.ip, self.port, directConnection=True, serverSelectionTimeoutMS=2000,
                                   readPreference="secondaryPreferred")

    def hello(self):
        with self.direct() as client:
            return client.admin.command("hello")

    def stop(self):
        if self.alive():
            if self.stopped:
                self.resume()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()


def wait_for(what, check, seconds=20.0, interval=0.05):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except pymongo.errors.PyMongoError:
            pass
        time.sleep(interval)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


def assert_cannot_join(client, host):
    """rs.add() of the server at `host` (non-voting) is refused with "Authentication failed":
    it could not prove itself a member, or the set could not prove itself to it."""
    config = client.admin.command("replSetGetConfig")["config"]
    config["version"] += 1
    config["members"].append({"_id": max(m["_id"] for m in config["members"]) + 1, "host": host, "priority": 0,
                              "votes": 0})
    try:
        client.admin.command("replSetReconfig", config)
    except pymongo.errors.OperationFailure as rejected:
        assert "Authentication failed" in str(rejected), rejected
    else:
        raise AssertionError(f"{host} was added")


class Cluster:
    def __init__(self, workdir, size, fake_clocks=False):
        os.makedirs(workdir, exist_ok=True)
        self.workdir, self.fake_clocks = workdir, fake_clocks
        self.members = [Member(workdir, i, fake_clocks) for i in range(size)]
        self.proxies = Proxies(self.members)
        for member in self.members:
            member.start()
        config = {
            "_id": SET,
            "members": [{"_id": m.index, "host": m.host} for m in self.members],
            # Failovers within about a second, not mongod's default 10 s (faults come every few).
            "settings": {"electionTimeoutMillis": 1000},
        }
        with self.members[0].direct() as client:
            client.admin.command("replSetInitiate", config)
        self.primary()

    def primary(self, seconds=20.0):
        def find():
            for member in self.members:
                if member.alive() and not member.stopped and member.hello().get("isWritablePrimary"):
                    return member
            return None

        return wait_for("a primary", find, seconds)

    def add_member(self):
        """Starts one more member (empty, with its proxy) and adds it with a reconfig, as
        rs.add() does; retried while the set has no primary. Returns it."""
        member = Member(self.workdir, len(self.members), self.fake_clocks)
        self.members.append(member)
        self.proxies.add(member)
        member.start()

        def reconfigure():
            with self.client() as client:
                config = client.admin.command("replSetGetConfig")["config"]
                if all(m["host"] != member.host for m in config["members"]):
                    config["version"] += 1
                    config["members"].append({"_id": member.index, "host": member.host})
                    client.admin.command("replSetReconfig", config)
                return True

        wait_for("the new member to be added", reconfigure, seconds=30, interval=0.2)
        return member

    def client(self, **options):
        seeds = ",".join(m.host for m in self.members)
        return pymongo.MongoClient(
            f"mongodb://{seeds}/?replicaSet={SET}", serverSelectionTimeoutMS=3000, socketTimeoutMS=5000,
            connectTimeoutMS=1000, **options,
        )

    def heal(self):
        """Ends every fault: links healed, paused members resumed, dead ones restarted."""
        self.proxies.heal()
        for member in self.members:
            if member.stopped:
                member.resume()
            if not member.alive():
                member.start()

    def converged(self, collections, seconds=30.0):
        """Waits until every member holds the same documents in `collections`, the same
        indexes and the same oplog entries; returns the primary's documents."""
        primary = self.primary()
        with self.client() as client:
            client.t.get_collection("marker", write_concern=WriteConcern(w=len(self.members), wtimeout=20000)).insert_one({})

        def views():
            seen = []
            for member in self.members:
                with member.direct() as direct:
                    docs = {name: sorted(map(repr, direct.t[name].find())) for name in collections}
                    indexes = {name: sorted(i["name"] for i in direct.t[name].list_indexes()) for name in collections}
                    oplog = [(e["ts"], e["t"], e["op"]) for e in direct.local["oplog.rs"].find({"ns": {"$regex": "^t\\."}})]
                    seen.append((docs, indexes, oplog))
            # A member that copied the data (initial sync) holds the oplog from its copy on:
            # the oplogs are compared from the newest first entry.
            start = max((oplog[0][0] for _, _, oplog in seen if oplog), default=None)
            return [(docs, indexes, [e for e in oplog if e[0] >= start]) for docs, indexes, oplog in seen]

        def same():
            seen = views()
            return all(view == seen[0] for view in seen)

        wait_for("every member to hold the same data and oplog", same, seconds)
        with primary.direct() as direct:
            return {name: list(direct.t[name].find()) for name in collections}

    def close(self):
        for member in self.members:
            member.stop()
        self.proxies.close()


class History:
    """Operations as the clients saw them: (process, kind, argument, start, end, outcome, value)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.operations = []

    def add(self, *operation):
        with self.lock:
            self.operations.append(operation)


def run_workloads(cluster, seconds, rng, history, acknowledged, threads=3, transactions=None):
    """Insert and register clients for `seconds`, each with its own connection pool; with a
    `transactions` list, two list-append transaction clients too (see list_append.py)."""
    stop = time.monotonic() + seconds
    errors = []

    def appender(number, seed):
        client = cluster.client()
        list_append.worker(client, number, seed, stop, transactions)
        client.close()

    def inserter(number):
        client = cluster.client()
        c = client.t.c
        i = 0
        while time.monotonic() < stop:
            key = f"{number}-{i}"
            i += 1
            try:
                c.insert_one({"_id": key})
                acknowledged.append(key)
            except pymongo.errors.PyMongoError:
                time.sleep(0.05)
        client.close()

    def register(number, seed):
        local = random.Random(seed)
        client = cluster.client(retryWrites=False)
        reg = client.t.get_collection("reg", read_concern=ReadConcern("linearizable"))
        while time.monotonic() < stop:
            kind = local.choice(["read", "write", "cas"])
            value = local.randrange(5)
            start = time.monotonic()
            try:
                if kind == "read":
                    found = reg.find_one({"_id": "r"})
                    outcome, result = "ok", found["v"] if found else None
                elif kind == "write":
                    reg.update_one({"_id": "r"}, {"$set": {"v": value}}, upsert=True)
                    outcome, result = "ok", None
                else:
                    expected = local.randrange(5)
                    found = reg.find_one_and_update({"_id": "r", "v": expected}, {"$set": {"v": value}})
                    outcome, result = ("ok" if found else "fail"), None
                    value = (expected, value)
            except (pymongo.errors.ConnectionFailure, pymongo.errors.WriteConcernError,
                    pymongo.errors.NotPrimaryError, pymongo.errors.ExecutionTimeout):
                outcome, result = "unknown", None
                if kind == "cas":
                    value = (expected, value)
                time.sleep(0.05)
            except pymongo.errors.OperationFailure as failure:
                # Refused before doing anything (not primary, stepped down before the read).
                outcome, result = ("unknown" if kind != "read" else "fail"), None
                if kind == "cas":
                    value = (expected, value)
                time.sleep(0.05)
            history.add(number, kind, value, start, time.monotonic(), outcome, result)
        client.close()

    workers = [threading.Thread(target=inserter, args=(n,)) for n in range(threads)]
    workers += [threading.Thread(target=register, args=(n, rng.random())) for n in range(threads)]
    if transactions is not None:
        workers += [threading.Thread(target=appender, args=(n + 1, rng.random())) for n in range(2)]
    for worker in workers:
        worker.start()
    return workers, errors


def linearizable(operations):
    """Whether a single register's history (see `History`) is linearizable. Reads that failed
    are left out; writes and compare-and-sets whose outcome is unknown may have taken effect
    at any time after they began, or never."""
    ops = []
    for process, kind, argument, start, end, outcome, result in operations:
        if kind == "read" and outcome != "ok":
            continue
        if outcome == "unknown":
            end = float("inf")
        ops.append((start, end, kind, argument, outcome, result))
    ops.sort()
    n = len(ops)
    required = sum(1 << i for i, op in enumerate(ops) if op[4] != "unknown")
    seen = set()
    stack = [(0, None)]
    while stack:
        done, state = stack.pop()
        if done & required == required:
            return True
        if (done, state) in seen:
            continue
        seen.add((done, state))
        # Candidates: not yet linearized, and begun before every other pending one ended.
        horizon = min((ops[i][1] for i in range(n) if not done >> i & 1), default=float("inf"))
        for i in range(n):
            if done >> i & 1:
                continue
            start, end, kind, argument, outcome, result = ops[i]
            if start > horizon:
                break
            if kind == "read":
                if result == state:
                    stack.append((done | 1 << i, state))
            elif kind == "write":
                stack.append((done | 1 << i, argument))
            else:
                expected, new = argument
                if outcome == "ok" and state == expected:
                    stack.append((done | 1 << i, new))
                elif outcome == "fail" and state != expected:
                    stack.append((done | 1 << i, state))
                elif outcome == "unknown":
                    if state == expected:
                        stack.append((done | 1 << i, new))
                    stack.append((done | 1 << i, state))
    return False
