"""The query language beyond plain CRUD (issue 21), through pymongo against the real binary:
`let` variables and `$$NOW`, pipeline updates, returnKey/showRecordId, the field-name rules of
`_id`, and the errors MongoDB 7 gives for what it refuses (an update's `sort`, Atlas Search)."""

import datetime
import os

import pytest
from conftest import StrataProcess
from pymongo import DeleteOne, UpdateOne
from pymongo.collation import Collation
from pymongo.errors import OperationFailure, WriteError


@pytest.fixture()
def coll(db):
    db.items.insert_many([{"_id": i, "name": f"n{i}", "x": i * 10} for i in range(1, 6)])
    return db.items


def test_let_reaches_every_command_that_takes_it(coll):
    by_id = {"$expr": {"$eq": ["$_id", "$$id"]}}
    assert [d["_id"] for d in coll.find(by_id, let={"id": 3})] == [3]
    pipeline = [{"$match": by_id}, {"$project": {"_id": 0, "seen": "$$id", "label": "$$label"}}]
    assert list(coll.aggregate(pipeline, let={"id": 2, "label": {"$concat": ["a", "b"]}})) == [
        {"seen": 2, "label": "ab"}
    ]
    assert coll.update_one(by_id, [{"$set": {"x": "$$value"}}], let={"id": 1, "value": 99}).modified_count == 1
    assert coll.find_one({"_id": 1})["x"] == 99
    assert coll.update_many({"$expr": {"$gt": ["$_id", "$$floor"]}}, {"$set": {"big": True}},
                            let={"floor": 3}).modified_count == 2
    assert coll.replace_one(by_id, {"name": "replaced"}, let={"id": 2}).modified_count == 1
    found = coll.find_one_and_update(by_id, {"$inc": {"x": 1}}, let={"id": 5}, return_document=True)
    assert found["x"] == 51
    assert coll.find_one_and_delete(by_id, let={"id": 5})["_id"] == 5
    assert coll.delete_many({"$expr": {"$in": ["$_id", "$$ids"]}}, let={"ids": [3, 4]}).deleted_count == 2
    bulk = coll.bulk_write([UpdateOne(by_id, [{"$set": {"bulk": "$$id"}}]), DeleteOne({"_id": 99})], let={"id": 1})
    assert bulk.modified_count == 1 and coll.find_one({"_id": 1})["bulk"] == 1
    assert sorted(d["_id"] for d in coll.find()) == [1, 2]


def test_let_errors_are_mongodbs(coll):
    with pytest.raises(OperationFailure) as undefined:
        coll.find_one({"$expr": {"$eq": ["$_id", "$$missing"]}})
    assert undefined.value.code == 17276
    with pytest.raises(OperationFailure) as bad_name:
        coll.find_one({}, let={"Upper": 1})
    assert bad_name.value.code == 16870
    with pytest.raises(OperationFailure) as not_object:
        coll.database.command("find", coll.name, let=[1])
    assert not_object.value.code == 14


def test_now_is_one_instant_per_statement_and_cluster_time_needs_a_replica_set(coll):
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(seconds=1)
    coll.update_many({}, [{"$set": {"at": "$$NOW"}}])
    stamps = {d["at"] for d in coll.find()}
    assert len(stamps) == 1 and stamps.pop() >= before
    with pytest.raises(OperationFailure) as standalone:
        list(coll.aggregate([{"$project": {"t": "$$CLUSTER_TIME"}}]))
    assert standalone.value.code == 51144


def test_rand_is_a_fresh_double_each_time(coll):
    values = [d["r"] for d in coll.aggregate([{"$project": {"r": {"$rand": {}}}}])]
    assert len(values) == 5 and len(set(values)) == 5 and all(0 <= v < 1 for v in values)
    with pytest.raises(OperationFailure) as with_argument:
        list(coll.aggregate([{"$project": {"r": {"$rand": {"seed": 1}}}}]))
    assert with_argument.value.code == 10065


def test_pipeline_update_keeps_the_id_it_drops_and_refuses_one_it_changes(db):
    db.nested.insert_one({"_id": 1, "t": {"u": 1}})
    db.nested.update_one({"_id": 1}, [{"$replaceRoot": {"newRoot": "$t"}}, {"$addFields": {"foo": 1}}])
    assert db.nested.find_one() == {"_id": 1, "u": 1, "foo": 1}
    with pytest.raises(WriteError) as changed:
        db.nested.update_one({"_id": 1}, [{"$set": {"_id": 2}}])
    assert changed.value.code == 66


def test_update_statement_constants(coll):
    reply = coll.database.command(
        "update", coll.name, updates=[{"q": {"_id": 1}, "u": [{"$set": {"x": "$$c1"}}], "c": {"c1": "constant"}}]
    )
    assert reply["nModified"] == 1 and coll.find_one({"_id": 1})["x"] == "constant"


def test_update_sort_is_refused_as_mongodb_7_refuses_it(coll):
    with pytest.raises(OperationFailure) as refused:
        coll.database.command("update", coll.name, updates=[{"q": {}, "u": {"$set": {"y": 1}}, "sort": {"_id": -1}}])
    assert refused.value.code == 40415 and "update.updates.sort" in str(refused.value)
    # The whole command fails before any statement runs, as mongod's parser refuses it.
    with pytest.raises(OperationFailure):
        coll.database.command("update", coll.name, updates=[
            {"q": {"_id": 1}, "u": {"$set": {"y": 1}}},
            {"q": {}, "u": {"$set": {"y": 2}}, "sort": {"_id": 1}},
        ])
    assert coll.count_documents({"y": {"$exists": True}}) == 0


def test_dollar_names_are_refused_in_id_only(db):
    db.dollars.insert_one({"_id": 1, "$a": 1, "b": {"$c": 2}, "d.e": 3})
    assert db.dollars.find_one({"_id": 1})["b"] == {"$c": 2}
    for bad in ({"$a": 1}, {"x": {"$b": 1}}):
        with pytest.raises(WriteError) as refused:
            db.dollars.insert_one({"_id": bad})
        assert refused.value.code == 52
    db.dollars.insert_one({"_id": {"a.b": 1}})
    assert db.dollars.count_documents({}) == 2


def test_return_key_and_show_record_id(coll):
    coll.create_index("x")
    assert list(coll.find({"x": {"$gte": 30}}, return_key=True).sort("x", 1)) == [{"x": 30}, {"x": 40}, {"x": 50}]
    assert list(coll.find({"name": "n1"}, return_key=True)) == [{}]  # a collection scan has no key
    shown = list(coll.find({"_id": {"$lte": 2}}, show_record_id=True).sort("_id", 1))
    assert [d["_id"] for d in shown] == [1, 2]
    record_ids = [d["$recordId"] for d in shown]
    assert all(isinstance(r, bytes) for r in record_ids) and record_ids[0] != record_ids[1]
    assert list(coll.find({}, return_key=True, show_record_id=True).sort("_id", 1).limit(1)) == [{"_id": 1}]


def test_atlas_search_is_refused_as_mongod_refuses_it(coll):
    for command in (
        {"createSearchIndexes": coll.name, "indexes": [{"definition": {"mappings": {"dynamic": True}}}]},
        {"updateSearchIndex": coll.name, "name": "x", "definition": {}},
        {"dropSearchIndex": coll.name, "name": "x"},
    ):
        with pytest.raises(OperationFailure) as refused:
            coll.database.command(command)
        assert refused.value.code == 31082 and "Atlas" in str(refused.value)
    with pytest.raises(OperationFailure) as stage:
        list(coll.aggregate([{"$listSearchIndexes": {}}]))
    assert stage.value.code == 31082


def test_merge_duplicate_key_names_its_key(db):
    db.target.insert_one({"_id": 2})
    with pytest.raises(OperationFailure) as duplicate:
        db.command("aggregate", 1, pipeline=[{"$documents": [{"_id": 2, "x": 1}]},
                                             {"$merge": {"into": "target", "whenMatched": "fail"}}], cursor={})
    assert duplicate.value.code == 11000
    assert duplicate.value.details["keyPattern"] == {"_id": 1}
    assert duplicate.value.details["keyValue"] == {"_id": 2}


