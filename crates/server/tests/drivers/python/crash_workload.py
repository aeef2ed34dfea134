"""The client workload and the model behind the crash loops (test_kill_loop.py: kill -9;
test_power_cut.py: a power cut on a real file system).

Writer threads insert (j:true and w:1), update a per-document version (j:true) and delete
(j:true) over two collections, and an index thread creates and drops indexes, until the crash.
The model says, per document, whether it must be there after a restart (acknowledged with
j:true), may be (w:1, or its last write's outcome unknown) or must not be (acknowledged deleted),
and which versions are allowed; `check_after_restart` compares a restarted server with it and
then makes what the restart showed the new baseline. Each writer owns the ids congruent to its
number (mod WRITERS), never reuses one and is the only thread touching its documents, so each
document's history is sequential and its versions only grow.
"""

import random
import threading
import time
from dataclasses import dataclass

import pytest
from pymongo.errors import PyMongoError
from pymongo.write_concern import WriteConcern

from conftest import STARTED, StrataProcess

DATABASE = "killloop"
COLLECTIONS = ("alpha", "beta")
WRITERS = 4
# A writer holding this many live documents only updates and deletes, so the data (and the
# checks after each restart) stay bounded however many cycles run; large enough that each
# collection holds more than one batch of an index build (docstore's BUILD_BATCH, 1,000).
LIVE_LIMIT = 600
INDEXES = {  # name -> (keys, options)
    "k_1": ([("k", 1)], {}),
    "owner_1_v_-1": ([("owner", 1), ("v", -1)], {}),
    "u_1": ([("u", 1)], {"unique": True}),
}
JOURNALED = WriteConcern(j=True)
UNJOURNALED = WriteConcern(w=1)
# StrataProcess waits for the server's first line without a timeout: a recovery that hangs must
# fail the test, not run into the CI job's limit.
RESTART_TIMEOUT_SECONDS = 60


class Contradiction(Exception):
    """The server answered something the model rules out while it was running."""


@dataclass
class Document:
    collection: str
    # True: must be there after a restart. None: may or may not be (written with w:1, or the
    # outcome of its last write is unknown). Documents that must not be there are in Model.gone.
    durable: bool | None
    min_version: int = 0  # the last version acknowledged with j:true (0: the insert's)
    max_version: int = 0  # the last version a write tried


class Model:
    def __init__(self):
        self.documents: dict[int, Document] = {}
        # id -> why it must never be seen again ("deleted" with j:true, or "missing" at a restart).
        self.gone: dict[int, str] = {}
        # (collection, index name) -> True present, False absent, None unknown (in flight).
        self.indexes: dict[tuple[str, str], bool | None] = {}
        self.next_serial = [0] * WRITERS

    def new_id(self, writer):
        serial = self.next_serial[writer]
        self.next_serial[writer] += 1
        return serial * WRITERS + writer

    def forget(self, _id, why):
        del self.documents[_id]
        self.gone[_id] = why

    def rebase(self, found, listed_indexes):
        """What a restart showed becomes what must hold from now on."""
        for _id in self.documents.keys() - found.keys():
            self.gone[_id] = "missing"
        self.documents = {
            _id: Document(collection, True, doc.get("v", -1), doc.get("v", -1))
            for _id, (collection, doc) in found.items()
        }
        self.indexes = {
            (collection, name): name in listed_indexes[collection] for collection in COLLECTIONS for name in INDEXES
        }


@dataclass
class Tally:
    journaled: int = 0  # acknowledged j:true writes (documents inserted, updated, deleted)
    unjournaled: int = 0  # acknowledged w:1 inserts
    unknown: int = 0  # operations cut off by the kill (sent or not: outcome unknown)
    index_changes: int = 0  # acknowledged createIndexes/dropIndexes

    def add(self, other):
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Worker(threading.Thread):
    """A client thread: runs `step` until stopped; an exception after the kill ends it quietly,
    any other is kept in `error` for the cycle to report."""

    def __init__(self, name, database, model, rng, killing, stop):
        super().__init__(name=name, daemon=True)
        self.database, self.model, self.rng = database, model, rng
        self.killing, self.stop = killing, stop
        self.tally = Tally()
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                self.step()
        except PyMongoError as error:
            if self.killing.is_set():
                self.tally.unknown += 1
            else:
                self.error = f"{self.name}: {error!r} before the kill"
        except Exception as error:  # a Contradiction, or a bug of the test itself
            self.error = f"{self.name}: {error!r}"

    def handle(self, collection, concern):
        return self.database.get_collection(collection, write_concern=concern)


