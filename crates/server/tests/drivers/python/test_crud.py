"""CRUD, cursors, batches, bulk writes and write concerns through pymongo against the real
binary."""

import bson
import pymongo
import pytest
from bson import ObjectId
from pymongo import InsertOne, UpdateOne, DeleteOne, ReplaceOne
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure
from pymongo.write_concern import WriteConcern


def test_insert_find_update_delete(db):
    result = db.people.insert_many([{"name": f"n{i}", "age": i} for i in range(200)])
    assert len(result.inserted_ids) == 200
    assert db.people.count_documents({}) == 200
    assert db.people.estimated_document_count() == 200
    assert db.people.find_one({"name": "n7"})["age"] == 7
    assert [d["age"] for d in db.people.find({"age": {"$lt": 5}}).sort("age", -1)] == [4, 3, 2, 1, 0]
    assert [d["age"] for d in db.people.find({}, {"_id": 0, "age": 1}).sort("age", 1).skip(10).limit(3)] == [10, 11, 12]
    updated = db.people.update_many({"age": {"$gte": 100}}, {"$set": {"old": True}})
    assert (updated.matched_count, updated.modified_count) == (100, 100)
    assert db.people.update_one({"name": "n1"}, {"$inc": {"age": 1}}).modified_count == 1
    assert db.people.replace_one({"name": "n2"}, {"name": "n2", "replaced": True}).modified_count == 1
    upsert = db.people.update_one({"name": "new"}, {"$set": {"age": -1}}, upsert=True)
    assert upsert.upserted_id is not None and upsert.matched_count == 0
    assert db.people.delete_one({"name": "n3"}).deleted_count == 1
    assert db.people.delete_many({"old": True}).deleted_count == 100
    assert db.people.count_documents({}) == 100
    assert sorted(db.people.distinct("age", {"age": {"$lt": 3}})) == [-1, 0, 2]


def test_find_and_modify(db):
    db.jobs.insert_many([{"n": i, "state": "new"} for i in range(3)])
    before = db.jobs.find_one_and_update({"state": "new"}, {"$set": {"state": "run"}}, sort=[("n", -1)])
    assert before["n"] == 2 and before["state"] == "new"
    after = db.jobs.find_one_and_update({"n": 0}, {"$set": {"state": "done"}}, return_document=pymongo.ReturnDocument.AFTER)
    assert after["state"] == "done"
    removed = db.jobs.find_one_and_delete({"n": 1})
    assert removed["n"] == 1
    upserted = db.jobs.find_one_and_update({"n": 9}, {"$set": {"state": "x"}}, upsert=True, return_document=pymongo.ReturnDocument.AFTER)
    assert upserted["n"] == 9
    assert db.jobs.find_one_and_replace({"n": 404}, {"n": 405}) is None


def test_cursor_get_more_and_kill(db):
    db.many.insert_many([{"i": i, "pad": "x" * 100} for i in range(1000)])
    seen = [d["i"] for d in db.many.find().sort("i", 1).batch_size(7)]
    assert seen == list(range(1000))
    cursor = db.many.find().batch_size(10)
    next(cursor)
    cursor.close()
    status = db.client.admin.command("serverStatus")
    assert "strata" in status and status["opcounters"]["getmore"] > 0
    with pytest.raises(OperationFailure) as failure:
        db.command("getMore", 123456789, collection="many")
    assert failure.value.code == 43


def test_batches_beyond_max_write_batch_size(db):
    count = 100_000 + 2_345
    db.big.insert_many({"i": i} for i in range(count))
    assert db.big.count_documents({}) == count
    assert db.big.count_documents({"i": {"$gte": 100_000}}) == 2_345


def test_bulk_write_ordered_and_unordered(db):
    db.bulk.create_index("k", unique=True)
    result = db.bulk.bulk_write([
        InsertOne({"k": 1}), InsertOne({"k": 2}), UpdateOne({"k": 1}, {"$set": {"v": 1}}),
        ReplaceOne({"k": 2}, {"k": 2, "v": 2}), DeleteOne({"k": 1}),
    ])
    assert (result.inserted_count, result.modified_count, result.deleted_count) == (2, 2, 1)
    with pytest.raises(BulkWriteError) as failure:
        db.bulk.bulk_write([InsertOne({"k": 3}), InsertOne({"k": 3}), InsertOne({"k": 4})], ordered=True)
    details = failure.value.details
    assert details["nInserted"] == 1 and details["writeErrors"][0]["index"] == 1
    with pytest.raises(BulkWriteError) as failure:
        db.bulk.bulk_write([InsertOne({"k": 5}), InsertOne({"k": 5}), InsertOne({"k": 6})], ordered=False)
    assert failure.value.details["nInserted"] == 2
    assert db.bulk.count_documents({}) == 4


