"""Goal: on a real file system that fills up, writes fail with OutOfDiskSpace (14031), reads keep
working, nothing acknowledged is lost, and writes resume by themselves once space is freed, with
no restart; after a kill -9 every j:true write is there and the collection validates.

Method: a 64 MiB tmpfs holds the dbpath and an 8 MiB ballast file. j:true inserts of
incompressible documents into a collection with two secondary indexes run until the server
refuses them; reads are checked while the disk is full; the ballast is deleted and inserts must
be accepted again within seconds; then the server is killed with SIGKILL and restarted on the
same directory. Mounting needs root (CAP_SYS_ADMIN): the test is skipped, saying so, where the
mount is refused."""

import os
import subprocess
import time

import pytest
from pymongo.errors import BulkWriteError, PyMongoError
from pymongo.write_concern import WriteConcern

from conftest import StrataProcess

OUT_OF_DISK_SPACE = 14031


@pytest.fixture()
def small_disk(workdir):
    mount = os.path.join(workdir, "small-disk")
    os.makedirs(mount, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mount], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", mount], check=False)


def error_code(error):
    if isinstance(error, BulkWriteError):
        errors = error.details.get("writeErrors") or [{}]
        return errors[0].get("code")
    return getattr(error, "code", None)


def insert_until_full(collection, acknowledged, start):
    """Inserts batches until the server refuses one; returns that error and the next id."""
    next_id = start
    while next_id < start + 1_000_000:
        batch = [{"_id": next_id + i, "a": (next_id + i) % 97, "b": os.urandom(8).hex(), "pad": os.urandom(900)} for i in range(50)]
        try:
            collection.insert_many(batch)
        except PyMongoError as error:
            return error, next_id + 50
        acknowledged.extend(doc["_id"] for doc in batch)
        next_id += 50
    raise AssertionError("the disk never filled")


def test_a_full_disk_refuses_writes_keeps_reads_and_resumes_when_space_is_freed(small_disk):
    ballast = os.path.join(small_disk, "ballast.bin")
    with open(ballast, "wb") as file:
        file.write(os.urandom(8 << 20))
    server = StrataProcess(small_disk)
    client = server.client(retryWrites=False)
    collection = client.full.get_collection("docs", write_concern=WriteConcern(j=True))
    collection.create_index("a")
    collection.create_index("b")
    acknowledged = []

    error, next_id = insert_until_full(collection, acknowledged, 0)
    assert error_code(error) == OUT_OF_DISK_SPACE, f"refused with {error!r}, not OutOfDiskSpace"
    print(f"disk full after {len(acknowledged)} documents: {error!r}")
    assert len(acknowledged) > 1000, f"the disk filled after only {len(acknowledged)} documents"
    with pytest.raises(PyMongoError) as again:
        collection.insert_one({"_id": -1, "a": 1, "b": "x"})
    assert error_code(again.value) == OUT_OF_DISK_SPACE
    status = client.admin.command("serverStatus")["strata"]
    assert status["writesRefused"], "serverStatus does not say writes are refused"

    # Reads go on while the disk is full: by _id, through an index, and a full count.
    found = {doc["_id"] for doc in collection.find({}, {"_id": 1})}
    assert not [i for i in acknowledged if i not in found], "acknowledged documents unreadable while full"
    by_index = collection.count_documents({"a": 5}, hint="a_1")
    assert by_index == collection.count_documents({"a": 5}, hint={"$natural": 1})

    # Space is freed: writes resume by themselves.
    os.remove(ballast)
    deadline = time.monotonic() + 10
    while True:
        try:
            collection.insert_one({"_id": next_id, "a": 1, "b": "after"})
            acknowledged.append(next_id)
            next_id += 1
            break
        except PyMongoError as error:
            assert error_code(error) == OUT_OF_DISK_SPACE, f"after space was freed: {error!r}"
            assert time.monotonic() < deadline, "writes did not resume within 10 s of space being freed"
            time.sleep(0.1)
    for i in range(200):
        collection.insert_one({"_id": next_id + i, "a": i % 97, "b": "after"})
        acknowledged.append(next_id + i)
    assert client.admin.command("serverStatus")["strata"]["writesRefused"] is None

    server.kill()
    client.close()
    restarted = StrataProcess(small_disk)
    client = restarted.client()
    found = {doc["_id"] for doc in client.full.docs.find({}, {"_id": 1})}
    missing = [i for i in acknowledged if i not in found]
    assert not missing, f"{len(missing)} acknowledged j:true writes lost, e.g. {missing[:5]}"
    assert client.full.command("validate", "docs")["valid"] is True
    client.close()
    restarted.stop()

