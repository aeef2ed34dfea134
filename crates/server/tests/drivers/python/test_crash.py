"""Goal: every write acknowledged with j:true survives SIGKILL. Method: writer threads insert
with j:true and record each acknowledged _id; the server is killed with -9 mid-stream,
restarted on the same dbpath, and every recorded _id must be found."""

import os
import threading
import time

from pymongo.write_concern import WriteConcern

from conftest import StrataProcess


def test_kill_9_keeps_journaled_writes(workdir):
    dbpath = os.path.join(workdir, "crash")
    server = StrataProcess(dbpath)
    client = server.client(retryWrites=False)
    collection = client.crash.get_collection("docs", write_concern=WriteConcern(j=True))
    collection.create_index("k")
    acknowledged = []
    stop = threading.Event()

    def writer(offset):
        i = 0
        while not stop.is_set():
            key = offset * 1_000_000 + i
            try:
                if i % 10 == 0:
                    collection.insert_many([{"_id": key + j, "k": key + j} for j in range(5)])
                    acknowledged.extend(key + j for j in range(5))
                    i += 5
                else:
                    collection.insert_one({"_id": key, "k": key})
                    acknowledged.append(key)
                    i += 1
            except Exception:
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(2.0)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    client.close()
    assert len(acknowledged) > 50, f"only {len(acknowledged)} writes before the kill"

    restarted = StrataProcess(dbpath)
    client = restarted.client()
    found = {d["_id"] for d in client.crash.docs.find({}, {"_id": 1})}
    missing = [key for key in acknowledged if key not in found]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    assert client.crash.docs.count_documents({"k": {"$gte": 0}}) == len(found)
    assert client.crash.command("validate", "docs")["valid"] is True
    client.close()
    restarted.stop()