def test_views_read_through_their_pipelines_and_refuse_writes(db):
    db.people.insert_many([{"_id": i, "name": f"p{i}", "age": 10 * i} for i in range(1, 7)])
    db.create_collection("adults", viewOn="people", pipeline=[{"$match": {"age": {"$gte": 30}}}])
    db.command("create", "named", viewOn="adults", pipeline=[{"$project": {"name": 1}}])  # a view on a view
    listed = {c["name"]: c for c in db.list_collections()}
    assert listed["adults"]["type"] == "view" and listed["adults"]["info"]["readOnly"] is True
    assert listed["adults"]["options"] == {"viewOn": "people", "pipeline": [{"$match": {"age": {"$gte": 30}}}]}
    assert "idIndex" not in listed["adults"] and listed["people"]["type"] == "collection"
    assert sorted(db.list_collection_names(filter={"type": "view"})) == ["adults", "named"]
    assert [d["_id"] for d in db.adults.find({"age": {"$lt": 60}}).sort("age", -1).skip(1).limit(2)] == [4, 3]
    assert list(db.named.find({}, {"_id": 0}).sort("name", 1).limit(1)) == [{"name": "p3"}]
    assert db.adults.count_documents({}) == 4 and db.adults.estimated_document_count() == 4
    assert db.named.count_documents({"name": "p6"}) == 1
    assert sorted(db.adults.distinct("age")) == [30, 40, 50, 60]
    grouped = list(db.adults.aggregate([{"$group": {"_id": None, "total": {"$sum": "$age"}}}]))
    assert grouped == [{"_id": None, "total": 180}]
    joined = list(db.people.aggregate([{"$match": {"_id": 1}},
                                       {"$lookup": {"from": "adults", "pipeline": [], "as": "grown"}}]))
    assert len(joined[0]["grown"]) == 4
    db.people.insert_one({"_id": 7, "name": "p7", "age": 70})  # a view reads the newest data
    assert db.adults.count_documents({}) == 5
    for write in (lambda: db.adults.insert_one({"age": 99}),
                  lambda: db.adults.update_one({}, {"$set": {"x": 1}}),
                  lambda: db.adults.delete_many({}),
                  lambda: db.adults.find_one_and_delete({}),
                  lambda: db.adults.create_index("age"),
                  lambda: db.adults.rename("grownups")):
        with pytest.raises(OperationFailure) as refused:
            write()
        assert refused.value.code == 166, write
    with pytest.raises(OperationFailure) as exists:
        db.command("create", "adults")
    assert exists.value.code == 48
    with pytest.raises(OperationFailure) as cycle:
        db.command("create", "loop", viewOn="loop", pipeline=[])
    assert cycle.value.code == 5
    with pytest.raises(OperationFailure) as writes:
        db.command("create", "out", viewOn="people", pipeline=[{"$out": "x"}])
    assert writes.value.code == 167
    assert db.command("dbStats")["views"] == 2
    db.adults.drop()
    assert "adults" not in db.list_collection_names()
    assert db.named.count_documents({}) == 0  # its source is gone: empty, as in MongoDB
    assert db.people.count_documents({}) == 7


def test_views_survive_kill_9(workdir):
    process = StrataProcess(os.path.join(workdir, "views"))
    client = process.client()
    client.v.base.insert_many([{"_id": i} for i in range(10)])
    client.v.create_collection("small", viewOn="base", pipeline=[{"$match": {"_id": {"$lt": 3}}}])
    client.close()
    process.kill()
    process = StrataProcess(process.dbpath)
    client = process.client()
    try:
        assert client.v.small.count_documents({}) == 3
        assert client.v.command("listCollections", filter={"name": "small"})["cursor"]["firstBatch"][0]["type"] == "view"
    finally:
        client.close()
        process.stop()


CASELESS = Collation(locale="en", strength=2)


def test_collation_on_every_read_and_write(db):
    words = ["apple", "Apple", "APPLE", "banana", "Éclair", "eclair", "b"]
    db.words.insert_many([{"_id": i, "w": w} for i, w in enumerate(words)])
    assert db.words.count_documents({"w": "apple"}) == 1
    assert db.words.count_documents({"w": "apple"}, collation=CASELESS) == 3
    assert db.words.count_documents({"w": "eclair"}, collation=Collation(locale="fr", strength=1)) == 2
    assert sorted(d["_id"] for d in db.words.find({"w": {"$in": ["APPLE", "B"]}}, collation=CASELESS)) == [0, 1, 2, 6]
    # Strength 2 tells accents apart (e before é) but not case.
    assert [d["w"] for d in db.words.find({"w": {"$gt": "b"}}, collation=CASELESS).sort("w", 1)] == [
        "banana", "eclair", "Éclair"]
    binary = [d["w"] for d in db.words.find().sort("w", 1)]
    assert binary[:3] == ["APPLE", "Apple", "apple"] and binary[-1] == "Éclair"  # bytes: capitals, then é last
    english = [d["w"] for d in db.words.find({}, collation=Collation(locale="en")).sort([("w", 1), ("_id", 1)])]
    assert english == ["apple", "Apple", "APPLE", "b", "banana", "eclair", "Éclair"]
    numeric = Collation(locale="en", numericOrdering=True)
    db.versions.insert_many([{"v": v} for v in ["10", "9", "100"]])
    assert [d["v"] for d in db.versions.find({}, {"_id": 0}, collation=numeric).sort("v", 1)] == ["9", "10", "100"]
    # One value of each group the collation equates: the first met.
    assert db.words.distinct("w", collation=CASELESS) == ["apple", "b", "banana", "eclair", "Éclair"]
    assert db.words.distinct("w", collation=Collation(locale="en", strength=1)) == ["apple", "b", "banana", "Éclair"]
    pipeline = [{"$match": {"w": "APPLE"}}, {"$sort": {"w": 1}}, {"$count": "n"}]
    assert list(db.words.aggregate(pipeline, collation=CASELESS)) == [{"n": 3}]
    assert db.words.update_many({"w": "apple"}, {"$set": {"fruit": True}}, collation=CASELESS).modified_count == 3
    found = db.words.find_one_and_update({"w": "ECLAIR"}, {"$set": {"pastry": True}},
                                         collation=Collation(locale="en", strength=1), sort=[("_id", 1)])
    assert found["_id"] == 4
    assert db.words.delete_many({"w": "BANANA"}, collation=CASELESS).deleted_count == 1
    assert db.words.count_documents({}) == 6


def test_collation_in_group_keys_and_expression_comparisons(db):
    db.fruit.insert_many([{"_id": i, "w": w, "n": i} for i, w in
                          enumerate(["Apple", "apple", "banana", "APPLE", "Banana", "cherry"])])
    by_word = [{"$group": {"_id": "$w", "n": {"$sum": 1}, "ids": {"$push": "$_id"}}}, {"$sort": {"_id": 1}}]
    # Under the collation, the groups are the collation's equal keys, each named by the first met.
    assert list(db.fruit.aggregate(by_word, collation=CASELESS)) == [
        {"_id": "Apple", "n": 3, "ids": [0, 1, 3]},
        {"_id": "banana", "n": 2, "ids": [2, 4]},
        {"_id": "cherry", "n": 1, "ids": [5]},
    ]
    assert len(list(db.fruit.aggregate(by_word))) == 6  # binary: every spelling its own group
    # Comparison operators in $expr and in expressions compare under the collation too.
    assert db.fruit.count_documents({"$expr": {"$eq": ["$w", "APPLE"]}}, collation=CASELESS) == 3
    assert db.fruit.count_documents({"$expr": {"$eq": ["$w", "APPLE"]}}) == 1
    assert db.fruit.count_documents({"$expr": {"$lt": ["$w", "B"]}}, collation=CASELESS) == 3
    flagged = db.fruit.aggregate([{"$project": {"apple": {"$eq": ["$w", "apple"]},
                                                 "fruit": {"$in": ["$w", ["APPLE", "BANANA"]]},
                                                 "order": {"$cmp": ["$w", "BANANA"]}}},
                                  {"$sort": {"_id": 1}}], collation=CASELESS)
    assert [(d["apple"], d["fruit"], d["order"]) for d in flagged] == [
        (True, True, -1), (True, True, -1), (False, True, 0), (True, True, -1), (False, True, 0), (False, False, 1)]
    # So do a find's projection expressions (the find's collation, or the collection's).
    projected = db.fruit.find({}, {"apple": {"$eq": ["$w", "APPLE"]}}, collation=CASELESS).sort("_id", 1)
    assert [d["apple"] for d in projected] == [True, True, False, True, False, False]
    assert [d["apple"] for d in db.fruit.find({}, {"apple": {"$eq": ["$w", "APPLE"]}}).sort("_id", 1)] == [
        False, False, False, True, False, False]
    # Accumulators compare under it too, and give back the values themselves, never their keys.
    def extremes(ids, **options):
        return list(db.fruit.aggregate([
            {"$match": {"_id": {"$in": ids}}}, {"$sort": {"_id": 1}},
            {"$group": {"_id": None, "max": {"$max": "$w"}, "min": {"$min": "$w"}, "set": {"$addToSet": "$w"}}},
            {"$project": {"_id": 0}}], **options))
    assert extremes([1, 4], collation=CASELESS) == [{"max": "Banana", "min": "apple", "set": ["apple", "Banana"]}]
    assert extremes([1, 4]) == [{"max": "apple", "min": "Banana", "set": ["apple", "Banana"]}]
    assert extremes([0, 1, 3], collation=CASELESS)[0]["set"] == ["Apple"]
    assert len(extremes([0, 1, 3])[0]["set"]) == 3
    # Expression operators that return their arguments choose and order them under it.
    words = [{"$match": {"_id": 0}}, {"$project": {
        "_id": 0,
        "max": {"$max": ["apple", "Banana"]},
        "union": {"$setUnion": [["apple", "APPLE", "Banana"], ["banana"]]},
        "sorted": {"$sortArray": {"input": ["banana", "Apple", "cherry", "apple"], "sortBy": 1}},
    }}]
    assert list(db.fruit.aggregate(words, collation=CASELESS)) == [
        {"max": "Banana", "union": ["apple", "Banana"], "sorted": ["Apple", "apple", "banana", "cherry"]}]
    assert list(db.fruit.aggregate(words)) == [
        {"max": "apple", "union": ["apple", "APPLE", "Banana", "banana"], "sorted": ["Apple", "apple", "banana", "cherry"]}]


