"""Logs as mongod 4.4+ writes them: JSON lines with t, s, c, id, ctx, msg, attr in that order,
to --logpath, rotated by logRotate and by SIGUSR1; slow operations (over --slowms) logged with
their plan and duration; getLog returns the same lines; --logFormat text for people."""

import json
import os
import signal
import time

import pytest

from conftest import StrataProcess


@pytest.fixture(scope="module")
def logged(workdir):
    path = os.path.join(workdir, "strata.log")
    process = StrataProcess(os.path.join(workdir, "logs"), extra_args=["--logpath", path, "--slowms", "0"])
    process.logpath = path
    yield process
    process.stop()


def test_json_lines_and_slow_operations(logged):
    client = logged.client()
    client.l.c.create_index("k")
    client.l.c.insert_many([{"k": i} for i in range(10)])
    client.l.c.find_one({"k": 3})
    lines = client.admin.command("getLog", "global")["log"]
    slow = [json.loads(line) for line in lines if '"msg":"Slow query"' in line]
    finds = [entry for entry in slow if entry["attr"].get("command", {}).get("find") == "c"]
    assert finds, lines[-5:]
    entry = finds[-1]
    assert list(entry)[:6] == ["t", "s", "c", "id", "ctx", "msg"]
    assert entry["c"] == "COMMAND" and entry["s"] == "I" and entry["ctx"].startswith("conn")
    assert entry["attr"]["ns"] == "l.c"
    assert entry["attr"]["planSummary"] == "IXSCAN { k: 1 }"
    assert entry["attr"]["durationMillis"] >= 0
    with open(logged.logpath) as log:
        written = [json.loads(line) for line in log if line.strip()]
    assert any(line["msg"] == "Slow query" for line in written)
    client.close()


def test_rotation(logged):
    client = logged.client()
    directory = os.path.dirname(logged.logpath)
    before = {name for name in os.listdir(directory) if name.startswith("strata.log.")}
    client.admin.command("logRotate")
    logged.process.send_signal(signal.SIGUSR1)
    deadline = time.time() + 10
    while time.time() < deadline:
        rotated = {name for name in os.listdir(directory) if name.startswith("strata.log.")} - before
        if len(rotated) >= 2:
            break
        time.sleep(0.05)
    assert len(rotated) == 2, rotated
    client.l.c.find_one()
    with open(logged.logpath) as log:
        assert any("Slow query" in line for line in log)
    client.close()


def test_text_format(workdir):
    path = os.path.join(workdir, "text.log")
    process = StrataProcess(os.path.join(workdir, "text"), extra_args=["--logpath", path, "--logFormat", "text"])
    try:
        process.client().admin.command("ping")
    finally:
        process.stop()
    with open(path) as log:
        first = log.readline()
    assert not first.startswith("{") and " I " in first, first
