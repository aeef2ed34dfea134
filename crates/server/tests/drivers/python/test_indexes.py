"""Every index kind through pymongo: single, compound, descending, unique, sparse, partial,
TTL, multikey; listIndexes, dropIndexes, hints, explain."""

import datetime

import pymongo
import pytest
from pymongo.errors import DuplicateKeyError, OperationFailure


def plan_stage(explain):
    plan = explain["queryPlanner"]["winningPlan"]
    stages = []
    while plan:
        stages.append(plan["stage"])
        plan = plan.get("inputStage")
    return stages


def test_index_kinds(db):
    c = db.ix
    c.insert_many([{"a": i, "b": -i, "tags": [f"t{i % 5}", "all"], "maybe": i if i % 2 else None} for i in range(100)])
    names = [
        c.create_index("a"),
        c.create_index([("a", 1), ("b", -1)]),
        c.create_index([("b", pymongo.DESCENDING)]),
        c.create_index("tags"),
        c.create_index("maybe", sparse=True),
        c.create_index("a", name="a_partial", partialFilterExpression={"a": {"$gt": 50}}),
    ]
    info = c.index_information()
    for name in names:
        assert name in info
    assert info["maybe_1"]["sparse"] is True
    assert "IXSCAN" in plan_stage(c.find({"a": 5}).explain())
    assert c.count_documents({"tags": "t3"}) == 20
    assert "IXSCAN" in plan_stage(c.find({"tags": "t3"}).explain())
    assert [d["a"] for d in c.find({"a": {"$gte": 95}}).hint("a_1").sort("a", 1)] == [95, 96, 97, 98, 99]
    assert [d["b"] for d in c.find({"b": {"$lte": -97}}).sort("b", -1)] == [-97, -98, -99]
    c.drop_index("b_-1")
    assert "b_-1" not in c.index_information()
    c.drop_indexes()
    assert list(c.index_information()) == ["_id_"]


def test_unique_and_compound_unique(db):
    c = db.uq
    c.create_index([("x", 1), ("y", 1)], unique=True)
    c.insert_one({"x": 1, "y": 1})
    c.insert_one({"x": 1, "y": 2})
    with pytest.raises(DuplicateKeyError) as failure:
        c.insert_one({"x": 1, "y": 1})
    assert failure.value.details["keyPattern"] == {"x": 1, "y": 1}
    c.insert_one({"z": 1})
    with pytest.raises(DuplicateKeyError) as failure:
        c.insert_one({"z": 2})
    assert failure.value.details["keyValue"] == {"x": None, "y": None}
    with pytest.raises(OperationFailure) as failure:
        c.create_index([("x", 1), ("y", 1)], unique=False)
    assert failure.value.code in (85, 86)


def test_ttl_index_is_created(db):
    c = db.ttl
    c.create_index("at", expireAfterSeconds=3600)
    c.insert_one({"at": datetime.datetime.now(datetime.timezone.utc)})
    assert c.index_information()["at_1"]["expireAfterSeconds"] == 3600


def test_index_errors(db):
    db.ie.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as failure:
        db.ie.drop_index("nope")
    assert failure.value.code == 27
    with pytest.raises(OperationFailure):
        db.ie.create_index([("a", "bogus")])