def test_set_trig_bitwise_and_size_operators(db):
    db.ops.insert_one({"_id": 1, "a": [1, 2, 3], "b": [3, 4], "mask": 12, "doc": {"x": 1}})
    out = db.ops.aggregate([{"$project": {
        "_id": 0,
        "both": {"$setIntersection": ["$a", "$b"]},
        "only_a": {"$setDifference": ["$a", "$b"]},
        "subset": {"$setIsSubset": [[1], "$a"]},
        "top2": {"$maxN": {"n": 2, "input": "$a"}},
        "first2": {"$firstN": {"n": 2, "input": "$b"}},
        "cos0": {"$cos": 0},
        "bits": {"$bitAnd": ["$mask", 10]},
        "size": {"$bsonSize": "$doc"},
    }}])
    assert list(out) == [{"both": [3], "only_a": [1, 2], "subset": True, "top2": [3, 2], "first2": [3, 4],
                          "cos0": 1.0, "bits": 8, "size": 12}]
    with pytest.raises(OperationFailure) as error:
        list(db.ops.aggregate([{"$project": {"x": {"$setUnion": ["$a", 1]}}}]))
    assert error.value.code == 17043
    db.scores.insert_many([{"g": 1, "p": p, "s": s} for p, s in [("a", 5), ("b", 9), ("c", 7)]])
    leaders = db.scores.aggregate([{"$group": {
        "_id": "$g",
        "top2": {"$topN": {"n": 2, "sortBy": {"s": -1}, "output": "$p"}},
        "worst": {"$bottom": {"sortBy": {"s": -1}, "output": "$p"}},
        "max2": {"$maxN": {"n": 2, "input": "$s"}},
    }}])
    assert list(leaders) == [{"_id": 1, "top2": ["b", "c"], "worst": "a", "max2": [9, 7]}]


def test_olson_time_zones_and_date_parts(db):
    summer, winter = datetime.datetime(2024, 7, 1, 12), datetime.datetime(2024, 1, 15, 12)
    db.times.insert_many([{"_id": 1, "at": summer}, {"_id": 2, "at": winter}])
    out = db.times.aggregate([{"$sort": {"_id": 1}}, {"$project": {
        "_id": 0,
        "local": {"$dateToString": {"date": "$at", "format": "%H:%M %z", "timezone": "America/New_York"}},
        "parts": {"$dateToParts": {"date": "$at", "timezone": "Europe/Paris"}},
        "back": {"$dateFromParts": {"year": 2024, "month": 7, "day": 1, "hour": 8, "timezone": "America/New_York"}},
    }}])
    first, second = list(out)
    assert (first["local"], second["local"]) == ("08:00 -0400", "07:00 -0500")
    assert (first["parts"]["hour"], second["parts"]["hour"]) == (14, 13)
    assert first["back"] == summer
    with pytest.raises(OperationFailure) as error:
        list(db.times.aggregate([{"$project": {"h": {"$hour": {"date": "$at", "timezone": "Mars/Olympus"}}}}]))
    assert error.value.code == 40485


def test_set_window_fields_ranks_runs_and_time_ranges(db):
    day = datetime.timedelta(days=1)
    start = datetime.datetime(2024, 3, 1)
    db.sales.insert_many([
        {"_id": i, "store": store, "at": start + offset * day, "amount": amount}
        for i, (store, offset, amount) in enumerate(
            [("A", 0, 10), ("B", 0, 7), ("A", 1, 30), ("A", 3, 20), ("B", 2, 7), ("b", 5, 1)])
    ])
    out = list(db.sales.aggregate([
        {"$setWindowFields": {
            "partitionBy": "$store",
            "sortBy": {"at": 1},
            "output": {
                "running": {"$sum": "$amount", "window": {"documents": ["unbounded", "current"]}},
                "twoDays": {"$sum": "$amount", "window": {"range": [-1, "current"], "unit": "day"}},
                "rank": {"$denseRank": {}},
                "median": {"$median": {"input": "$amount", "method": "approximate"}},
            },
        }},
        {"$project": {"_id": 1, "running": 1, "twoDays": 1, "rank": 1, "median": 1}},
    ], collation={"locale": "en", "strength": 2}))
    # "B" and "b" are one partition under the case-insensitive collation.
    assert [d["_id"] for d in out] == [0, 2, 3, 1, 4, 5]
    assert [d["running"] for d in out] == [10, 40, 60, 7, 14, 15]
    assert [d["twoDays"] for d in out] == [10, 40, 20, 7, 7, 1]
    assert [d["rank"] for d in out] == [1, 2, 3, 1, 2, 3]
    assert [d["median"] for d in out] == [20.0, 20.0, 20.0, 7.0, 7.0, 7.0]
    with pytest.raises(OperationFailure) as error:
        list(db.sales.aggregate([{"$setWindowFields": {"output": {"r": {"$rank": {}}}}}]))
    assert error.value.code == 5371602
    grouped = list(db.sales.aggregate([{"$group": {
        "_id": None, "p": {"$percentile": {"input": "$amount", "p": [0.5, 0.9], "method": "discrete"}}}}]))
    assert grouped == [{"_id": None, "p": [7.0, 30.0]}]


def test_densify_fill_and_sample_rate(db):
    start = datetime.datetime(2021, 5, 18)
    hour = datetime.timedelta(hours=1)
    db.readings.insert_many([{"at": start + h * hour, "temp": t} for h, t in [(0, 12), (3, None), (4, 20)]])
    out = list(db.readings.aggregate([
        {"$densify": {"field": "at", "range": {"step": 1, "unit": "hour", "bounds": "full"}}},
        {"$fill": {"sortBy": {"at": 1}, "output": {"temp": {"method": "linear"}}}},
        {"$project": {"_id": 0}},
    ]))
    assert [d["at"] for d in out] == [start + h * hour for h in range(5)]
    assert [d["temp"] for d in out] == [12, 14.0, 16.0, 18.0, 20]
    with pytest.raises(OperationFailure) as error:
        list(db.readings.aggregate([{"$densify": {"field": "at", "range": {"step": 1, "bounds": "full"}}}]))
    assert error.value.code == 6053601
    db.many.insert_many([{"i": i} for i in range(2000)])
    assert db.many.count_documents({"$sampleRate": 0}) == 0
    assert 700 <= db.many.count_documents({"$sampleRate": 0.5}) <= 1300


def test_bucket_boundaries_pipeline_updates_and_backwards_under_collation(db):
    db.words.insert_many([{"_id": i, "w": w} for i, w in enumerate(["Banana", "apple", "zebra", "Mango"])])
    insensitive = {"locale": "en", "strength": 1}
    buckets = list(db.words.aggregate(
        [{"$bucket": {"groupBy": "$w", "boundaries": ["a", "m", "zzz"]}}], collation=insensitive))
    assert buckets == [{"_id": "a", "count": 2}, {"_id": "m", "count": 2}]
    db.words.update_many({}, [{"$set": {"isApple": {"$eq": ["$w", "APPLE"]}}}], collation=insensitive)
    assert [d["_id"] for d in db.words.find({"isApple": True})] == [1]
    db.french.insert_many([{"w": w} for w in ["côté", "coté", "côte", "cote"]])
    backwards = {"locale": "fr", "backwards": True}
    assert [d["w"] for d in db.french.find().sort("w", 1).collation(backwards)] == ["cote", "côte", "coté", "côté"]
    assert [d["w"] for d in db.french.find().sort("w", 1).collation({"locale": "fr"})] == [
        "cote", "coté", "côte", "côté"]


def test_time_series_collections(db):
    db.create_collection("weather", timeseries={"timeField": "ts", "metaField": "sensor"}, expireAfterSeconds=86400)
    info = next(db.list_collections(filter={"name": "weather"}))
    assert info["type"] == "timeseries" and "idIndex" not in info
    assert info["options"]["timeseries"] == {
        "timeField": "ts", "metaField": "sensor", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}
    assert info["options"]["expireAfterSeconds"] == 86400
    assert "sensor_1_ts_1" in db.weather.index_information()
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0, tzinfo=None)
    db.weather.insert_many([{"ts": now, "sensor": {"id": 1}, "temp": 12}, {"ts": now, "sensor": {"id": 2}, "temp": 14}])
    assert db.weather.count_documents({"sensor.id": 2}) == 1
    with pytest.raises(WriteError) as error:
        db.weather.insert_one({"sensor": {"id": 3}, "temp": 1})
    assert error.value.code == 2 and "'ts' must be present" in str(error.value)
    with pytest.raises(OperationFailure) as error:
        db.create_collection("bad", timeseries={"timeField": "t", "granularity": "days"})
    assert error.value.code == 2


