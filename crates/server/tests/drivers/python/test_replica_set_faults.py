"""Fault scenarios on real replica sets (see faults.py): while insert and register clients run,
the primary is killed, paused, partitioned (both ways, or only its own messages out), a
secondary's messages out are cut, links are
slowed, every member is killed and restarted, a member is added while the primary is killed, or
wall clocks jump (libfaketime). After each scenario the faults end and the
checkers run: no acknowledged w:"majority" insert is lost, the register's history (w:"majority"
writes and compare-and-sets, linearizable reads) is linearizable, the list-append transactions
show none of the anomalies Elle looks for (G0, G1a, G1b, G1c, G-single, lost appends, ...), and
every member converges to the same documents, indexes and oplog.

Each run prints its seed; STRATA_SEED=N replays a run's fault timing. STRATA_FAULT_ROUNDS
(default 1) repeats each scenario's fault that many times in one run, STRATA_FAULT_SECONDS
(default 2.5) is the time between faults: CI runs the short default, docs/RELIABILITY.md records
long runs.
"""

import json
import os
import random
import time

import pytest

import list_append
from faults import FAKETIME_LIBRARY, Cluster, History, linearizable, run_workloads

ROUNDS = int(os.environ.get("STRATA_FAULT_ROUNDS", "1"))
SPACING = float(os.environ.get("STRATA_FAULT_SECONDS", "2.5"))


def kill_primary(cluster, rng):
    victim = cluster.primary()
    victim.kill()
    time.sleep(rng.uniform(0.5, 1.5))
    victim.start()


def pause_primary(cluster, rng):
    victim = cluster.primary()
    victim.pause()
    time.sleep(rng.uniform(1.5, 3.0))
    victim.resume()


def partition_primary(cluster, rng):
    victim = cluster.primary()
    cluster.proxies.isolate(victim.index)
    time.sleep(rng.uniform(1.5, 3.0))
    cluster.proxies.heal()


def primary_cannot_send(cluster, rng):
    victim = cluster.primary()
    for other in cluster.members:
        if other is not victim:
            cluster.proxies.cut(victim.index, other.index)
    time.sleep(rng.uniform(1.5, 3.0))
    cluster.proxies.heal()


def secondary_cannot_send(cluster, rng):
    """One-way: a secondary hears the others but nothing it sends arrives (its acknowledgements,
    its votes): it must not disrupt the primary, and catches up once healed."""
    primary = cluster.primary()
    victim = rng.choice([m for m in cluster.members if m is not primary])
    for other in cluster.members:
        if other is not victim:
            cluster.proxies.cut(victim.index, other.index)
    time.sleep(rng.uniform(1.5, 3.0))
    cluster.proxies.heal()


def slow_links_and_a_dead_secondary(cluster, rng):
    cluster.proxies.delay(rng.uniform(0.01, 0.05))
    primary = cluster.primary()
    victim = rng.choice([m for m in cluster.members if m is not primary])
    victim.kill()
    time.sleep(rng.uniform(1.0, 2.0))
    victim.start()
    cluster.proxies.heal()


def restart_every_member(cluster, rng):
    for member in cluster.members:
        member.kill()
    time.sleep(rng.uniform(0.2, 0.8))
    for member in cluster.members:
        member.start()


def add_a_member_under_faults(cluster, rng):
    """A member is added while writes go on (it copies the data, then catches up), and the
    primary is killed while it copies, then restarted: the copy's source may go away, and the
    newcomer must end equal to the others."""
    if len(cluster.members) < 5:
        cluster.add_member()
    time.sleep(rng.uniform(0.0, 0.5))
    victim = cluster.primary()
    victim.kill()
    time.sleep(rng.uniform(0.5, 1.5))
    victim.start()


def clock_jumps(cluster, rng):
    """Wall clocks jump: the primary's an hour back and a secondary's a day ahead; the primary
    is then killed and restarted (still an hour behind), so a member whose clock is far from
    the others' may be elected; then every clock is set right."""
    primary = cluster.primary()
    ahead = rng.choice([m for m in cluster.members if m is not primary])
    primary.set_clock(-3600)
    ahead.set_clock(86400)
    time.sleep(rng.uniform(1.5, 2.5))
    primary.kill()
    time.sleep(rng.uniform(0.5, 1.0))
    primary.start()
    time.sleep(rng.uniform(1.0, 2.0))
    for member in cluster.members:
        member.set_clock(0)


clock_jumps.fake_clocks = True

SCENARIOS = [
    (kill_primary, 3),
    (pause_primary, 3),
    (partition_primary, 3),
    (partition_primary, 5),
    (primary_cannot_send, 3),
    (secondary_cannot_send, 3),
    (slow_links_and_a_dead_secondary, 3),
    (restart_every_member, 3),
    (add_a_member_under_faults, 3),
    (clock_jumps, 3),
]


