"""Hot backup (createBackup, as Percona Server for MongoDB names it): taken during a heavy j:true
insert load, it does not stall the writers for more than a moment, the copy starts as an
ordinary data directory, validates, and holds every write acknowledged before the backup
began."""

import os
import threading
import time

import pytest
from pymongo import InsertOne, WriteConcern

from conftest import StrataProcess


def test_backup_during_heavy_inserts(server, workdir):
    client = server.client()
    collection = client.backup_test.get_collection("items", write_concern=WriteConcern(j=True))
    collection.create_index("k")
    acknowledged = []
    lock = threading.Lock()
    stop = threading.Event()
    longest_pause = [0.0]

    def writer(worker):
        n = 0
        while not stop.is_set():
            batch = [InsertOne({"_id": f"{worker}-{n + i}", "k": n + i, "pad": "x" * 200}) for i in range(50)]
            started = time.monotonic()
            collection.bulk_write(batch)
            longest_pause[0] = max(longest_pause[0], time.monotonic() - started)
            with lock:
                acknowledged.extend(op._doc["_id"] for op in batch)
            n += 50

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    with lock:
        before = list(acknowledged)
    target = os.path.join(workdir, "backup-copy")
    reply = client.admin.command("createBackup", 1, backupDir=target)
    time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join()
    assert reply["ok"] == 1.0 and reply["bytes"] > 0
    assert len(acknowledged) > len(before), "writes went on around the backup"
    assert longest_pause[0] < 5.0, f"a write waited {longest_pause[0]:.1f} s"
    with pytest.raises(Exception):
        client.admin.command("createBackup", 1, backupDir=target)  # holds a data file now

    copy = StrataProcess(target)
    try:
        restored = copy.client()
        assert restored.backup_test.command("validate", "items")["valid"] is True
        present = {doc["_id"] for doc in restored.backup_test.items.find({}, {"_id": 1})}
        missing = [i for i in before if i not in present]
        assert not missing, f"{len(missing)} writes acknowledged before the backup are missing"
        assert restored.backup_test.items.find_one({"k": 0}) is not None
        restored.close()
    finally:
        copy.stop()
    client.close()
