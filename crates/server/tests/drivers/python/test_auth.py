"""Access control through pymongo against a server started with --auth: the localhost
exception, SCRAM-SHA-1 and SCRAM-SHA-256, wrong passwords and unknown users, what each built-in
role may do (a table of commands x roles, every cell checked), user-defined roles, cursors
owned by their user, changes to users taking effect on open connections, and users surviving
kill -9."""

import os

import pymongo
import pytest
from bson import Binary
from pymongo.errors import OperationFailure

from conftest import StrataProcess

UNAUTHORIZED = 13
AUTHENTICATION_FAILED = 18


@pytest.fixture(scope="module")
def auth_server(workdir):
    process = StrataProcess(os.path.join(workdir, "auth"), extra_args=["--auth"])
    # The localhost exception: no user exists, so this connection may create the first one.
    first = process.client()
    first.admin.command("createUser", "root", pwd="rootpw", roles=["root"])
    first.close()
    yield process
    process.stop()


def login(server, user, password, source="admin", **options):
    return server.client(username=user, password=password, authSource=source, **options)


@pytest.fixture(scope="module")
def root(auth_server):
    client = login(auth_server, "root", "rootpw")
    yield client
    client.close()


def code_of(action):
    try:
        action()
    except OperationFailure as error:
        return error.code
    return None


def test_localhost_exception_ends_with_the_first_user(auth_server):
    stranger = auth_server.client()
    assert code_of(lambda: stranger.admin.command("createUser", "second", pwd="x", roles=[])) == UNAUTHORIZED
    assert code_of(lambda: stranger.test.c.find_one()) == UNAUTHORIZED
    assert code_of(lambda: stranger.list_database_names()) == UNAUTHORIZED
    # The handshake and a few harmless commands need no user.
    assert stranger.admin.command("ping")["ok"] == 1.0
    assert stranger.admin.command("hello")["isWritablePrimary"] is True
    status = stranger.admin.command("connectionStatus")["authInfo"]
    assert status["authenticatedUsers"] == []
    stranger.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-1", None])
def test_scram_mechanisms(auth_server, root, mechanism):
    root.test.command("createUser", "mech_user", pwd="pässwörd", roles=["readWrite"])
    try:
        options = {"authMechanism": mechanism} if mechanism else {}
        client = login(auth_server, "mech_user", "pässwörd", source="test", **options)
        client.test.mech.insert_one({"ok": 1})
        status = client.test.command("connectionStatus")["authInfo"]
        assert status["authenticatedUsers"] == [{"user": "mech_user", "db": "test"}]
        assert status["authenticatedUserRoles"] == [{"role": "readWrite", "db": "test"}]
        client.close()
    finally:
        root.test.command("dropUser", "mech_user")


def test_wrong_password_and_unknown_user_fail_alike(auth_server, root):
    root.test.command("createUser", "alice", pwd="right", roles=["read"])
    try:
        for user, password in [("alice", "wrong"), ("nobody", "whatever")]:
            for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-1"]:
                client = login(auth_server, user, password, source="test", authMechanism=mechanism)
                with pytest.raises(OperationFailure) as failure:
                    client.test.c.find_one()
                assert failure.value.code == AUTHENTICATION_FAILED
                assert failure.value.details["errmsg"] == "Authentication failed."
                client.close()
        counts = root.admin.command("serverStatus")["security"]["authentication"]
        assert counts["failed"] >= 4
        assert counts["mechanisms"]["SCRAM-SHA-256"]["authenticate"]["successful"] >= 1
    finally:
        root.test.command("dropUser", "alice")


