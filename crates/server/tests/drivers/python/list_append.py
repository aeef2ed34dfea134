"""List-append transactions and a checker for the anomalies Elle looks for (Kingsbury and
Alvaro, "Elle: Inferring Isolation Anomalies from Experimental Observations", VLDB 2020).

The workload: a few keys, each a document `{_id: key, v: [...]}`; each transaction reads some
keys and appends unique values to others (`$push`), with snapshot read concern and
w:"majority", and records what it read and appended, and whether it committed ("ok"), surely
did not ("fail": it failed before its commit was sent, or the commit was refused as transient),
or may have ("unknown": the commit's outcome was lost).

The checker: since every appended value is unique, a list read names the transactions that
wrote each of its elements, and the longest list of a key (the final state) is that key's
version order. From it come Adya's dependencies between transactions: ww (the next append to a
key), wr (read a list whose last element another wrote), rw (read a list that another later
appended to). It reports
- G0 (a cycle of ww edges), G1c (a cycle of ww and wr edges), G-single (a cycle with exactly one
  rw edge): snapshot isolation, which MongoDB's transactions promise, allows none of them;
- G1a (a committed transaction read a value of one that failed), G1b (read a transaction's
  intermediate state: not its last append to that key);
- incompatible orders (two reads of a key that are not prefixes of one another), lost appends
  (a committed append missing from the final state), duplicates and values no one wrote;
- internal inconsistencies (a transaction not reading its own appends, or reading a key
  differently twice).
"""

import random
import time

import pymongo
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

KEYS = 5


def setup(client):
    lists = client.t.get_collection("lists", write_concern=WriteConcern("majority"))
    lists.insert_many([{"_id": k, "v": []} for k in range(KEYS)])


def worker(client, number, seed, stop, history):
    """Runs transactions until `stop` (a monotonic time); appends (outcome, ops) to `history`,
    ops being ("append", key, value) and ("read", key, list or None)."""
    rng = random.Random(seed)
    lists = client.t.lists
    serial = 0
    while time.monotonic() < stop:
        planned = []
        for _ in range(rng.randint(1, 4)):
            key = rng.randrange(KEYS)
            if rng.random() < 0.5:
                serial += 1
                planned.append(("append", key, number * 1_000_000 + serial))
            else:
                planned.append(("read", key, None))
        done, outcome = [], "fail"
        try:
            with client.start_session() as session:
                session.start_transaction(read_concern=ReadConcern("snapshot"), write_concern=WriteConcern("majority"))
                try:
                    for kind, key, value in planned:
                        if kind == "append":
                            lists.update_one({"_id": key}, {"$push": {"v": value}}, session=session)
                            done.append((kind, key, value))
                        else:
                            found = lists.find_one({"_id": key}, session=session)
                            done.append((kind, key, list(found["v"]) if found else None))
                except pymongo.errors.PyMongoError:
                    # Nothing was committed: the commit was never sent.
                    if session.in_transaction:
                        try:
                            session.abort_transaction()
                        except pymongo.errors.PyMongoError:
                            pass
                    raise
                outcome = "unknown"
                session.commit_transaction()
                outcome = "ok"
        except pymongo.errors.PyMongoError as error:
            refused = error.has_error_label("TransientTransactionError") and not error.has_error_label(
                "UnknownTransactionCommitResult"
            )
            if outcome == "unknown" and refused:
                outcome = "fail"
            if outcome == "fail":
                done = [op for op in done if op[0] == "append"] + [
                    op for op in planned[len(done):] if op[0] == "append"
                ]
            time.sleep(0.02)
        if outcome != "ok":
            # What a transaction that did not surely commit read tells nothing.
            done = [op for op in done if op[0] == "append"]
        history.append((outcome, done))