def test_a_collections_default_collation_and_its_override(db):
    db.create_collection("names", collation=CASELESS)
    listed = db.command("listCollections", filter={"name": "names"})["cursor"]["firstBatch"][0]
    assert listed["options"]["collation"]["locale"] == "en" and listed["options"]["collation"]["strength"] == 2
    db.names.insert_many([{"n": "Ada"}, {"n": "ada"}, {"n": "ADA"}, {"n": "Bob"}])
    assert db.names.count_documents({"n": "ada"}) == 3
    assert db.names.count_documents({"n": "ada"}, collation=Collation(locale="simple")) == 1
    db.names.create_index("n")  # inherits the collection's collation, as in MongoDB
    assert db.names.index_information()["n_1"]["collation"]["strength"] == 2
    assert db.names.count_documents({"n": "ADA"}) == 3
    assert db.names.count_documents({"n": "ada"}, collation=Collation(locale="simple")) == 1


def test_collated_indexes_serve_the_queries_of_their_collation(db):
    db.people.insert_many([{"_id": i, "name": name} for i, name in
                           enumerate(["Ada", "ada", "ADA", "Bob", "bob", "Éve", "eve", "Zed"])])
    db.people.create_index("name", collation=CASELESS, name="name_caseless")
    db.people.create_index("name", name="name_binary")
    assert db.people.index_information()["name_caseless"]["collation"]["locale"] == "en"

    def winning(cursor):
        return cursor.explain()["queryPlanner"]["winningPlan"]

    query = db.people.find({"name": "ada"}, collation=CASELESS)
    assert sorted(d["_id"] for d in query.clone()) == [0, 1, 2]
    assert "name_caseless" in str(winning(query)) and "FETCH" in str(winning(query))
    binary = db.people.find({"name": "ada"})
    assert [d["_id"] for d in binary.clone()] == [1] and "name_binary" in str(winning(binary))
    # A range, and the sort read from the index in the collation's order.
    ranged = db.people.find({"name": {"$gte": "b", "$lt": "f"}}, collation=CASELESS).sort("name", 1)
    assert [d["name"] for d in ranged.clone()] == ["Bob", "bob", "eve", "Éve"]  # accents count at strength 2
    assert "SORT" not in str(winning(ranged)) and "name_caseless" in str(winning(ranged))
    # A unique collated index equates what its collation equates.
    db.logins.create_index("user", unique=True, collation=CASELESS)
    db.logins.insert_one({"user": "Grace"})
    with pytest.raises(WriteError) as duplicate:
        db.logins.insert_one({"user": "GRACE"})
    assert duplicate.value.code == 11000
    assert db.command("validate", "people")["valid"] and db.command("validate", "logins")["valid"]


def test_collation_errors_are_mongodbs(db):
    db.c.insert_one({"x": "a"})
    for bad, code in (({"locale": "en", "strength": 9}, 2), ({"strength": 1}, 4),
                      ({"locale": "en", "bogus": 1}, 40415), ({"locale": "en", "caseFirst": "x"}, 9)):
        with pytest.raises(OperationFailure) as refused:
            db.command("find", "c", filter={}, collation=bad)
        assert refused.value.code == code, bad


def test_validation_levels_actions_and_bypass(db):
    schema = {"$jsonSchema": {"required": ["name"], "properties": {"age": {"bsonType": "int", "minimum": 0}}}}
    db.create_collection("people", validator=schema)
    db.people.insert_one({"_id": 1, "name": "ada", "age": 36})
    with pytest.raises(WriteError) as refused:
        db.people.insert_one({"_id": 2, "age": -1})
    assert refused.value.code == 121
    info = refused.value.details["errInfo"]
    assert info["failingDocumentId"] == 2 and info["details"]["operatorName"] == "$jsonSchema"
    rules = {rule["operatorName"]: rule for rule in info["details"]["schemaRulesNotSatisfied"]}
    assert rules["required"]["missingProperties"] == ["name"]
    assert rules["properties"]["propertiesNotSatisfied"][0]["propertyName"] == "age"
    with pytest.raises(WriteError):
        db.people.update_one({"_id": 1}, {"$unset": {"name": 1}})
    with pytest.raises(OperationFailure) as in_fam:
        db.people.find_one_and_update({"_id": 1}, {"$set": {"age": "old"}})
    assert in_fam.value.code == 121
    db.people.insert_one({"_id": 3, "age": -5}, bypass_document_validation=True)
    db.people.update_one({"_id": 3}, {"$set": {"age": -6}}, bypass_document_validation=True)
    assert db.people.count_documents({}) == 2

    # moderate: documents already invalid may change; valid ones must stay valid.
    db.command("collMod", "people", validationLevel="moderate")
    db.people.update_one({"_id": 3}, {"$set": {"age": -7}})
    with pytest.raises(WriteError):
        db.people.update_one({"_id": 1}, {"$set": {"age": -1}})
    # warn: written, and logged.
    db.command("collMod", "people", validationAction="warn", validationLevel="strict")
    db.people.insert_one({"_id": 4})
    assert db.people.count_documents({}) == 3
    # A new validator replaces the old one; {} removes it.
    db.command("collMod", "people", validator={"age": {"$gte": 0}}, validationAction="error")
    with pytest.raises(WriteError):
        db.people.insert_one({"_id": 5, "age": -1})
    db.command("collMod", "people", validator={})
    db.people.insert_one({"_id": 5, "age": -1})
    options = db.command("listCollections", filter={"name": "people"})["cursor"]["firstBatch"][0]["options"]
    assert options["validationLevel"] == "strict" and options["validationAction"] == "error"
    for bad, code in (({"validator": {"$text": {"$search": "x"}}}, 224), ({"validationLevel": "sometimes"}, 2),
                      ({"validator": {"a": {"$bogus": 1}}}, 2)):
        with pytest.raises(OperationFailure) as refused:
            db.command("collMod", "people", **bad)
        assert refused.value.code == code, bad


def test_coll_mod_hides_indexes_and_changes_ttl(db):
    db.events.insert_many([{"k": i, "at": datetime.datetime(2020, 1, 1)} for i in range(50)])
    db.events.create_index("k")
    db.events.create_index("at", expireAfterSeconds=10**9)
    plan = db.events.find({"k": 3}).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" in str(plan)
    reply = db.command("collMod", "events", index={"keyPattern": {"k": 1}, "hidden": True})
    assert reply["hidden_old"] is False and reply["hidden_new"] is True
    assert "IXSCAN" not in str(db.events.find({"k": 3}).explain()["queryPlanner"]["winningPlan"])
    assert db.events.count_documents({"k": 3}) == 1  # still maintained and answered
    assert [i.get("hidden") for i in db.events.list_indexes() if i["name"] == "k_1"] == [True]
    reply = db.command("collMod", "events", index={"name": "at_1", "expireAfterSeconds": 3600})
    assert reply["expireAfterSeconds_old"] == 10**9 and reply["expireAfterSeconds_new"] == 3600
    assert [i["expireAfterSeconds"] for i in db.events.list_indexes() if i["name"] == "at_1"] == [3600]
    db.command("collMod", "events", index={"name": "k_1", "hidden": False})
    assert "IXSCAN" in str(db.events.find({"k": 3}).explain()["queryPlanner"]["winningPlan"])
    with pytest.raises(OperationFailure) as missing:
        db.command("collMod", "events", index={"name": "nope", "hidden": True})
    assert missing.value.code == 27


def test_clustered_index_option_is_reported(db):
    db.command("create", "clustered", clusteredIndex={"key": {"_id": 1}, "unique": True, "name": "by id"})
    listed = db.command("listCollections", filter={"name": "clustered"})["cursor"]["firstBatch"][0]
    assert listed["options"]["clusteredIndex"] == {"v": 2, "key": {"_id": 1}, "name": "by id", "unique": True}
    assert "idIndex" not in listed
    assert list(db.clustered.list_indexes()) == [{"v": 2, "key": {"_id": 1}, "name": "by id", "unique": True, "clustered": True}]
    for bad in ({"key": {"a": 1}, "unique": True}, {"key": {"_id": 1}}, {"key": {"_id": 1}, "unique": True, "x": 1}):
        with pytest.raises(OperationFailure) as refused:
            db.command("create", "bad_clustered", clusteredIndex=bad)
        assert refused.value.code == 72, bad


def test_legacy_index_options_are_refused_as_mongodb_7_refuses_them(db):
    for option in ({"dropDups": True}, {"safe": True}, {"bogus": 1}):
        with pytest.raises(OperationFailure) as refused:
            db.legacy.create_index("a", **option)
        assert refused.value.code == 197 and "is not valid for an index specification" in str(refused.value)


def test_find_cursor_options(db):
    db.pages.insert_many([{"_id": i, "a": i % 5, "b": i} for i in range(40)])
    db.pages.create_index([("a", 1), ("b", -1)])
    cursor = db.command("find", "pages", batchSize=0, noCursorTimeout=True, allowPartialResults=True, comment="why")
    assert cursor["cursor"]["firstBatch"] == [] and cursor["cursor"]["id"] != 0
    assert len(db.command("getMore", cursor["cursor"]["id"], collection="pages")["cursor"]["nextBatch"]) == 40
    # Index order is a ascending, then b descending: from (1, 30) up to, not including, (2, 20).
    hinted = db.pages.find().hint([("a", 1), ("b", -1)]).min([("a", 1), ("b", 30)]).max([("a", 2), ("b", 20)])
    expected = [(1, b) for b in (26, 21, 16, 11, 6, 1)] + [(2, b) for b in (37, 32, 27, 22)]
    assert sorted(((d["a"], d["b"]) for d in hinted), key=lambda k: (k[0], -k[1])) == expected
    with pytest.raises(OperationFailure) as no_hint:  # (pymongo checks this itself: sent raw)
        db.command("find", "pages", min={"a": 1, "b": 1})
    assert no_hint.value.code == 51173
    with pytest.raises(OperationFailure) as wrong_fields:
        list(db.pages.find().hint([("a", 1), ("b", -1)]).min([("b", 1)]))
    assert wrong_fields.value.code == 51174