@pytest.mark.parametrize("fault,size", SCENARIOS, ids=[f"{f.__name__}-{n}" for f, n in SCENARIOS])
def test_fault_scenario(fault, size, workdir):
    seed = int(os.environ.get("STRATA_SEED", random.randrange(1 << 32)))
    print(f"\nscenario {fault.__name__} with {size} members, seed {seed} (STRATA_SEED={seed} replays)")
    rng = random.Random(seed)
    fake_clocks = getattr(fault, "fake_clocks", False)
    if fake_clocks and not os.path.exists(FAKETIME_LIBRARY):
        pytest.skip(f"no libfaketime ({FAKETIME_LIBRARY}): apt-get install libfaketime")
    cluster = Cluster(os.path.join(workdir, f"{fault.__name__}-{size}-{seed}"), size, fake_clocks)
    history, acknowledged, transactions = History(), [], []
    try:
        with cluster.client() as client:
            list_append.setup(client)
        workers, _ = run_workloads(cluster, SPACING * (ROUNDS + 1), rng, history, acknowledged, transactions=transactions)
        for _ in range(ROUNDS):
            time.sleep(SPACING * rng.uniform(0.3, 0.7))
            fault(cluster, rng)
        for worker in workers:
            worker.join(120)
        cluster.heal()
        final = cluster.converged(["c", "reg", "lists"])
        present = {d["_id"] for d in final["c"]}
        lost = [key for key in acknowledged if key not in present]
        operations = history.operations
        outcomes = {o: sum(1 for op in operations if op[5] == o) for o in ("ok", "fail", "unknown")}
        print(f"inserts acknowledged {len(acknowledged)}, lost {len(lost)}; register operations {outcomes}")
        assert not lost, f"acknowledged w:majority inserts lost: {lost[:10]}"
        assert len(acknowledged) > 0 and outcomes["ok"] > 0, "the workload made no progress"
        if not linearizable(operations):
            saved = os.path.join(cluster.workdir, "register-history.json")
            with open(saved, "w") as f:
                json.dump(operations, f, default=repr)
            raise AssertionError(f"the register's history is not linearizable (saved in {saved})")
        committed = {o: sum(1 for outcome, _ in transactions if outcome == o) for o in ("ok", "fail", "unknown")}
        anomalies = list_append.check(transactions, {d["_id"]: d["v"] for d in final["lists"]})
        print(f"list-append transactions {committed}; anomalies {sorted(anomalies) or 'none'}")
        assert not anomalies, f"list-append anomalies: { {k: v[:3] for k, v in anomalies.items()} }"
        assert committed["ok"] > 0, "no list-append transaction committed"
    finally:
        cluster.close()


def test_the_checker_finds_a_stale_read():
    """The register checker must be able to fail: a read of an overwritten value after the
    write that overwrote it completed is not linearizable; the same read overlapping the write
    is."""
    write = (0, "write", 1, 0.0, 1.0, "ok", None)
    overwrite = (0, "write", 2, 2.0, 3.0, "ok", None)
    stale = (1, "read", None, 4.0, 5.0, "ok", 1)
    assert not linearizable([write, overwrite, stale])
    overlapping = (1, "read", None, 2.5, 5.0, "ok", 1)
    assert linearizable([write, overwrite, overlapping])
    lost_cas = (1, "cas", (1, 3), 1.5, 1.8, "ok", None)
    assert linearizable([write, lost_cas, overwrite])
    assert not linearizable([write, overwrite, (1, "cas", (1, 3), 3.5, 4.0, "ok", None)])


def test_the_list_append_checker_finds_each_anomaly():
    """The transaction checker must be able to fail: one small history per anomaly, and write
    skew (two rw edges, which snapshot isolation allows) passes."""
    check = list_append.check
    ok = lambda *ops: ("ok", list(ops))  # noqa: E731
    append = lambda key, value: ("append", key, value)  # noqa: E731
    read = lambda key, values: ("read", key, values)  # noqa: E731
    assert check([ok(append(0, 1)), ok(read(0, [1]), append(0, 2))], {0: [1, 2]}) == {}
    assert "G0" in check([ok(append(0, 1), append(1, 2)), ok(append(0, 3), append(1, 4))], {0: [1, 3], 1: [4, 2]})
    assert "G1c" in check([ok(append(0, 1), read(1, [2])), ok(append(1, 2), read(0, [1]))], {0: [1], 1: [2]})
    single = check([ok(read(0, []), read(1, [2])), ok(append(0, 1), append(1, 2))], {0: [1], 1: [2]})
    assert list(single) == ["G-single"], single
    skew = check([ok(read(0, []), append(1, 1)), ok(read(1, []), append(0, 2))], {0: [2], 1: [1]})
    assert skew == {}, skew
    assert "G1a" in check([("fail", [append(0, 1)]), ok(read(0, [1]))], {0: [1]})
    assert "G1b" in check([ok(append(0, 1), append(0, 2)), ok(read(0, [1]))], {0: [1, 2]})
    assert "lost-append" in check([ok(append(0, 1))], {0: []})
    assert "incompatible-order" in check([ok(append(0, 1)), ok(append(0, 2)), ok(read(0, [2]))], {0: [1, 2]})
    assert "garbage" in check([], {0: [7]})
    assert "internal" in check([ok(append(0, 1), read(0, [5]))], {0: [5, 1]})