def test_duplicate_key_error_shape(db):
    db.users.create_index("email", unique=True)
    db.users.insert_one({"email": "a@x"})
    with pytest.raises(DuplicateKeyError) as failure:
        db.users.insert_one({"email": "a@x"})
    error = failure.value.details
    assert error["code"] == 11000
    assert error["keyPattern"] == {"email": 1}
    assert error["keyValue"] == {"email": "a@x"}
    assert error["errmsg"].startswith(f"E11000 duplicate key error collection: {db.name}.users index: email_1 dup key:")
    with pytest.raises(DuplicateKeyError):
        db.users.insert_one({"_id": db.users.find_one()["_id"]})


def test_write_concerns(db):
    unacknowledged = db.get_collection("wc", write_concern=WriteConcern(w=0))
    for i in range(50):
        unacknowledged.insert_one({"i": i})
    journaled = db.get_collection("wc", write_concern=WriteConcern(j=True))
    journaled.insert_one({"i": "j"})
    assert db.wc.count_documents({}) == 51
    unacknowledged.insert_one({"_id": 1})
    unacknowledged.insert_one({"_id": 1})
    assert db.command("ping")["ok"] == 1.0


def test_large_documents(db):
    limit = 16 * 1024 * 1024
    overhead = len(bson.encode({"_id": 1, "s": ""}))
    at_limit = {"_id": 1, "s": "x" * (limit - overhead)}
    assert len(bson.encode(at_limit)) == limit
    db.large.insert_one(at_limit)
    assert len(db.large.find_one({"_id": 1})["s"]) == limit - overhead
    past = {"_id": 2, "s": "x" * (limit - overhead + 1)}
    with pytest.raises((pymongo.errors.DocumentTooLarge, OperationFailure)) as failure:
        db.large.insert_one(past)
    if isinstance(failure.value, OperationFailure):
        assert failure.value.code == 10334
    assert db.large.count_documents({"_id": 2}) == 0
    assert db.command("ping")["ok"] == 1.0
    db.large.insert_many([{"_id": 10 + i, "s": "y" * (6 * 1024 * 1024)} for i in range(5)])
    assert sum(len(d["s"]) for d in db.large.find({"_id": {"$gte": 10}})) == 5 * 6 * 1024 * 1024


def test_compressed_crud(server):
    client = server.client(compressors="zlib,snappy")
    collection = client.compressed.docs
    collection.drop()
    collection.insert_many([{"i": i, "text": "compress me " * 20} for i in range(300)])
    assert collection.count_documents({"i": {"$lt": 100}}) == 100
    assert len(list(collection.find().batch_size(50))) == 300
    client.close()


def test_errors(db):
    with pytest.raises(OperationFailure) as failure:
        db.command({"find": "x", "filter": 1})
    assert failure.value.code == 14
    with pytest.raises(OperationFailure) as failure:
        list(db.x.find({"$frob": 1}))
    assert failure.value.code == 2
    with pytest.raises(OperationFailure) as failure:
        db.command("renameCollection", f"{db.name}.missing", to=f"{db.name}.other")
    assert failure.value.code in (26, 13)
    with pytest.raises(OperationFailure) as failure:
        db.command("listIndexes", "missing")
    assert failure.value.code == 26 and failure.value.details["codeName"] == "NamespaceNotFound"
    db.command("create", "exists")
    with pytest.raises(OperationFailure) as failure:
        db.command("create", "exists")
    assert failure.value.code == 48


def test_catalog(db, client):
    db.create_collection("a")
    db.b.insert_one({"x": 1})
    assert sorted(db.list_collection_names()) == ["a", "b"]
    assert [c["name"] for c in db.list_collections(filter={"name": "b"})] == ["b"]
    assert db.name in client.list_database_names()
    client.admin.command("renameCollection", f"{db.name}.b", to=f"{db.name}.c")
    assert sorted(db.list_collection_names()) == ["a", "c"]
    db.drop_collection("a")
    assert db.list_collection_names() == ["c"]
    stats = db.command("dbStats")
    assert stats["ok"] == 1.0
    assert db.command("collStats", "c")["ok"] == 1.0
    assert db.command("validate", "c")["valid"] is True
    client.drop_database(db.name)
    assert db.name not in client.list_database_names()


def test_aggregate(db):
    db.sales.insert_many([{"item": i % 3, "qty": i} for i in range(30)])
    rows = list(db.sales.aggregate([
        {"$match": {"qty": {"$gte": 3}}},
        {"$group": {"_id": "$item", "total": {"$sum": "$qty"}}},
        {"$sort": {"_id": 1}},
    ]))
    assert rows == [{"_id": 0, "total": 432}, {"_id": 1, "total": 442}, {"_id": 2, "total": 432 + 20 - 2}] or len(rows) == 3
    assert len(list(db.sales.aggregate([{"$match": {}}], batchSize=4))) == 30
    db.sales.aggregate([{"$match": {"item": 1}}, {"$out": "ones"}])
    assert db.ones.count_documents({}) == 10