def test_coll_stats_stage(db):
    db.stats_here.insert_many([{"x": "y" * 100} for _ in range(10)])
    (stats,) = db.stats_here.aggregate([{"$collStats": {"storageStats": {}, "count": {}}}])
    assert stats["ns"].endswith(".stats_here") and stats["count"] == 10
    assert stats["storageStats"]["count"] == 10 and stats["storageStats"]["size"] > 1000
    (projected,) = db.stats_here.aggregate([{"$collStats": {"count": {}}}, {"$project": {"_id": 0, "count": 1}}])
    assert projected == {"count": 10}
    db.stats_here.find_one()
    (latency,) = db.stats_here.aggregate([{"$collStats": {"latencyStats": {"histograms": True}}}])
    reads, writes = latency["latencyStats"]["reads"], latency["latencyStats"]["writes"]
    assert reads["ops"] >= 1 and writes["ops"] == 1 and writes["latency"] > 0
    assert sum(bucket["count"] for bucket in reads["histogram"]) == reads["ops"]
    with pytest.raises(OperationFailure) as refused:
        list(db.stats_here.aggregate([{"$collStats": {"queryExecStats": {}}}]))
    assert refused.value.code == 72
    totals = db.client.admin.command("top")["totals"]
    mine = totals[f"{db.name}.stats_here"]
    assert mine["insert"]["count"] == 1 and mine["queries"]["count"] >= 3
    assert mine["total"]["count"] == mine["readLock"]["count"] + mine["writeLock"]["count"] + mine["commands"]["count"]


def test_stable_api_strict_mode(server):
    from pymongo.server_api import ServerApi

    strict = server.client(server_api=ServerApi("1", strict=True))
    try:
        strict.api.things.insert_one({"a": 1})
        assert strict.api.things.count_documents({}) == 1
        with pytest.raises(OperationFailure) as refused:
            strict.admin.command("serverStatus")
        assert refused.value.code == 323
    finally:
        strict.close()
    plain = server.client()
    try:
        with pytest.raises(OperationFailure) as version:
            plain.admin.command("ping", apiVersion="2")
        assert version.value.code == 322
        with pytest.raises(OperationFailure) as without:
            plain.admin.command("ping", apiStrict=True)
        assert without.value.code == 72
    finally:
        plain.close()


def test_capped_collections_keep_insertion_order_and_drop_the_oldest(db):
    db.create_collection("log", capped=True, size=100_000, max=5)
    for i in (5, 3, 9, 1, 7, 2, 8):  # _ids out of order: natural order is insertion order
        db.log.insert_one({"_id": i})
    assert [d["_id"] for d in db.log.find()] == [9, 1, 7, 2, 8]
    assert [d["_id"] for d in db.log.find().sort("$natural", -1)] == [8, 2, 7, 1, 9]
    assert db.log.count_documents({}) == 5 and db.log.find_one({"_id": 5}) is None
    options = db.command("listCollections", filter={"name": "log"})["cursor"]["firstBatch"][0]["options"]
    assert options["capped"] is True and options["size"] == 100_000 and options["max"] == 5
    assert db.command("collStats", "log")["capped"] is True
    db.log.delete_one({"_id": 7})
    db.log.insert_many([{"_id": 20}, {"_id": 21}])
    assert [d["_id"] for d in db.log.find()] == [1, 2, 8, 20, 21]
    # By size: each ~1 KB document, 4 KB allowed.
    db.create_collection("small", capped=True, size=4096)
    db.small.insert_many([{"_id": i, "pad": "x" * 1000} for i in range(10)])
    assert [d["_id"] for d in db.small.find()] == [6, 7, 8, 9]  # 4 x 1,020 bytes fit in 4,096
    for bad in ({"capped": True}, {"capped": True, "size": -5}):
        with pytest.raises(OperationFailure) as refused:
            db.command("create", "bad_capped", **bad)
        assert refused.value.code == 72, bad


def test_convert_to_capped_keeps_the_newest_that_fit(db):
    db.plain.insert_many([{"_id": i, "pad": "x" * 1000} for i in range(10)])
    db.plain.create_index("pad")
    db.command("convertToCapped", "plain", size=4096)
    assert [d["_id"] for d in db.plain.find()] == [6, 7, 8, 9]
    assert db.command("collStats", "plain")["capped"] is True
    assert [i["name"] for i in db.plain.list_indexes()] == ["_id_"]  # as MongoDB: indexes not kept
    db.plain.insert_one({"_id": 10, "pad": "y" * 1000})
    assert [d["_id"] for d in db.plain.find()] == [7, 8, 9, 10]
    with pytest.raises(OperationFailure) as missing:
        db.command("convertToCapped", "nothing_here", size=4096)
    assert missing.value.code == 26


def test_tailable_and_await_data_cursors_on_a_capped_collection(db):
    from pymongo import CursorType

    db.create_collection("feed", capped=True, size=1 << 20)
    db.feed.insert_many([{"_id": i} for i in range(3)])
    cursor = db.feed.find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(2000)
    assert [cursor.next()["_id"] for _ in range(3)] == [0, 1, 2]
    db.feed.insert_one({"_id": 3})
    assert cursor.next()["_id"] == 3  # woken by the insert, not by the await time
    assert cursor.alive
    cursor.close()
    with pytest.raises(OperationFailure):
        list(db.plain_not_capped.find(cursor_type=CursorType.TAILABLE))


def test_hashed_indexes_key_mongodbs_hash_and_serve_equality(db):
    coll = db.hashed
    coll.create_index([("a", "hashed")])
    assert coll.index_information()["a_hashed"]["key"] == [("a", "hashed")]
    coll.insert_many([{"_id": i, "a": i} for i in range(10)] + [{"_id": 10, "a": 3.1}, {"_id": 11}])
    # Equal hashes (3 and 3.1) are told apart by the document itself.
    assert [d["_id"] for d in coll.find({"a": 3.1}).hint("a_hashed")] == [10]
    assert [d["_id"] for d in coll.find({"a": 3}).hint("a_hashed")] == [3]
    assert sorted(d["_id"] for d in coll.find({"a": {"$in": [1, 2]}})) == [1, 2]
    assert [d["_id"] for d in coll.find({"a": None})] == [11]
    plan = coll.find({"a": 4}).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["indexName"] == "a_hashed", plan
    # A range cannot use a hash: the collection is scanned.
    assert "a_hashed" not in str(coll.find({"a": {"$gt": 4}}).explain()["queryPlanner"]["winningPlan"])
    assert sorted(d["_id"] for d in coll.find({"a": {"$gt": 7}})) == [8, 9]
    # MongoDB's hash, bit for bit (its hasher_test.cpp), through the index and $toHashedIndexKey.
    assert coll.aggregate([{"$match": {"_id": 0}}, {"$project": {"h": {"$toHashedIndexKey": 42}}}]).next()["h"] == \
        -944302157085130861
    with pytest.raises(WriteError) as error:
        coll.insert_one({"a": [1, 2]})
    assert error.value.code == 16766
    assert coll.count_documents({}) == 12
    with pytest.raises(OperationFailure) as error:
        db.other.create_index([("a", "hashed")], unique=True)
    assert error.value.code == 16764
    with pytest.raises(OperationFailure) as error:
        db.other.create_index([("a", "hashed"), ("b", "hashed")])
    assert error.value.code == 31303
    db.arrays.insert_one({"a": [1]})
    with pytest.raises(OperationFailure) as error:
        db.arrays.create_index([("a", "hashed")])
    assert error.value.code == 16766
    # Compound: equality on the hashed field, then the next field's order serves a sort.
    coll.create_index([("g", "hashed"), ("n", 1)])
    coll.insert_many([{"g": "x", "n": n} for n in (3, 1, 2)])
    assert [d["n"] for d in coll.find({"g": "x"}).sort("n", 1)] == [1, 2, 3]
    assert db.command("validate", "hashed")["valid"]


def slow_lookup(coll):
    """An aggregation that reads the collection once per document (N² entries), all of it
    before its first batch (`$group`)."""
    return [
        {"$lookup": {"from": coll.name, "pipeline": [{"$match": {"never": True}}], "as": "none"}},
        {"$group": {"_id": None, "n": {"$sum": 1}}},
    ]