class Writer(Worker):
    def __init__(self, number, database, model, rng, killing, stop):
        super().__init__(f"writer-{number}", database, model, rng, killing, stop)
        self.number = number
        # The ids visible now that this writer may update or delete (all acknowledged).
        self.live = [_id for _id in model.documents if _id % WRITERS == number]

    def step(self):
        if not self.live:
            operations, weights = (self.insert_one, self.insert_many), (2, 1)
        elif len(self.live) >= LIVE_LIMIT:
            operations, weights = (self.update_version, self.delete_one, self.delete_many), (3, 2, 1)
        else:
            operations = (self.insert_one, self.insert_many, self.update_version, self.delete_one, self.delete_many)
            weights = (4, 2, 4, 2, 1)
        self.rng.choices(operations, weights)[0]()

    def insert_one(self):
        self.insert(1)

    def insert_many(self):
        self.insert(self.rng.randint(2, 8))

    def insert(self, count):
        concern = self.rng.choice((JOURNALED, UNJOURNALED))
        collection = self.rng.choice(COLLECTIONS)
        documents = [self.new_document(collection) for _ in range(count)]
        handle = self.handle(collection, concern)
        if count == 1:
            handle.insert_one(documents[0])
        else:
            handle.insert_many(documents)
        for document in documents:
            self.live.append(document["_id"])
            if concern is JOURNALED:
                self.model.documents[document["_id"]].durable = True
        if concern is JOURNALED:
            self.tally.journaled += count
        else:
            self.tally.unjournaled += count

    def new_document(self, collection):
        """A fresh id, in the model before it is sent (its outcome unknown until acknowledged)."""
        _id = self.model.new_id(self.number)
        self.model.documents[_id] = Document(collection, durable=None)
        pad = "p" * self.rng.randrange(20, 400)
        return {"_id": _id, "u": _id, "owner": self.number, "k": self.rng.randrange(1000), "v": 0, "pad": pad}

    def update_version(self):
        _id = self.rng.choice(self.live)
        document = self.model.documents[_id]
        version = document.max_version + 1
        document.max_version = version
        result = self.handle(document.collection, JOURNALED).update_one({"_id": _id}, {"$set": {"v": version}})
        if result.matched_count != 1:
            raise Contradiction(f"update of visible document {_id} matched {result.matched_count}")
        # Acknowledged with j:true, so the document (even one inserted with w:1) is durable.
        document.durable = True
        document.min_version = version
        self.tally.journaled += 1

    def delete_one(self):
        _id = self.rng.choice(self.live)
        self.delete(self.model.documents[_id].collection, [_id])

    def delete_many(self):
        collection = self.rng.choice(COLLECTIONS)
        candidates = [_id for _id in self.live if self.model.documents[_id].collection == collection]
        if candidates:
            self.delete(collection, self.rng.sample(candidates, min(len(candidates), self.rng.randint(2, 6))))

    def delete(self, collection, ids):
        for _id in ids:
            self.live.remove(_id)
            self.model.documents[_id].durable = None  # in flight: there or not
        handle = self.handle(collection, JOURNALED)
        if len(ids) == 1:
            result = handle.delete_one({"_id": ids[0]})
        else:
            result = handle.delete_many({"_id": {"$in": ids}, "owner": self.number})
        if result.deleted_count != len(ids):
            raise Contradiction(f"delete of visible documents {ids} deleted {result.deleted_count}")
        for _id in ids:
            self.model.forget(_id, "deleted")
        self.tally.journaled += len(ids)


class IndexChanger(Worker):
    """Creates an index the model says is absent, or drops one it says is present, a few times
    a cycle; the collections hold documents, so each create is a build."""

    def __init__(self, database, model, rng, killing, stop):
        super().__init__("indexes", database, model, rng, killing, stop)

    def step(self):
        collection, name = self.rng.choice(COLLECTIONS), self.rng.choice(list(INDEXES))
        present = self.model.indexes.get((collection, name), False)
        self.model.indexes[(collection, name)] = None
        handle = self.handle(collection, JOURNALED)
        if present:
            handle.drop_index(name)
        else:
            keys, options = INDEXES[name]
            handle.create_index(keys, name=name, **options)
        self.model.indexes[(collection, name)] = not present
        self.tally.index_changes += 1
        self.stop.wait(self.rng.uniform(0.05, 0.3))


def run_cycle(server, model, rng, crash=None):
    """Clients write for a random moment, then `crash` (default: kill -9) stops the server under
    them. Returns the workers' tallies and errors."""
    client = server.client(retryWrites=False, serverSelectionTimeoutMS=500, maxPoolSize=WRITERS + 2)
    database = client[DATABASE]
    killing, stop = threading.Event(), threading.Event()

    def seeded():
        return random.Random(rng.getrandbits(64))

    workers = [Writer(n, database, model, seeded(), killing, stop) for n in range(WRITERS)]
    workers.append(IndexChanger(database, model, seeded(), killing, stop))
    for worker in workers:
        worker.start()
    time.sleep(rng.uniform(0.2, 1.5))
    killing.set()
    (crash or server.kill)()
    stop.set()
    for worker in workers:
        worker.join(timeout=30)
    client.close()
    stuck = [worker.name for worker in workers if worker.is_alive()]
    errors = [worker.error for worker in workers if worker.error] + [f"{name} still running" for name in stuck]
    tally = Tally()
    for worker in workers:
        tally.add(worker.tally)
    return tally, errors