def test_forged_sasl_messages(auth_server):
    raw = auth_server.client()
    forged = [
        {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": Binary(b"p=tls-unique,,n=root,r=abc")},
        {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": Binary(b"\xff\xfe\x00")},
        {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": Binary(b"n,,n=root,r=" + b"x" * 10000)},
    ]
    for command in forged:
        assert code_of(lambda: raw.admin.command(command)) == AUTHENTICATION_FAILED
    assert code_of(lambda: raw.admin.command("saslStart", 1, mechanism="PLAIN", payload=Binary(b""))) == 334
    assert code_of(lambda: raw.admin.command("saslContinue", 1, conversationId=1, payload=Binary(b""))) == 17
    started = raw.admin.command("saslStart", 1, mechanism="SCRAM-SHA-256", payload=Binary(b"n,,n=root,r=abcdef"))
    proof = b"c=biws,r=" + bytes(started["payload"]).split(b",")[0][2:] + b",p=" + b"A" * 44
    reply = lambda: raw.admin.command("saslContinue", 1, conversationId=started["conversationId"], payload=Binary(proof))
    assert code_of(reply) == AUTHENTICATION_FAILED
    # The failed conversation is gone: replaying its last message finds nothing.
    assert code_of(reply) == 17
    assert code_of(lambda: raw.test.c.find_one()) == UNAUTHORIZED
    raw.close()


# --- The role table -----------------------------------------------------------------------

def seed(root):
    root.test.c.delete_many({})
    root.test.c.insert_many([{"_id": i, "x": i} for i in range(5)])
    root.test.c.create_index("x")
    root.other.c.delete_many({})
    root.other.c.insert_one({"_id": 1})


def run_op(name, client, root):
    test, other = client.test, client.other
    if name == "find":
        test.c.find_one()
    elif name == "find_other_db":
        other.c.find_one()
    elif name == "insert":
        test.c.insert_one({"new": 1})
    elif name == "insert_other_db":
        other.c.insert_one({"new": 1})
    elif name == "update":
        test.c.update_one({"_id": 1}, {"$set": {"y": 1}})
    elif name == "delete":
        test.c.delete_one({"_id": 2})
    elif name == "create_index":
        test.c.create_index("y")
    elif name == "drop_index":
        test.c.drop_index("x_1")
    elif name == "list_collections":
        test.list_collection_names()
    elif name == "list_indexes":
        list(test.c.list_indexes())
    elif name == "coll_stats":
        test.command("collStats", "c")
    elif name == "db_stats":
        test.command("dbStats")
    elif name == "create_collection":
        test.create_collection("fresh")
    elif name == "drop_collection":
        if "doomed" not in root.test.list_collection_names():
            root.test.create_collection("doomed")
        test.command("drop", "doomed")
    elif name == "drop_database":
        test.command("dropDatabase")
    elif name == "validate":
        test.command("validate", "c")
    elif name == "create_user":
        test.command("createUser", "made_by_cell", pwd="x", roles=[])
    elif name == "users_info":
        test.command("usersInfo", "someone")
    elif name == "server_status":
        client.admin.command("serverStatus")
    elif name == "get_cmd_line_opts":
        client.admin.command("getCmdLineOpts")
    elif name == "list_databases":
        client.admin.command("listDatabases", authorizedDatabases=False)
    elif name == "find_users":
        client.admin["system.users"].find_one()
    else:
        raise AssertionError(name)


OPS = [
    "find", "find_other_db", "insert", "insert_other_db", "update", "delete", "create_index",
    "drop_index", "list_collections", "list_indexes", "coll_stats", "db_stats",
    "create_collection", "drop_collection", "drop_database", "validate", "create_user",
    "users_info", "server_status", "get_cmd_line_opts", "list_databases", "find_users",
]

READ = {"find", "list_collections", "list_indexes", "coll_stats", "db_stats"}
READ_WRITE = READ | {"insert", "update", "delete", "create_index", "drop_index", "create_collection", "drop_collection"}
DB_ADMIN = {"list_collections", "list_indexes", "coll_stats", "db_stats", "create_index", "drop_index",
            "create_collection", "drop_collection", "drop_database", "validate"}
USER_ADMIN = {"create_user", "users_info"}
MONITOR = {"server_status", "get_cmd_line_opts", "list_databases", "coll_stats", "db_stats"}
ANY_READ = READ | {"find_other_db", "list_databases"}

ALLOWED = {
    ("read", "test"): READ,
    ("readWrite", "test"): READ_WRITE,
    ("dbAdmin", "test"): DB_ADMIN,
    ("userAdmin", "test"): USER_ADMIN,
    ("dbOwner", "test"): READ_WRITE | DB_ADMIN | USER_ADMIN,
    ("clusterMonitor", "admin"): MONITOR,
    ("clusterAdmin", "admin"): MONITOR | {"drop_database"},
    ("backup", "admin"): READ | {"find_other_db", "server_status", "list_databases", "find_users"},
    ("restore", "admin"): {"insert", "insert_other_db", "create_collection", "drop_collection", "create_index",
                           "list_collections", "create_user", "users_info", "list_databases", "find_users"},
    ("readAnyDatabase", "admin"): ANY_READ,
    ("readWriteAnyDatabase", "admin"): ANY_READ | READ_WRITE | {"insert_other_db"},
    ("userAdminAnyDatabase", "admin"): USER_ADMIN | {"list_databases", "find_users"},
    ("dbAdminAnyDatabase", "admin"): DB_ADMIN | {"list_databases"},
    ("root", "admin"): set(OPS),
}


@pytest.mark.parametrize("role,db", sorted(ALLOWED), ids=lambda value: str(value))
def test_role_table(auth_server, root, role, db):
    user = f"has_{role}"
    root[db].command("createUser", user, pwd="pw", roles=[{"role": role, "db": db}])
    root.test.command("createUser", "someone", pwd="pw", roles=[])
    client = login(auth_server, user, "pw", source=db)
    try:
        wrong = []
        for op in OPS:
            seed(root)
            allowed = op in ALLOWED[(role, db)]
            code = code_of(lambda: run_op(op, client, root))
            if allowed and code is not None or not allowed and code != UNAUTHORIZED:
                wrong.append((op, "allowed" if allowed else "refused", code))
            for leftover in ["made_by_cell"]:
                if root.test.command("usersInfo", leftover)["users"]:
                    root.test.command("dropUser", leftover)
            root.test.drop_collection("fresh")
        assert wrong == [], f"{role}@{db}: cells that disagree (op, expected, error code): {wrong}"
    finally:
        client.close()
        root[db].command("dropUser", user)
        root.test.command("dropUser", "someone")


def test_refused_command_has_no_effect(auth_server, root):
    seed(root)
    root.test.command("createUser", "reader", pwd="pw", roles=["read"])
    reader = login(auth_server, "reader", "pw", source="test")
    assert code_of(lambda: reader.test.c.delete_many({})) == UNAUTHORIZED
    assert code_of(lambda: reader.test.c.insert_one({"_id": 99})) == UNAUTHORIZED
    assert root.test.c.count_documents({}) == 5
    reader.close()
    root.test.command("dropUser", "reader")


def test_user_defined_roles_and_inheritance(auth_server, root):
    seed(root)
    root.test.command("createRole", "cReader", privileges=[
        {"resource": {"db": "test", "collection": "c"}, "actions": ["find"]},
    ], roles=[])
    root.test.command("createRole", "cEditor", privileges=[
        {"resource": {"db": "test", "collection": "c"}, "actions": ["update"]},
    ], roles=["cReader"])
    root.test.command("createUser", "editor", pwd="pw", roles=["cEditor"])
    editor = login(auth_server, "editor", "pw", source="test")
    assert editor.test.c.find_one({"_id": 1}) is not None
    editor.test.c.update_one({"_id": 1}, {"$set": {"edited": True}})
    assert code_of(lambda: editor.test.c.insert_one({})) == UNAUTHORIZED
    assert code_of(lambda: editor.test.d.find_one()) == UNAUTHORIZED
    info = root.test.command("rolesInfo", "cEditor", showPrivileges=True)["roles"][0]
    assert info["inheritedRoles"] == [{"role": "cReader", "db": "test"}]
    # Revoking the inherited role takes effect on the open connection.
    root.test.command("revokeRolesFromRole", "cEditor", roles=["cReader"])
    assert code_of(lambda: editor.test.c.find_one()) == UNAUTHORIZED
    root.test.command("grantPrivilegesToRole", "cEditor", privileges=[
        {"resource": {"db": "test", "collection": ""}, "actions": ["find"]},
    ])
    assert editor.test.d.find_one() is None
    assert code_of(lambda: root.test.command("createRole", "x", privileges=[
        {"resource": {"db": "other", "collection": ""}, "actions": ["find"]}], roles=[])) == 2
    root.test.command("dropRole", "cEditor")
    assert code_of(lambda: editor.test.c.find_one()) == UNAUTHORIZED
    assert root.test.command("usersInfo", "editor")["users"][0]["roles"] == []
    editor.close()
    root.test.command("dropUser", "editor")
    root.test.command("dropRole", "cReader")


def test_cursor_belongs_to_its_user(auth_server, root):
    seed(root)
    root.test.command("createUser", "one", pwd="pw", roles=["read"])
    root.test.command("createUser", "two", pwd="pw", roles=["read"])
    one, two = login(auth_server, "one", "pw", source="test"), login(auth_server, "two", "pw", source="test")
    first = one.test.command("find", "c", batchSize=2)
    cursor_id = first["cursor"]["id"]
    assert cursor_id != 0
    assert code_of(lambda: two.test.command("getMore", cursor_id, collection="c")) == UNAUTHORIZED
    assert code_of(lambda: two.test.command("killCursors", "c", cursors=[cursor_id])) == UNAUTHORIZED
    assert len(one.test.command("getMore", cursor_id, collection="c")["cursor"]["nextBatch"]) == 3
    one.close()
    two.close()
    root.test.command("dropUser", "one")
    root.test.command("dropUser", "two")


def test_user_management(auth_server, root):
    root.test.command("createUser", "bob", pwd="old", roles=["read"], customData={"team": "a"})
    info = root.test.command("usersInfo", "bob", showCredentials=True)["users"][0]
    assert info["customData"] == {"team": "a"}
    assert sorted(info["mechanisms"]) == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    stored = info["credentials"]["SCRAM-SHA-256"]
    assert set(stored) == {"iterationCount", "salt", "storedKey", "serverKey"}
    assert stored["iterationCount"] == 15000
    assert info["credentials"]["SCRAM-SHA-1"]["iterationCount"] == 10000
    assert "old" not in str(root.admin["system.users"].find_one({"_id": "test.bob"}))
    assert code_of(lambda: root.test.command("createUser", "bob", pwd="x", roles=[])) == 51003
    assert code_of(lambda: root.test.command("createUser", "carl", pwd="x", roles=["noSuchRole"])) == 31
    assert code_of(lambda: root.test.command("dropUser", "nobody")) == 11
    bob = login(auth_server, "bob", "old", source="test")
    assert code_of(lambda: bob.test.c.insert_one({})) == UNAUTHORIZED
    root.test.command("grantRolesToUser", "bob", roles=["readWrite"])
    bob.test.c.insert_one({"by": "bob"})
    root.test.command("revokeRolesFromUser", "bob", roles=["readWrite"])
    assert code_of(lambda: bob.test.c.insert_one({})) == UNAUTHORIZED
    root.test.command("updateUser", "bob", pwd="new")
    assert code_of(lambda: login(auth_server, "bob", "old", source="test").test.c.find_one()) == AUTHENTICATION_FAILED
    login(auth_server, "bob", "new", source="test").test.c.find_one()
    assert root.test.command("dropAllUsersFromDatabase")["n"] >= 1
    assert code_of(lambda: bob.test.c.find_one()) == UNAUTHORIZED
    bob.close()


def test_authorized_databases_and_collections(auth_server, root):
    seed(root)
    root.other.command("createUser", "narrow", pwd="pw", roles=[])
    root.other.command("createRole", "oneColl", privileges=[
        {"resource": {"db": "other", "collection": "c"}, "actions": ["find"]}], roles=[])
    root.other.command("grantRolesToUser", "narrow", roles=["oneColl"])
    root.other.d.insert_one({})
    narrow = login(auth_server, "narrow", "pw", source="other")
    assert narrow.list_database_names() == ["other"]
    names = narrow.other.list_collection_names(authorizedCollections=True)
    assert names == ["c"]
    assert code_of(lambda: narrow.other.list_collection_names()) == UNAUTHORIZED
    narrow.close()
    root.other.command("dropUser", "narrow")
    root.other.command("dropRole", "oneColl")


def test_users_survive_kill_9(workdir):
    process = StrataProcess(os.path.join(workdir, "auth-crash"), extra_args=["--auth"])
    process.client().admin.command("createUser", "admin", pwd="pw", roles=["root"])
    client = login(process, "admin", "pw")
    client.app.command("createUser", "durable", pwd="pw", roles=["readWrite"])
    client.close()
    process.kill()
    process = StrataProcess(process.dbpath, extra_args=["--auth"])
    try:
        durable = login(process, "durable", "pw", source="app")
        durable.app.c.insert_one({"after": "crash"})
        assert durable.app.c.count_documents({}) == 1
        durable.close()
        # The localhost exception is over: the users are still there.
        stranger = process.client()
        assert code_of(lambda: stranger.admin.command("createUser", "x", pwd="x", roles=[])) == UNAUTHORIZED
        stranger.close()
    finally:
        process.stop()


def test_strangers_may_not_send_large_messages(auth_server, root):
    import socket
    import struct

    import bson

    # A whole OP_MSG of 100 KB from a client that has not authenticated: the server closes the
    # connection instead of buffering it, and stays up for everyone else.
    body = bson.encode({"ping": 1, "pad": "x" * 100_000, "$db": "admin"})
    message = struct.pack("<iiiiI", 16 + 4 + 1 + len(body), 1, 0, 2013, 0) + b"\x00" + body
    with socket.create_connection((auth_server.host, auth_server.port), timeout=10) as stranger:
        try:
            stranger.sendall(message)
            answer = stranger.recv(1024)
        except ConnectionResetError:
            answer = b""  # closed with our bytes unread: the kernel resets
        assert answer == b""
    # The same command from an authenticated client is fine.
    assert root.admin.command({"ping": 1, "pad": "x" * 100_000})["ok"] == 1.0