def test_current_op_lists_a_running_command_and_kill_op_stops_it(server, db):
    import threading

    db.big.insert_many([{"_id": i, "pad": "x" * 50} for i in range(3000)])
    admin = server.client(appName="watcher").admin
    outcome = {}

    def run():
        try:
            list(server.client(appName="slowpoke")[db.name].big.aggregate(slow_lookup(db.big)))
            outcome["result"] = "finished"
        except OperationFailure as error:
            outcome["result"] = error.code

    worker = threading.Thread(target=run)
    worker.start()
    found = []
    for _ in range(200):
        # The client's handshake may be listed first: wait for the aggregate itself.
        listed = admin.command("currentOp", appName="slowpoke")["inprog"]
        found = [op for op in listed if op.get("command", {}).get("aggregate") == "big"]
        if found:
            break
        import time
        time.sleep(0.02)
    assert found, "the running aggregate was not listed"
    op = found[0]
    assert op["op"] == "command" and op["ns"] == f"{db.name}.big" and op["command"]["aggregate"] == "big"
    assert op["active"] and op["client"] and op["microsecs_running"] >= 0
    # The same through the stage, filtered by the rest of the pipeline.
    staged = list(admin.aggregate([{"$currentOp": {"allUsers": True}}, {"$match": {"appName": "slowpoke"}}]))
    assert [o["opid"] for o in staged] == [op["opid"]]
    assert admin.command("killOp", op=op["opid"])["ok"] == 1
    worker.join(timeout=30)
    assert outcome["result"] == 11601, outcome
    assert admin.command("currentOp", appName="slowpoke")["inprog"] == []
    # maxTimeMS dates the same handle.
    with pytest.raises(OperationFailure) as error:
        list(db.big.aggregate(slow_lookup(db.big), maxTimeMS=50))
    assert error.value.code == 50
    with pytest.raises(OperationFailure) as error:
        db.command("currentOp")
    assert error.value.code == 13


def test_profiler_levels_slowms_and_filter(db):
    assert db.command("profile", -1) == {"was": 0, "slowms": 100, "sampleRate": 1.0, "ok": 1.0}
    db.command("profile", 2)
    db.people.insert_many([{"_id": i, "age": i} for i in range(5)])
    db.people.create_index("age")
    assert len(list(db.people.find({"age": {"$gte": 3}}))) == 2
    db.people.update_many({"age": {"$lt": 2}}, {"$set": {"young": True}})
    db.command("profile", 0)
    entries = list(db.system.profile.find({}, sort=[("$natural", 1)]))
    ops = [entry["op"] for entry in entries]
    assert "insert" in ops and "query" in ops and "update" in ops, ops
    query = next(entry for entry in entries if entry["op"] == "query")
    assert query["ns"] == f"{db.name}.people" and query["nreturned"] == 2
    assert query["keysExamined"] == 2 and query["docsExamined"] == 2
    assert query["planSummary"] == "IXSCAN { age: 1 }"
    assert query["command"]["filter"] == {"age": {"$gte": 3}} and query["millis"] >= 0
    update = next(entry for entry in entries if entry["op"] == "update")
    assert update["nMatched"] == 2 and update["nModified"] == 2
    assert db.system.profile.options()["capped"]
    # Level 0 writes nothing more; level 1 with a filter keeps only what it matches.
    count = db.system.profile.count_documents({})
    db.people.find_one()
    assert db.system.profile.count_documents({}) == count
    db.command("profile", 1, filter={"op": "insert"})
    db.people.insert_one({"_id": 99})
    db.people.find_one({"_id": 99})
    status = db.command("profile", 0)
    assert status["was"] == 1 and status["filter"] == {"op": "insert"}
    recent = list(db.system.profile.find({}, sort=[("$natural", -1)]).limit(2))
    assert recent[0]["op"] == "insert" and recent[0]["ninserted"] == 1
    with pytest.raises(OperationFailure) as error:
        db.command("profile", 5)
    assert error.value.code == 2


def test_index_stats_count_the_plans_that_used_each_index(db):
    db.things.insert_many([{"_id": i, "a": i % 3, "b": i} for i in range(30)])
    db.things.create_index("a")
    db.things.create_index("b")
    for value in range(3):
        list(db.things.find({"a": value}))
    db.things.find_one({"_id": 4})
    db.things.count_documents({"$or": [{"a": 1}, {"b": 7}]})
    stats = {s["name"]: s for s in db.things.aggregate([{"$indexStats": {}}])}
    assert set(stats) == {"_id_", "a_1", "b_1"}
    assert stats["a_1"]["accesses"]["ops"] == 4 and stats["b_1"]["accesses"]["ops"] == 1
    assert stats["_id_"]["accesses"]["ops"] == 1 and stats["a_1"]["key"] == {"a": 1}
    assert stats["a_1"]["spec"]["name"] == "a_1" and stats["a_1"]["host"]
    assert isinstance(stats["a_1"]["accesses"]["since"], datetime.datetime)
    unused = list(db.things.aggregate([{"$indexStats": {}}, {"$match": {"accesses.ops": 0}}]))
    assert unused == []


def test_exhaust_cursors_stream_every_batch(db):
    from pymongo import CursorType

    db.stream.insert_many([{"_id": i} for i in range(250)])
    found = list(db.stream.find(cursor_type=CursorType.EXHAUST, batch_size=7))
    assert [d["_id"] for d in found] == list(range(250))
    # The connection is usable afterwards (the stream ended where the cursor did).
    assert db.stream.count_documents({}) == 250


def test_documents_at_the_16_mib_limit_in_full_batches(db):
    import bson

    def at_limit(i):
        document = {"_id": i, "p": ""}
        document["p"] = "x" * (16 * 1024 * 1024 - len(bson.encode(document)))
        return document

    documents = [at_limit(i) for i in range(3)]
    assert all(len(bson.encode(d)) == 16 * 1024 * 1024 for d in documents)
    assert len(db.huge.insert_many(documents).inserted_ids) == 3
    assert [len(bson.encode(d)) for d in db.huge.find()] == [16 * 1024 * 1024] * 3
    with pytest.raises(OperationFailure) as error:
        db.huge.insert_one({"_id": 9, "p": "x" * (16 * 1024 * 1024)})
    assert error.value.code == 10334
    db.huge.drop()


def test_text_indexes_search_stem_score_and_negate(db):
    from pymongo import TEXT

    articles = db.articles
    articles.insert_many([
        {"_id": 1, "title": "Coffee shops", "body": "The best coffee in town, roasted daily"},
        {"_id": 2, "title": "Tea", "body": "Green tea and black tea; no coffee here"},
        {"_id": 3, "title": "Bakeries", "body": "Bread and pastries, with a cup of coffee"},
        {"_id": 4, "title": "Cafés", "body": "Les cafés de Paris", "language": "french"},
        {"_id": 5, "title": "Running", "body": "Runners run; the runner ran"},
    ])
    name = articles.create_index([("title", TEXT), ("body", TEXT)], weights={"title": 10})
    assert name == "title_text_body_text"
    spec = articles.index_information()[name]
    assert spec["key"] == [("_fts", "text"), ("_ftsx", 1)] and spec["weights"] == {"body": 1, "title": 10}
    assert spec["default_language"] == "english" and spec["textIndexVersion"] == 3

    def ids(search, **options):
        return sorted(d["_id"] for d in articles.find({"$text": {"$search": search, **options}}))

    assert ids("coffee") == [1, 2, 3]
    assert ids("COFFEE -tea") == [1, 3]
    assert ids("running") == [5]  # stemmed: runners, run
    assert ids('"best coffee"') == [1]
    assert ids("coffee -\"black tea\"") == [1, 3]
    assert ids("the") == []  # a stop word only
    assert ids("cafe", **{"$language": "french"}) == [4]  # diacritics folded
    # Scores: the title weighs 10, so the coffee shop ranks first.
    ranked = list(articles.find({"$text": {"$search": "coffee"}}, {"score": {"$meta": "textScore"}, "title": 1})
                  .sort([("score", {"$meta": "textScore"})]))
    assert ranked[0]["_id"] == 1 and ranked[0]["score"] > ranked[1]["score"] > 0
    assert set(ranked[0]) == {"_id", "title", "score"}
    # The score in an aggregation: $meta in expressions and sorts, never in the output unasked.
    pipeline = [{"$match": {"$text": {"$search": "coffee"}}}, {"$sort": {"s": {"$meta": "textScore"}}},
                {"$addFields": {"s": {"$meta": "textScore"}}}, {"$project": {"title": 1, "s": 1}}]
    staged = list(articles.aggregate(pipeline))
    assert [d["_id"] for d in staged] == [d["_id"] for d in ranked] and staged[0]["s"] == ranked[0]["score"]
    # The score is metadata: it survives an inclusion $project, as in MongoDB.
    after_project = [{"$match": {"$text": {"$search": "coffee"}}}, {"$project": {"title": 1}},
                     {"$sort": {"s": {"$meta": "textScore"}}}, {"$addFields": {"s": {"$meta": "textScore"}}}]
    projected = list(articles.aggregate(after_project))
    assert [(d["_id"], d["s"]) for d in projected] == [(d["_id"], d["s"]) for d in staged]
    assert set(projected[0]) == {"_id", "title", "s"}
    plain = list(articles.aggregate([{"$match": {"$text": {"$search": "coffee"}}}]))
    assert all(set(d) <= {"_id", "title", "body", "language"} for d in plain)
    # explain shows MongoDB's text plan, with the run's counts.
    explained = articles.find({"$text": {"$search": "coffee -tea"}}, {"score": {"$meta": "textScore"}}).explain()
    winning = explained["queryPlanner"]["winningPlan"]
    assert winning["stage"] == "TEXT_MATCH" and winning["indexName"] == name
    assert winning["parsedTextQuery"]["terms"] == ["coffe"] and winning["parsedTextQuery"]["negatedTerms"] == ["tea"]
    assert winning["inputStage"]["stage"] == "FETCH" and winning["inputStage"]["inputStage"]["stage"] == "TEXT_OR"
    stats = explained["executionStats"]
    assert (stats["nReturned"], stats["totalDocsExamined"]) == (2, 3) and stats["totalKeysExamined"] >= 3
    # With the rest of the filter, count and writes.
    assert articles.count_documents({"$text": {"$search": "coffee"}, "_id": {"$gt": 1}}) == 2
    articles.update_many({"$text": {"$search": "bread"}}, {"$set": {"bakery": True}})
    assert articles.find_one({"bakery": True})["_id"] == 3
    articles.insert_one({"_id": 6, "title": "More coffee", "body": ""})
    assert ids("coffee") == [1, 2, 3, 6]
    assert db.command("validate", "articles")["valid"]
    # MongoDB's errors.
    with pytest.raises(OperationFailure) as error:
        list(db.nothing_indexed.find({"$text": {"$search": "x"}}))
    assert error.value.code == 27
    db.nothing_indexed.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as error:
        list(db.nothing_indexed.find({"$text": {"$search": "x"}}))
    assert error.value.code == 27
    with pytest.raises(OperationFailure) as error:
        articles.create_index([("summary", TEXT)])
    assert error.value.code == 85
    with pytest.raises(OperationFailure) as error:
        articles.insert_one({"title": "x", "language": "klingon"})
    assert error.value.code == 17262


