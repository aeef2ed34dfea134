"""Goal: damage in a real data directory (bits flipped, sectors zeroed) is never returned as data.
A server on the damaged copy either refuses to start or serves: every document it returns is the
one written, a read that meets damage fails with DataCorruptionDetected (301) naming the
collection, the server stays up, and validate reports the damage. `strata repair` then salvages
every readable document into a new directory, which validates, holds only documents as written,
and reports how many were lost.

Method: one directory is written by a server (two collections with secondary indexes) and shut
down cleanly; each seeded case copies it, zeroes a few 4 KiB pages and flips a few bits at random
places of the copy's data file, and runs the checks above. STRATA_SEED replays one case."""

import os
import random
import re
import shutil
import subprocess

import pytest
from pymongo.errors import OperationFailure

from conftest import BIN, StrataProcess

DATA_CORRUPTION_DETECTED = 301
COLLECTIONS = {"people": 8000, "orders": 3000}


def document(collection, i):
    return {"_id": i, "k": i % 101, "name": f"{collection}-{i}", "pad": "x" * (i % 300)}


@pytest.fixture(scope="module")
def pristine(workdir):
    dbpath = os.path.join(workdir, "pristine")
    server = StrataProcess(dbpath)
    client = server.client()
    for name, count in COLLECTIONS.items():
        collection = client.rot[name]
        collection.create_index("k")
        collection.create_index("name", unique=True)
        for start in range(0, count, 1000):
            collection.insert_many([document(name, i) for i in range(start, min(count, start + 1000))])
    client.close()
    server.stop()
    return dbpath