def check(history, final):
    """The anomalies in `history` given each key's `final` list: {name: [examples]}."""
    anomalies = {}

    def found(name, example):
        anomalies.setdefault(name, []).append(example)

    writer, position_in_writer = {}, {}
    for t, (outcome, ops) in enumerate(history):
        appended = {}
        for kind, key, value in ops:
            if kind == "append":
                if value in writer:
                    found("duplicate-append", value)
                writer[value] = t
                appended.setdefault(key, []).append(value)
        for key, values in appended.items():
            for i, value in enumerate(values):
                position_in_writer[value] = (key, i == len(values) - 1)
    order = {}
    for key, values in final.items():
        longest = list(values)
        for outcome, ops in history:
            for kind, k, value in ops:
                if kind == "read" and k == key and value is not None and len(value) > len(longest):
                    longest = value
        order[key] = longest
        if len(set(longest)) != len(longest):
            found("duplicate-element", key)
        for value in longest:
            if value not in writer:
                found("garbage", (key, value))
            elif history[writer[value]][0] == "fail":
                found("G1a", (key, value))
    for key, longest in order.items():
        for outcome, ops in history:
            for kind, k, value in ops:
                if kind == "read" and k == key and value is not None and value != longest[: len(value)]:
                    found("incompatible-order", (key, value, longest))
    present = {key: set(values) for key, values in order.items()}
    for t, (outcome, ops) in enumerate(history):
        if outcome == "ok":
            for kind, key, value in ops:
                if kind == "append" and value not in present.get(key, ()):
                    found("lost-append", (t, key, value))
    check_internal(history, found)

    # Transactions that took effect: committed, or unknown but seen.
    seen = {writer[v] for values in order.values() for v in values if v in writer}
    effective = {t for t, (outcome, _) in enumerate(history) if outcome == "ok"} | seen
    edges = {"ww": set(), "wr": set(), "rw": set()}
    for key, longest in order.items():
        for a, b in zip(longest, longest[1:]):
            if a in writer and b in writer and writer[a] != writer[b]:
                edges["ww"].add((writer[a], writer[b]))
    for t in effective:
        for kind, key, value in history[t][1]:
            if kind != "read" or value is None:
                continue
            if value:
                last = value[-1]
                if last in writer and writer[last] != t:
                    edges["wr"].add((writer[last], t))
                    if not position_in_writer.get(last, (key, True))[1]:
                        found("G1b", (t, key, last))
            longest = order.get(key, [])
            if len(value) < len(longest):
                following = longest[len(value)]
                if following in writer and writer[following] != t:
                    edges["rw"].add((t, writer[following]))
    g0 = cycles(effective, edges["ww"])
    for cycle in g0:
        found("G0", cycle)
    for cycle in cycles(effective, edges["ww"] | edges["wr"]):
        if cycle not in g0:
            found("G1c", cycle)
    non_rw = {}
    for a, b in edges["ww"] | edges["wr"]:
        non_rw.setdefault(a, set()).add(b)
    for a, b in edges["rw"]:
        if reaches(non_rw, b, a):
            found("G-single", (a, b))
    return anomalies


def check_internal(history, found):
    """Within one committed transaction: a read shows the transaction's own earlier appends
    last, and a key read again shows what it showed before plus the appends since."""
    for t, (outcome, ops) in enumerate(history):
        if outcome != "ok":
            continue
        expected, own = {}, {}
        for kind, key, value in ops:
            if kind == "append":
                if key in expected:
                    expected[key] = expected[key] + [value]
                else:
                    own.setdefault(key, []).append(value)
                continue
            if value is None:
                continue
            mine = own.pop(key, [])
            if key in expected and value != expected[key]:
                found("internal", (t, key, value, expected[key]))
            elif mine and value[-len(mine):] != mine:
                found("internal", (t, key, value, mine))
            expected[key] = value


def cycles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan's, iterative)."""
    graph = {n: [] for n in nodes}
    for a, b in edges:
        if a in graph and b in graph:
            graph[a].append(b)
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter[0]
                counter[0] += 1
                stack.append(node)
                on_stack.add(node)
            successors = graph[node]
            if i < len(successors):
                work.append((node, i + 1))
                child = successors[i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def reaches(graph, start, goal):
    frontier, seen = [start], {start}
    while frontier:
        node = frontier.pop()
        if node == goal:
            return True
        for following in graph.get(node, ()):
            if following not in seen:
                seen.add(following)
                frontier.append(following)
    return False