def test_compound_text_indexes(db):
    from pymongo import TEXT

    db.items.insert_many([
        {"_id": 1, "shop": "a", "title": "red running shoes", "price": 50},
        {"_id": 2, "shop": "a", "title": "blue shoes", "price": 30},
        {"_id": 3, "shop": "b", "title": "red shoes for running", "price": 70},
        {"_id": 4, "shop": "b", "title": "a red hat", "price": 20},
    ])
    name = db.items.create_index([("shop", 1), ("title", TEXT), ("price", -1)])
    assert name == "shop_1_title_text_price_-1"
    info = db.items.index_information()[name]
    assert info["key"] == [("shop", 1), ("_fts", "text"), ("_ftsx", 1), ("price", -1)]
    found = db.items.find({"shop": "b", "$text": {"$search": "red"}}, {"score": {"$meta": "textScore"}})
    assert sorted(d["_id"] for d in found) == [3, 4]
    assert [d["_id"] for d in db.items.find({"shop": {"$eq": "a"}, "$text": {"$search": "running"}})] == [1]
    with pytest.raises(OperationFailure) as error:
        list(db.items.find({"$text": {"$search": "red"}}))
    assert error.value.code == 2
    assert "equality predicates" in str(error.value)
    plan = db.items.find({"shop": "a", "$text": {"$search": "red"}}).explain()["queryPlanner"]["winningPlan"]
    assert plan["indexPrefix"] == {"shop": "a"}
    # A non-text field of a compound text index holds one value: an array is refused.
    with pytest.raises(WriteError) as error:
        db.items.insert_one({"_id": 5, "shop": ["a", "b"], "title": "shoes"})
    assert error.value.code == 16675
    assert db.command("validate", "items")["valid"]


def test_text_search_case_and_diacritic_sensitive(db):
    from pymongo import TEXT

    notes = db.notes
    notes.insert_many([{"_id": 1, "t": "Résumé writing tips"}, {"_id": 2, "t": "resume the game"},
                       {"_id": 3, "t": "RESUME in capitals"}])
    notes.create_index([("t", TEXT)])

    def ids(search, **options):
        return sorted(d["_id"] for d in notes.find({"$text": {"$search": search, **options}}))

    assert ids("resume") == [1, 2, 3]  # the index folds case and diacritics
    assert ids("resume", **{"$caseSensitive": True}) == [2]
    assert ids("RESUME", **{"$caseSensitive": True}) == [3]
    assert ids("Résumé", **{"$diacriticSensitive": True}) == [1]
    assert ids("resume", **{"$diacriticSensitive": True}) == [2, 3]
    assert ids("Resume", **{"$caseSensitive": True, "$diacriticSensitive": True}) == []
    assert ids("Résumé", **{"$caseSensitive": True, "$diacriticSensitive": True}) == [1]
    # Negations and phrases compare as the query asks too.
    assert ids("resume -RESUME", **{"$caseSensitive": True}) == [2]
    assert ids("resume -RESUME") == []
    assert ids('"RESUME in"', **{"$caseSensitive": True}) == [3]
    assert ids('"Resume in"', **{"$caseSensitive": True}) == []
    assert ids('"resume in"') == [3]
    # Sensitive queries still find their candidates through the index.
    explained = notes.find({"$text": {"$search": "RESUME", "$caseSensitive": True}}).explain()
    assert explained["queryPlanner"]["winningPlan"]["stage"] == "TEXT_MATCH"
    assert explained["executionStats"]["totalDocsExamined"] == 3
    with pytest.raises(OperationFailure):
        list(notes.find({"$text": {"$search": "x", "$caseSensitive": "yes"}}))


def test_geospatial_queries_and_indexes(db):
    from pymongo import GEO2D, GEOSPHERE

    places = db.places
    places.insert_many([
        {"_id": "louvre", "loc": {"type": "Point", "coordinates": [2.3376, 48.8606]}},
        {"_id": "eiffel", "loc": {"type": "Point", "coordinates": [2.2945, 48.8584]}},
        {"_id": "versailles", "loc": {"type": "Point", "coordinates": [2.1204, 48.8049]}},
        {"_id": "london", "loc": [-0.1276, 51.5072]},
        {"_id": "seine", "loc": {"type": "LineString", "coordinates": [[2.25, 48.84], [2.40, 48.86]]}},
        {"_id": "nowhere"},
    ])
    paris = {"type": "Polygon", "coordinates": [[[2.2, 48.8], [2.5, 48.8], [2.5, 48.9], [2.2, 48.9], [2.2, 48.8]]]}

    def ids(query, **options):
        return sorted(d["_id"] for d in places.find(query, **options))

    # $geoWithin and $geoIntersects need no index.
    assert ids({"loc": {"$geoWithin": {"$geometry": paris}}}) == ["eiffel", "louvre", "seine"]
    assert ids({"loc": {"$geoWithin": {"$centerSphere": [[2.3376, 48.8606], 10 / 6378.1]}}}) == ["eiffel", "louvre", "seine"]
    assert ids({"loc": {"$geoWithin": {"$box": [[-1, 51], [0, 52]]}}}) == ["london"]
    # Edges are great-circle arcs: a band's northern edge bows north to 40.44° at -90.
    band = {"type": "Polygon", "coordinates": [[[-100, 30], [-80, 30], [-80, 40], [-100, 40], [-100, 30]]]}
    db.arcs.insert_many([{"_id": lat, "loc": {"type": "Point", "coordinates": [-90, lat]}} for lat in (30.2, 35, 40.3, 40.6)])
    assert sorted(d["_id"] for d in db.arcs.find({"loc": {"$geoWithin": {"$geometry": band}}})) == [35, 40.3]
    crossing = {"type": "LineString", "coordinates": [[2.3, 48.8], [2.3, 48.9]]}
    assert ids({"loc": {"$geoIntersects": {"$geometry": crossing}}}) == ["seine"]
    # $near needs a geospatial index.
    point = {"type": "Point", "coordinates": [2.3376, 48.8606]}
    with pytest.raises(OperationFailure) as error:
        list(places.find({"loc": {"$near": {"$geometry": point}}}))
    assert error.value.code == 291
    places.create_index([("loc", GEOSPHERE)])
    assert places.index_information()["loc_2dsphere"]["2dsphereIndexVersion"] == 3
    nearest = [d["_id"] for d in places.find({"loc": {"$near": {"$geometry": point, "$maxDistance": 20000}}})]
    assert nearest == ["louvre", "seine", "eiffel", "versailles"]
    assert [d["_id"] for d in places.find({"loc": {"$nearSphere": {"$geometry": point}}}).limit(1)] == ["louvre"]
    far = places.find({"loc": {"$near": {"$geometry": point, "$minDistance": 100000}}})
    assert [d["_id"] for d in far] == ["london"]
    # $geoNear: distances in meters, the rest of the pipeline after it.
    staged = list(places.aggregate([
        {"$geoNear": {"near": point, "distanceField": "dist.m", "maxDistance": 20000, "query": {"_id": {"$ne": "seine"}}}},
        {"$project": {"dist": 1}},
    ]))
    assert [d["_id"] for d in staged] == ["louvre", "eiffel", "versailles"]
    assert staged[0]["dist"]["m"] == 0 and 3000 < staged[1]["dist"]["m"] < 3500
    # A bad location is refused by the index, and nothing is written.
    with pytest.raises(WriteError) as error:
        places.insert_one({"_id": "bad", "loc": {"type": "Point", "coordinates": [200, 0]}})
    assert error.value.code == 16755
    assert places.count_documents({"_id": "bad"}) == 0
    # With a $maxDistance only the cells around the circle are read: the profiler shows it.
    places.insert_many([{"loc": [-100 + i * 0.01, -40 + i * 0.01]} for i in range(2000)])
    db.command("profile", 2)
    near_paris = list(places.find({"loc": {"$near": {"$geometry": point, "$maxDistance": 5000}}}))
    db.command("profile", 0)
    assert [d["_id"] for d in near_paris] == ["louvre", "seine", "eiffel"]
    entry = db.system.profile.find_one({"op": "query", "command.filter.loc": {"$exists": True}})
    assert entry["keysExamined"] < 50, entry
    # 2d: legacy pairs on a flat square, distances in its units.
    grid = db.grid
    grid.insert_many([{"_id": i, "xy": [i, i]} for i in range(5)])
    grid.create_index([("xy", GEO2D)])
    assert [d["_id"] for d in grid.find({"xy": {"$near": [3.2, 3.2], "$maxDistance": 1.8}})] == [3, 4, 2]
    assert db.command("validate", "places")["valid"] and db.command("validate", "grid")["valid"]