def damage(dbpath, rng):
    """Zeroes pages and flips bits of the data file; returns the offsets of the pages it hit."""
    path = os.path.join(dbpath, "data.strata")
    size = os.path.getsize(path)
    hit = set()
    with open(path, "r+b") as file:
        for _ in range(rng.randint(1, 4)):
            page = rng.randrange(8192, size) // 4096 * 4096
            file.seek(page)
            file.write(bytes(4096))
            hit.add(page)
        for _ in range(rng.randint(0, 4)):
            offset = rng.randrange(8192, size)
            file.seek(offset)
            byte = file.read(1)[0]
            file.seek(offset)
            file.write(bytes([byte ^ (1 << rng.randrange(8))]))
            hit.add(offset // 4096 * 4096)
    return hit


def read_collection(client, name):
    """The documents a full read returns, and the error that stopped it, if any."""
    found = []
    try:
        for doc in client.rot[name].find({}).sort("_id", 1):
            found.append(doc)
    except OperationFailure as error:
        return found, error
    return found, None


def check_damaged_server(dbpath):
    """Serves the damaged copy, if it starts; returns True if damage was seen."""
    try:
        server = StrataProcess(dbpath)
    except AssertionError:
        return True  # refused to start: the log or catalog is damaged; repair must cope
    client = server.client()
    seen = False
    for name in COLLECTIONS:
        found, error = read_collection(client, name)
        for doc in found:
            assert doc == document(name, doc["_id"]), f"{name}: a wrong document was returned: {doc['_id']}"
        if error is not None:
            assert error.code == DATA_CORRUPTION_DETECTED, f"{name}: {error!r}"
            assert f"rot.{name}" in str(error), f"the error does not name the collection: {error}"
            seen = True
        report = client.rot.command("validate", name)
        if error is not None:
            assert report["valid"] is False and report["errors"], f"{name}: validate missed the damage"
    assert client.admin.command("ping")["ok"] == 1, "the server went down"
    client.close()
    server.kill()
    return seen


def repair(dbpath, out, hit=None):
    """Repair's report. The engine's header and checkpoint catalog and the document store's
    catalog are each kept twice, so a few damaged pages never stop it, unless they are both
    copies of the checkpoint's catalog: then it refuses, naming both blocks, and `None` is
    returned if `hit` (the pages damaged) holds both (here about one case in ten thousand)."""
    result = subprocess.run([BIN, "repair", "--dbpath", dbpath, "--out", out], capture_output=True, text=True)
    if result.returncode != 0 and hit is not None and both_catalog_copies_hit(result.stderr, hit):
        return None
    assert result.returncode == 0, f"repair failed: {result.stdout}\n{result.stderr}"
    return result.stdout


def both_catalog_copies_hit(stderr, hit):
    """Whether repair refused because both copies of the checkpoint's catalog are damaged, and
    the damage done hit the page where each of the blocks it names starts."""
    if "the checkpoint's catalog and its copy are damaged" not in stderr:
        return False
    blocks = {int(offset) for offset in re.findall(r"block at (\d+)", stderr)}
    return len(blocks) >= 2 and all(offset // 4096 * 4096 in hit for offset in blocks)


def check_repaired(out, report):
    server = StrataProcess(out)
    client = server.client()
    for name, count in COLLECTIONS.items():
        found, error = read_collection(client, name)
        assert error is None, f"{name}: the repaired directory still fails: {error!r}"
        for doc in found:
            assert doc == document(name, doc["_id"]), f"{name}: repair produced a wrong document"
        assert client.rot.command("validate", name)["valid"] is True
        assert f"rot.{name}: {len(found)} documents salvaged (the collection counted " in report, report
        by_index = client.rot[name].count_documents({"k": {"$gte": 0}}, hint="k_1")
        assert by_index == len(found), f"{name}: the rebuilt index disagrees with the documents"
    client.close()
    server.stop()


def test_damage_is_never_returned_as_data_and_repair_salvages_the_rest(pristine, workdir):
    first = int(os.environ.get("STRATA_SEED", random.randrange(1 << 30)))
    cases = 1 if "STRATA_SEED" in os.environ else 6
    print(f"seeds {first}..{first + cases - 1} (STRATA_SEED=<seed> replays one)")
    damaged_seen = 0
    for seed in range(first, first + cases):
        rng = random.Random(seed)
        case = os.path.join(workdir, f"case-{seed}")
        shutil.copytree(pristine, case, ignore=shutil.ignore_patterns("strata.lock"))
        hit = damage(case, rng)
        try:
            damaged_seen += check_damaged_server(case)
            out = os.path.join(workdir, f"repaired-{seed}")
            report = repair(case, out, hit)
            if report is not None:
                check_repaired(out, report)
        except AssertionError as failure:
            raise AssertionError(f"seed {seed} (STRATA_SEED={seed} replays it): {failure}") from None
        shutil.rmtree(case, ignore_errors=True)
    assert damaged_seen > 0, "no case met damage: the test damaged nothing that is read"


def starts(dbpath):
    """Whether a server starts on `dbpath` (and serves a ping); stopped again if it does."""
    try:
        server = StrataProcess(dbpath)
    except AssertionError:  # exited before saying it listens: it refused the directory
        return False
    client = server.client()
    client.admin.command("ping")
    client.close()
    server.stop()
    return True


def test_repair_names_the_collections_when_the_catalog_itself_is_damaged(workdir):
    """The catalog (which collection and index is which tree) is kept twice, in `__catalog` and
    its copy, written in one transaction. With compression off, the catalog entries' bytes are
    visible in the data file: each place a collection's name appears is zeroed in its own copy
    of the directory. Where that stops a server from starting (the live catalog was hit), repair
    must still salvage every document through the copy; wherever the name appears, repair must
    succeed."""
    name = "zebra_collection_for_the_catalog_test"
    dbpath = os.path.join(workdir, "catalog-pristine")
    server = StrataProcess(dbpath, extra_args=("--compression", "none"))
    client = server.client()
    collection = client.rot[name]
    collection.create_index("k")
    collection.insert_many([{"_id": i, "k": i % 7} for i in range(500)])  # not holding the name
    client.close()
    server.stop()
    with open(os.path.join(dbpath, "data.strata"), "rb") as file:
        data = file.read()
    places, at = [], data.find(name.encode())
    while at >= 0:
        places.append(at)
        at = data.find(name.encode(), at + 1)
    assert len(places) >= 2, f"the collection's name appears {len(places)} times in the data file"
    refused = 0
    for number, place in enumerate(places[:12]):
        case = os.path.join(workdir, f"catalog-case-{number}")
        shutil.copytree(dbpath, case, ignore=shutil.ignore_patterns("strata.lock"))
        with open(os.path.join(case, "data.strata"), "r+b") as file:
            file.seek(place)
            file.write(bytes(len(name)))
        if not starts(case):
            refused += 1
        out = os.path.join(workdir, f"catalog-repaired-{number}")
        report = repair(case, out)
        assert f"rot.{name}: 500 documents salvaged (the collection counted 500)" in report, report
        shutil.rmtree(case, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    print(f"the name appears at {len(places)} places; zeroing it stopped the server at {refused}")
    assert refused > 0, "no zeroed place was in the live catalog: the test did not damage it"


def test_repair_keeps_each_collection_s_uuid(workdir):
    """A repaired collection is the same collection: its UUID (listCollections' `info.uuid`,
    the oplog's `ui`) is the one it had."""
    dbpath = os.path.join(workdir, "uuid-pristine")
    server = StrataProcess(dbpath)
    client = server.client()
    client.rot.a.insert_one({"_id": 1})
    client.rot.b.insert_one({"_id": 1})
    before = {info["name"]: info["info"]["uuid"] for info in client.rot.list_collections()}
    client.close()
    server.stop()
    out = os.path.join(workdir, "uuid-repaired")
    repair(dbpath, out)
    server = StrataProcess(out)
    client = server.client()
    after = {info["name"]: info["info"]["uuid"] for info in client.rot.list_collections()}
    client.close()
    server.stop()
    assert after == before and len(set(before.values())) == 2, (before, after)
