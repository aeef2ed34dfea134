"""The HTTP port (--http-port): /metrics in Prometheus' text format counts commands by name and
outcome, with latency histograms, and reports the engine and every collection and index;
/healthz answers; the port is off unless asked for."""

import os
import urllib.request

import pytest

from conftest import StrataProcess


@pytest.fixture(scope="module")
def http_server(workdir):
    process = StrataProcess(os.path.join(workdir, "http"), extra_args=["--http-port", "0"])
    line = process.process.stdout.readline().decode()
    assert line.startswith("strata http on "), line
    process.http = line.split()[-1]
    yield process
    process.stop()


def get(server, path):
    with urllib.request.urlopen(f"http://{server.http}{path}", timeout=10) as response:
        return response.status, response.headers.get("Content-Type"), response.read().decode()


def samples(text):
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_metrics_count_commands_and_sizes(http_server):
    client = http_server.client()
    client.m.c.create_index("k")
    client.m.c.insert_many([{"k": i} for i in range(100)])
    client.m.c.find_one({"k": 5})
    with pytest.raises(Exception):
        client.m.command("find", 5)
    status, content_type, text = get(http_server, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    values = samples(text)
    assert values['strata_inserted_documents_total{collection="c",db="m"}'] == 100
    assert values['strata_commands_total{command="find",outcome="ok"}'] >= 1
    assert values['strata_commands_total{command="find",outcome="error"}'] >= 1
    assert values['strata_command_duration_seconds_count{command="insert"}'] >= 1
    assert values['strata_collection_documents{collection="c",db="m"}'] == 100
    assert values['strata_index_bytes{collection="c",db="m",index="k_1"}'] > 0
    assert values["strata_connections"] >= 1
    for name in ["strata_cache_budget_bytes", "strata_cache_used_bytes", "strata_log_syncs_total",
                 "strata_checkpoints_total", "strata_network_bytes_in_total", 'strata_flush_backlog_bytes{height="1"}']:
        assert name in values, name
    client.close()


def test_healthz_and_dashboard(http_server):
    assert get(http_server, "/healthz")[:3:2] == (200, "ok\n")
    status, content_type, page = get(http_server, "/")
    assert status == 200 and content_type.startswith("text/html") and "/metrics" in page