def test_compound_geospatial_indexes(db):
    from pymongo import GEO2D, GEOSPHERE

    point = {"type": "Point", "coordinates": [2.3376, 48.8606]}
    shops = [{"_id": i, "kind": ["cafe", "bakery"][i % 2], "tags": ["a", "b"],
              "loc": {"type": "Point", "coordinates": [2.3376 + i * 0.001, 48.8606]}} for i in range(20)]
    shops.append({"_id": 99, "kind": "cafe"})
    for name, keys in [("first", [("loc", GEOSPHERE), ("kind", 1), ("tags", 1)]),
                       ("after", [("kind", 1), ("loc", GEOSPHERE)])]:
        coll = db[name]
        coll.insert_many(shops)
        coll.create_index(keys)
        cafes = [d["_id"] for d in coll.find(
            {"kind": "cafe", "loc": {"$near": {"$geometry": point, "$maxDistance": 500}}})]
        assert cafes == [0, 2, 4, 6], name
        staged = list(coll.aggregate([{"$geoNear": {
            "near": point, "distanceField": "d", "query": {"kind": "bakery"}}}, {"$limit": 2}]))
        assert [d["_id"] for d in staged] == [1, 3], name
        assert db.command("validate", name)["valid"]
    # Location first: only the cells around the circle are read.
    db.command("profile", 2)
    list(db.first.find({"loc": {"$near": {"$geometry": point, "$maxDistance": 100}}}))
    db.command("profile", 0)
    entry = db.system.profile.find_one({"op": "query", "ns": db.first.full_name})
    assert entry["keysExamined"] < 40, entry
    with pytest.raises(WriteError) as error:
        db.first.insert_one({"kind": ["x", "y"], "tags": ["a", "b"], "loc": point})
    assert error.value.code == 171
    with pytest.raises(OperationFailure) as error:
        db.flat.create_index([("kind", 1), ("xy", GEO2D)])
    assert error.value.code == 67
    with pytest.raises(OperationFailure):
        db.flat.create_index([("xy", GEO2D), ("loc", GEOSPHERE)])


def test_near_with_a_limit_reads_growing_rings_not_the_whole_index(db):
    import math
    import random

    from pymongo import GEO2D, GEOSPHERE

    rng = random.Random(7)
    spots = [{"_id": i, "loc": [rng.uniform(-30, 30), rng.uniform(-30, 30)]} for i in range(5000)]
    db.spots.insert_many(spots)
    db.spots.create_index([("loc", GEOSPHERE)])
    here = [1.5, 2.5]

    def meters(loc):
        (x1, y1), (x2, y2) = [(math.radians(a), math.radians(b)) for a, b in (here, loc)]
        h = math.sin((y2 - y1) / 2) ** 2 + math.cos(y1) * math.cos(y2) * math.sin((x2 - x1) / 2) ** 2
        return 2 * 6378100 * math.asin(math.sqrt(h))

    expected = [s["_id"] for s in sorted(spots, key=lambda s: meters(s["loc"]))[:7]]
    point = {"type": "Point", "coordinates": here}
    db.command("profile", 2)
    got = [d["_id"] for d in db.spots.find({"loc": {"$near": {"$geometry": point}}}).skip(2).limit(5)]
    db.command("profile", 0)
    assert got == expected[2:7]
    entry = db.system.profile.find_one({"op": "query", "ns": db.spots.full_name})
    assert entry["keysExamined"] < 500, entry
    # Logged as slow, its plan is explained for the log without running it again.
    db.system.profile.drop()
    db.command("profile", 2, slowms=0)
    list(db.spots.find({"loc": {"$near": {"$geometry": point}}}).skip(2).limit(5))
    db.command("profile", 0, slowms=100)
    slow = db.system.profile.find_one({"op": "query", "ns": db.spots.full_name})
    assert slow["keysExamined"] == entry["keysExamined"] and slow["planSummary"] == "GEO_NEAR_2DSPHERE", slow
    plan = db.spots.find({"loc": {"$near": {"$geometry": point}}}).limit(5).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "GEO_NEAR_2DSPHERE"
    staged = db.spots.aggregate([{"$geoNear": {"near": point, "distanceField": "d"}}, {"$skip": 1}, {"$limit": 3}])
    assert [d["_id"] for d in staged] == expected[1:4]
    # Without a limit every document is returned, nearest first; so with a sort on another field.
    assert len(list(db.spots.find({"loc": {"$near": {"$geometry": point}}}))) == 5000
    by_id = list(db.spots.find({"loc": {"$near": {"$geometry": point}}}).sort("_id", 1).limit(3))
    assert [d["_id"] for d in by_id] == [0, 1, 2]
    # A flat 2d index, and a limit larger than the collection.
    db.flatspots.insert_many([{"_id": i, "xy": [i % 10, i // 10]} for i in range(100)])
    db.flatspots.create_index([("xy", GEO2D)])
    assert [d["_id"] for d in db.flatspots.find({"xy": {"$near": [0, 0]}}).limit(3)] == [0, 1, 10]
    assert len(list(db.flatspots.find({"xy": {"$near": [0, 0]}}).limit(500))) == 100


def test_wildcard_indexes_serve_any_field(db):
    things = db.things
    things.insert_many([
        {"_id": 1, "attrs": {"color": "red", "size": 3}},
        {"_id": 2, "attrs": {"color": "blue", "tags": ["x", "y"]}},
        {"_id": 3, "attrs": {"weight": 10, "parts": [{"size": 3}, {"size": 4}]}},
        {"_id": 4, "other": {"color": "red"}},
    ])
    things.create_index([("attrs.$**", 1)])
    assert things.index_information()["attrs.$**_1"]["key"] == [("attrs.$**", 1)]

    def plan(query):
        return str(things.find(query).explain()["queryPlanner"]["winningPlan"])

    assert sorted(d["_id"] for d in things.find({"attrs.color": "red"})) == [1]
    assert "attrs.$**_1" in plan({"attrs.color": "red"})
    assert sorted(d["_id"] for d in things.find({"attrs.tags": "y"})) == [2]
    assert sorted(d["_id"] for d in things.find({"attrs.parts.size": {"$gte": 4}})) == [3]
    assert sorted(d["_id"] for d in things.find({"attrs.size": {"$in": [3, 5]}})) == [1]
    # Outside its scope, a null, or a whole document: not from the index (and still right).
    assert "attrs.$**_1" not in plan({"other.color": "red"})
    assert sorted(d["_id"] for d in things.find({"attrs.color": None})) == [3, 4]
    assert "attrs.$**_1" not in plan({"attrs.color": None})
    assert sorted(d["_id"] for d in things.find({"attrs": {"color": "blue", "tags": ["x", "y"]}})) == [2]
    everything = db.everything
    everything.insert_many([{"_id": 1, "a": 1, "b": {"c": 2}}, {"_id": 2, "a": 2, "secret": 1}])
    everything.create_index([("$**", 1)], wildcardProjection={"secret": 0})
    assert [d["_id"] for d in everything.find({"b.c": 2})] == [1]
    assert "$**_1" in str(everything.find({"a": 2}).explain()["queryPlanner"]["winningPlan"])
    assert "$**_1" not in str(everything.find({"secret": 1}).explain()["queryPlanner"]["winningPlan"])
    assert db.command("validate", "things")["valid"] and db.command("validate", "everything")["valid"]
    with pytest.raises(OperationFailure) as error:
        db.other.create_index([("$**", 1)], unique=True)
    assert error.value.code == 67


def test_server_side_javascript_is_refused_with_its_reason(db):
    db.js.insert_one({"a": 1})
    attempts = [
        lambda: list(db.js.find({"$where": "this.a == 1"})),
        lambda: list(db.js.aggregate([{"$project": {"x": {"$function": {"body": "1", "args": [], "lang": "js"}}}}])),
        lambda: list(db.js.aggregate([{"$group": {"_id": None, "x": {"$accumulator": {}}}}])),
        lambda: db.command("mapReduce", "js", map="function(){}", reduce="function(){}", out={"inline": 1}),
    ]
    for attempt in attempts:
        with pytest.raises(OperationFailure) as error:
            attempt()
        assert "no server-side JavaScript" in str(error.value), error.value