class RestartFailed(Exception):
    pass


def start_server(dbpath, log_path=None):
    """The server and a client, once it answers a ping; and the seconds that took."""
    started = time.monotonic()
    watchdog = threading.Timer(RESTART_TIMEOUT_SECONDS, kill_last_started)
    watchdog.start()
    try:
        server = StrataProcess(dbpath, log_path=log_path)
        client = server.client(retryWrites=False)
        client.admin.command("ping")
    except Exception as error:
        kill_last_started()  # before its dbpath is copied as evidence
        seconds = time.monotonic() - started
        raise RestartFailed(f"{error!r} after {seconds:.1f} s (killed at {RESTART_TIMEOUT_SECONDS} s)") from error
    finally:
        watchdog.cancel()
    return server, client, time.monotonic() - started


def kill_last_started():
    process = getattr(STARTED[-1], "process", None) if STARTED else None
    if process is not None and process.poll() is None:
        process.kill()
        process.wait(timeout=30)


def scan_documents(database):
    """Every document by collection scan: id -> (collection, document)."""
    found = {}
    for collection in COLLECTIONS:
        for document in database[collection].find({}, {"u": 1, "v": 1}).hint([("$natural", 1)]):
            found[document["_id"]] = (collection, document)
    return found


def check_documents(model, found):
    problems = []
    for _id, expected in model.documents.items():
        if _id not in found:
            if expected.durable:
                problems.append(
                    f"lost: {_id} in {expected.collection}, acknowledged with j:true at version "
                    f"{expected.min_version} (last tried {expected.max_version})"
                )
            continue
        collection, document = found[_id]
        if collection != expected.collection or document.get("u") != _id:
            problems.append(f"{_id} written to {expected.collection} found in {collection} as {document}")
        elif not expected.min_version <= document.get("v", -1) <= expected.max_version:
            problems.append(
                f"{_id} in {collection}: version {document.get('v')} outside "
                f"[{expected.min_version} acknowledged, {expected.max_version} tried]"
            )
    for _id in found.keys() - model.documents.keys():
        why = model.gone.get(_id)
        reason = {"deleted": "acknowledged deleted with j:true", "missing": "missing at an earlier restart"}
        problems.append(f"{_id} in {found[_id][0]} came back: {reason.get(why, 'never written')}")
    return problems


def check_validate(database):
    problems = []
    for collection in database.list_collection_names():
        report = database.command("validate", collection)
        if report.get("valid") is not True:
            problems.append(f"validate {collection}: {report.get('errors')}")
    return problems


def list_index_names(database):
    return {collection: {index["name"] for index in database[collection].list_indexes()} for collection in COLLECTIONS}


def check_indexes(database, model, found, listed):
    problems = []
    for (collection, name), present in model.indexes.items():
        if present is not None and present != (name in listed[collection]):
            state = "acknowledged created" if present else "acknowledged dropped"
            problems.append(f"index {collection}.{name} {state} but listIndexes says {sorted(listed[collection])}")
    for collection, names in listed.items():
        scanned = {_id for _id, (where, _) in found.items() if where == collection}
        for name in names - set(INDEXES) - {"_id_"}:
            problems.append(f"unknown index {collection}.{name}")
        for name in names & set(INDEXES):
            hinted = {document["_id"] for document in database[collection].find({}, {"_id": 1}).hint(name)}
            if hinted != scanned:
                problems.append(
                    f"{collection} hinted on {name}: {len(hinted)} documents, collection scan {len(scanned)}; "
                    f"only in the index {sorted(hinted - scanned)[:10]}, "
                    f"only in the scan {sorted(scanned - hinted)[:10]}"
                )
    return problems


def check_after_restart(database, model):
    """Every check of the module header; then the model takes what the restart showed."""
    found = scan_documents(database)
    listed = list_index_names(database)
    problems = check_documents(model, found) + check_validate(database) + check_indexes(database, model, found, listed)
    model.rebase(found, listed)
    return problems


def log_tail(log_path, lines=40):
    try:
        with open(log_path, "rb") as log:
            return "\n".join(log.read().decode(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"(no log: {error})"


def fail_cycle(what, problems, seed, cycle, evidence, log_path):
    """Fails the test with the problems found in `cycle` (at most 30 listed), how to replay its
    choices, where the evidence was kept (`evidence` says what and where) and the log's tail."""
    listing = "\n  ".join(problems[:30]) + (f"\n  ... {len(problems) - 30} more" if len(problems) > 30 else "")
    pytest.fail(
        f"{what} (seed {seed}, cycle {cycle}; STRATA_SEED={seed} replays the choices):\n  {listing}\n"
        f"{evidence}\nserver log tail:\n{log_tail(log_path)}"
    )
