"""Run the drivers' unified-format specification tests (transactions, change streams, retryable
reads and writes, sessions, causal consistency, CRUD, collection and index management, command
monitoring) against a Strata replica set, with
pymongo's own unified test runner (test/unified_format.py and test/__init__.py's client_context
from the pymongo source distribution of the version pinned in ../requirements.txt).

Usage (run.sh next to this file sets up the venv and calls this):
    run_unified.py [--areas a,b,...] [-k REGEX] [--exclude REGEX] [--json FILE] [--timeout SECONDS]
                   [--baseline FILE] [--write-baseline FILE] [--all]
                   [--no-auth-pass] [--skips] [--keep] [-v]
e.g. run.sh --baseline known-failures.txt (what CI wants), or run.sh --areas sessions -k Snapshot -v,
or run.sh --members 3 --no-auth-pass (a set of three: also the tests that need a secondary, and
the SDAM integration tests: rediscover-quickly-after-step-down, connections-survive-step-down)

What it does:
  1. Gets the pymongo sdist (`pip download --no-binary :all: --no-deps pymongo==X`) into
     target/pymongo-unified/ (cached) and unpacks only its test/ package there, so that
     `import pymongo` is still the venv's installed (compiled) pymongo of the same version.
  2. Runs two passes, each in its own process (client_context is a process-wide singleton):
     - plain: `$STRATA_BIN serve --replSet rs0 --setParameter enableTestCommands=1` on a free
       port with a temporary dbpath, initiated with `{replSetInitiate: {}}` through a
       directConnection client; every test of the areas;
     - auth (--no-auth-pass skips it): the same server, initiated and given pymongo's harness
       user (user/password, root) first, then restarted with --auth; only the tests whose
       runOnRequirements ask for auth (handshakeError.json, retryable-*-handshake.json), which
       the plain pass skips. Their results replace the plain pass's skips.
  3. In each pass: points pymongo's harness at the server (DB_IP / DB_PORT / DB_USER /
     DB_PASSWORD, read by test/helpers_shared.py), runs test.setup() (client_context.init():
     ping, getCmdLineOpts, serverStatus, isMaster, getParameter '*', then the replica-set
     client; with auth, usersInfo and SCRAM), generates the unified test classes of each area
     with generate_test_classes() (one class-name prefix per area, so that the transactions and
     transactions-convenient-api files of the same name do not replace each other as they do in
     pymongo's test_transactions_unified.py) and runs them with unittest, --timeout per test.
  4. Prints per area passed / failed / errors / skipped (+ the expected failures pymongo itself
     declares), each failure with its first line, and writes every result (traceback, the
     commands the test sent and the server's error replies) to --json
     (default target/pymongo-unified/results.json).

Skips of our own: ONE_MEMBER_SKIPS below (tests that need a secondary; --all runs them).

Exit status: 0 when the run completed; 2 when a pass did not (server or harness trouble); with
--baseline FILE (one test id a line, '#' comments: known-failures.txt next to this file lists
the tests known to fail, by cause), 1 if a test not listed there failed or errored; listed tests
that now pass are reported so the list can shrink.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", "..", "..", ".."))
REQUIREMENTS = os.path.join(HERE, "..", "requirements.txt")
CACHE = os.path.join(ROOT, "target", "pymongo-unified")

# Area name -> (spec directory under pymongo's test/, expected failures pymongo's own module
# declares for it: test_retryable_reads_unified.py's list).
AREAS = collections.OrderedDict(
    [
        ("transactions", ("transactions/unified", [])),
        ("transactions-convenient-api", ("transactions-convenient-api/unified", [])),
        ("change-streams", ("change_streams/unified", [])),
        ("retryable-writes", ("retryable_writes/unified", [])),
        (
            "retryable-reads",
            (
                "retryable_reads/unified",
                ["ListDatabaseObjects .*", "ListCollectionObjects .*", "MapReduce .*"],
            ),
        ),
        ("sessions", ("sessions", [])),
        ("causal-consistency", ("causal_consistency", [])),
        ("crud", ("crud/unified", [])),
        ("collection-management", ("collection_management", [])),
        ("index-management", ("index_management", [])),
        ("command-monitoring", ("command_monitoring", [])),
        ("sdam", ("discovery_and_monitoring/unified", [])),
        # Not a spec directory: pymongo's own test module for the SDAM spec's "connections
        # survive primary step-down" integration tests.
        ("connections-survive-step-down", ("module:test.test_connections_survive_primary_stepdown_spec", [])),
        # pymongo's own test modules for what a replica set changes (not spec directories).
        ("pymongo-session", ("module:test.test_session", [])),
        ("pymongo-causal-consistency", ("module:test.test_causal_consistency", [])),
        ("pymongo-transactions", ("module:test.test_transactions", [])),
        ("pymongo-retryable-writes", ("module:test.test_retryable_writes", [])),
        ("pymongo-retryable-reads", ("module:test.test_retryable_reads", [])),
        ("pymongo-change-stream", ("module:test.test_change_stream", [])),
        ("pymongo-read-preferences", ("module:test.test_read_preferences", [])),
        ("pymongo-read-concern", ("module:test.test_read_concern", [])),
        ("pymongo-read-write-concern", ("module:test.test_read_write_concern_spec", [])),
        ("pymongo-discovery-and-monitoring", ("module:test.test_discovery_and_monitoring", [])),
    ]
)


# Areas that need a replica set of several members (a step-down hands the role over): run by
# default only with --members 2 or more.
SEVERAL_MEMBERS = ["sdam", "connections-survive-step-down"]

# Tests that cannot pass against a replica set of one member, whatever the server does, and
# that would spend serverSelectionTimeoutMS (30 s) each finding that out: skipped unless --all.
ONE_MEMBER_SKIPS = [
    # A secondary read preference in a transaction: the driver raises "read preference in a
    # transaction must be primary" only after selecting a secondary, and a set of one has none.
    (r"TestTransactionsUnifiedReadPref\.test_secondary_readPreference$", "needs a secondary"),
    (r"TestTransactionsUnifiedRunCommand\.test_run_command_fails_with_.*secondary_read_preference",
     "needs a secondary"),
    (r"TestTransactionsUnifiedTransactionOptions\.test_.*readPreference", "needs a secondary"),
]


def log(message):
    print(message, flush=True)


# ---------------------------------------------------------------------------------------------
# 1. The pymongo source distribution's test/ package.


def pinned_pymongo_version():
    with open(REQUIREMENTS) as f:
        for line in f:
            m = re.match(r"\s*pymongo\s*==\s*([^\s;#]+)", line)
            if m:
                return m.group(1)
    raise SystemExit(f"no pymongo==X line in {REQUIREMENTS}")


def pymongo_tests(version):
    """The directory holding pymongo X's test/ package (unpacked from the sdist, cached)."""
    import pymongo

    if pymongo.version != version:
        raise SystemExit(
            f"the venv has pymongo {pymongo.version}, requirements.txt pins {version}: "
            "install the requirements first (run.sh does)"
        )
    unpacked = os.path.join(CACHE, f"pymongo-{version}")
    if os.path.isfile(os.path.join(unpacked, "test", "unified_format.py")):
        return unpacked
    os.makedirs(CACHE, exist_ok=True)
    sdist = os.path.join(CACHE, f"pymongo-{version}.tar.gz")
    if not os.path.isfile(sdist):
        log(f"== downloading the pymongo {version} source distribution")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
             "--no-binary", ":all:", "--no-deps", f"pymongo=={version}", "-d", CACHE],
            check=True,
        )
    partial = unpacked + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    prefix = f"pymongo-{version}/test/"
    with tarfile.open(sdist) as tar:
        members = []
        for member in tar.getmembers():
            if member.name.startswith(prefix) and (member.isfile() or member.isdir()):
                member.name = member.name[len(f"pymongo-{version}/"):]
                members.append(member)
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(partial, members=members, **safe)
    shutil.rmtree(unpacked, ignore_errors=True)
    os.rename(partial, unpacked)
    return unpacked


# ---------------------------------------------------------------------------------------------
# 2. The server.


USER = ("user", "password")  # pymongo's test harness defaults (DB_USER / DB_PASSWORD)
DEFAULT_PORT = 27017


def port_is_free(port):
    with socket.socket() as probe:
        # As the server binds (connections of an earlier server in TIME_WAIT do not hold it).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Strata:
    """`strata serve --replSet rs0` on a free port, initiated. With auth: initiated and given
    the harness's root user without --auth first (replSetInitiate needs an authenticated client
    under --auth, and createUser a primary), then restarted with --auth on the same dbpath.
    With `others` (Strata servers started with `initiate=False`), the set is initiated with
    them as its other members; this one is the primary."""

    def __init__(self, binary, workdir, auth=False, others=(), initiate=True, port=0):
        self.binary = binary
        self.port_asked = port
        os.makedirs(workdir, exist_ok=True)
        self.dbpath = os.path.join(workdir, "data")
        self.log_path = os.path.join(workdir, "strata.log")
        self.log_file = open(self.log_path, "ab")
        self.process = None
        self._start([])
        if not initiate:
            return
        self._initiate(others)
        if auth:
            self._create_user()
            self.stop()
            self.log_file = open(self.log_path, "ab")
            self._start(["--auth"])
            self._wait_primary({"username": USER[0], "password": USER[1]})

    def _start(self, extra):
        self.process = subprocess.Popen(
            [self.binary, "serve", "--dbpath", self.dbpath, "--port", str(self.port_asked), "--cache-size",
             "256MiB", "--replSet", "rs0", "--oplogSizeMB", "256",
             "--setParameter", "enableTestCommands=1", *extra],
            stdout=subprocess.PIPE,
            stderr=self.log_file,
        )
        line = self.process.stdout.readline().decode()
        if not line.startswith("strata listening on "):
            raise SystemExit(f"unexpected first line from strata: {line!r} (log: {self.log_path})")
        self.host, port = line.split()[-1].rsplit(":", 1)
        self.port = int(port)

    def _direct(self, **kwargs):
        import pymongo

        return pymongo.MongoClient(self.host, self.port, directConnection=True,
                                   serverSelectionTimeoutMS=10000, **kwargs)

    def _initiate(self, others):
        config = {}
        if others:
            hosts = [f"{m.host}:{m.port}" for m in (self, *others)]
            # The first is preferred (the harness's seed), the others electable (a step-down
            # test hands the role over).
            members = [{"_id": i, "host": h, "priority": 2 if i == 0 else 1} for i, h in enumerate(hosts)]
            config = {"_id": "rs0", "members": members}
        with self._direct() as direct:
            direct.admin.command({"replSetInitiate": config})
        self._wait_primary({})
        for other in others:
            with other._direct() as direct:
                deadline = time.monotonic() + 30
                while not direct.admin.command("hello").get("secondary"):
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{other.host}:{other.port} did not become secondary")
                    time.sleep(0.05)

    def _wait_primary(self, credentials):
        with self._direct(**credentials) as direct:
            deadline = time.monotonic() + 30
            while not direct.admin.command("hello").get("isWritablePrimary"):
                if time.monotonic() > deadline:
                    raise SystemExit("strata did not become primary")
                time.sleep(0.05)

    def _create_user(self):
        with self._direct() as direct:
            direct.admin.command("createUser", USER[0], pwd=USER[1], roles=["root"])

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log_file.close()
        self.process.stdout.close()
        return self.process.returncode


# ---------------------------------------------------------------------------------------------
# 3. Running the tests.


class CommandLog:
    """A global command listener keeping what the current test sent and what came back."""

    def __init__(self, register=True):
        import pymongo.monitoring

        self.events = []
        if not register:
            return

        outer = self

        class Listener(pymongo.monitoring.CommandListener):
            def started(self, event):
                outer.add(event.request_id, "sent", event.command_name, event.command)

            def succeeded(self, event):
                reply = event.reply
                if reply.get("writeErrors") or reply.get("writeConcernError") or reply.get("errorLabels"):
                    outer.add(event.request_id, "reply", event.command_name, reply)

            def failed(self, event):
                outer.add(event.request_id, "failed", event.command_name, event.failure)

        pymongo.monitoring.register(Listener())

    def add(self, request_id, kind, name, doc):
        if name in ("hello", "isMaster", "ismaster", "endSessions", "killAllSessions"):
            return
        if len(self.events) < 400:
            self.events.append((request_id, kind, name, short(doc)))

    def take(self):
        events, self.events = self.events, []
        return events


def short(doc, limit=700):
    from bson import json_util

    try:
        text = json_util.dumps(doc, json_options=json_util.RELAXED_JSON_OPTIONS)
    except Exception:
        text = repr(doc)
    return text if len(text) <= limit else text[:limit] + "..."


class TestTimeout(Exception):
    pass


class Recorder(unittest.TestResult):
    def __init__(self, area_of, command_log, timeout, verbose, on_new_area=lambda area: None):
        super().__init__()
        self.area_of = area_of
        self.on_new_area = on_new_area
        self._area = None
        self.command_log = command_log
        self.timeout = timeout
        self.verbose = verbose
        self.results = []
        self._start = 0.0

    def startTest(self, test):
        super().startTest(test)
        if self.area_of(test) != self._area:
            self._area = self.area_of(test)
            self.on_new_area(self._area)
        self.command_log.take()
        self._start = time.monotonic()
        signal.alarm(self.timeout)

    def stopTest(self, test):
        signal.alarm(0)
        super().stopTest(test)

    def _record(self, test, outcome, detail=None, err=None):
        signal.alarm(0)
        entry = {
            "id": test_id(test),
            "area": self.area_of(test),
            "outcome": outcome,
            "seconds": round(time.monotonic() - self._start, 3),
        }
        if detail:
            entry["detail"] = detail
        if err is not None:
            entry["error"] = first_line(err)
            entry["traceback"] = self._exc_info_to_string(err, test)
            entry["commands"] = self.command_log.take()
        else:
            self.command_log.take()
        self.results.append(entry)
        if self.verbose or outcome in ("failed", "error"):
            line = f"  {outcome:<7} {entry['id']} ({entry['seconds']}s)"
            if err is not None:
                line += f"\n          {entry['error'][:300]}"
            log(line)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", err=err)

    def addError(self, test, err):
        super().addError(test, err)
        if isinstance(test, unittest.suite._ErrorHolder):
            log(f"  error   {test.description}: {first_line(err)}")
            self.results.append({"id": test.description, "area": "(setup)", "outcome": "error",
                                 "error": first_line(err),
                                 "traceback": self._exc_info_to_string(err, test)})
            return
        self._record(test, "error", err=err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        if reason.endswith("runOnRequirements not satisfied"):
            # Say which: the file's (the reason names the class) or the test's own.
            spec = type(test).TEST_SPEC
            reqs = spec.get("runOnRequirements", [])
            if not reason.startswith(type(test).__name__):
                for case in spec["tests"]:
                    if method_name(case) == test._testMethodName:
                        reqs = case.get("runOnRequirements", [])
            wanted = " or ".join(
                "{" + ", ".join(f"{k}: {v}" for k, v in req.items() if k != "serverless") + "}"
                for req in reqs
            )
            reason = f"runOnRequirements not satisfied: {wanted}"
        self._record(test, "skipped", detail=reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "xfail", detail=first_line(err))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "xpass")


def first_line(err):
    etype, value, _ = err
    text = str(value).strip().splitlines()
    return f"{etype.__name__}: {text[0] if text else ''}"


def test_id(test):
    # "<area prefix class>.<test method>", e.g. TestTransactionsUnifiedCommit.test_commit
    return f"{type(test).__name__}.{test._testMethodName}"


def method_name(case):
    """The test method unified_format.UnifiedSpecTestMeta makes of a test case."""
    return "test_{}".format(case["description"].strip(". ").replace(" ", "_").replace(".", "_"))


def requires_auth(test):
    """Whether the test's file or the test itself runs only against a server with auth."""
    spec = type(test).TEST_SPEC
    reqs = list(spec.get("runOnRequirements", []))
    for case in spec["tests"]:
        if method_name(case) == test._testMethodName:
            reqs += case.get("runOnRequirements", [])
    return any(req.get("auth") for req in reqs)


def run_pass(args):
    """One pass in this process (client_context is a process-wide singleton): start the server,
    run the selected tests, write the results to args.json."""
    version = pinned_pymongo_version()
    tests_dir = pymongo_tests(version)
    binary = os.environ.get("STRATA_BIN") or os.path.join(ROOT, "target", "release", "strata")
    workdir = tempfile.mkdtemp(prefix=f"strata-unified-{args.run_pass}-")
    auth = args.run_pass == "auth"
    others = [Strata(binary, os.path.join(workdir, f"member{i}"), initiate=False) for i in range(1, args.members)]
    # The seed on 27017 when it is free: a few of pymongo's own tests make a client with no
    # host (MongoClient(**client_context.default_client_options)), which means localhost:27017.
    server = Strata(binary, workdir, auth, others, port=DEFAULT_PORT if port_is_free(DEFAULT_PORT) else 0)
    log(f"== [{args.run_pass}] strata {binary} on {server.host}:{server.port}"
        f"{' with --auth' if auth else ''}{f', {args.members} members' if others else ''}"
        f" (dbpath and log in {workdir})")
    ok = False
    results = []
    try:
        os.environ["DB_IP"] = server.host
        os.environ["DB_PORT"] = str(server.port)
        os.environ["DB_USER"], os.environ["DB_PASSWORD"] = USER
        sys.path.insert(0, tests_dir)
        os.chdir(tests_dir)

        import test as pymongo_test
        from test import client_context
        from test.unified_format import generate_test_classes, get_test_path

        # pymongo's own modules read a client's first event listener as their own
        # (`client.options.event_listeners[0]`): with them, no global listener is registered
        # and no commands are logged.
        own_modules = any(area.startswith("pymongo-") for area in args.area_list)
        command_log = CommandLog(register=not own_modules)
        pymongo_test.setup()
        if not client_context.connected:
            raise SystemExit("pymongo's client_context could not connect:\n"
                             + client_context.connection_attempt_info())
        log(f"== [{args.run_pass}] client_context: version {client_context.version}, replica set "
            f"{client_context.replica_set_name!r}, auth {client_context.auth_enabled}, test "
            f"commands {client_context.test_commands_enabled}, sessions "
            f"{client_context.sessions_enabled}")

        pattern = re.compile(args.k) if args.k else None
        excluded = re.compile(args.exclude) if args.exclude else None
        suite = unittest.TestSuite()
        class_area = {}
        loader = unittest.TestLoader()
        for area in args.area_list:
            path, expected_failures = AREAS[area]
            # "Test_{prefix}_{dir}_{file}" in lowerCamelCase: TestTransactionsUnifiedCommit
            prefix = "_" + re.sub(r"[^A-Za-z0-9]+", "_", area).strip("_")
            if path.startswith("module:"):
                module = __import__(path.removeprefix("module:"), fromlist=["*"])
                classes = {name: klass for name, klass in vars(module).items()
                           if isinstance(klass, type) and issubclass(klass, unittest.TestCase)
                           and klass.__module__ == module.__name__}
            else:
                classes = generate_test_classes(
                    get_test_path(*path.split("/")),
                    module="strata_unified",
                    class_name_prefix=prefix,
                    expected_failures=expected_failures,
                )
            for name in sorted(classes):
                klass = classes[name]
                class_area[klass] = area
                for method in loader.getTestCaseNames(klass):
                    test = klass(method)
                    if pattern and not pattern.search(test_id(test)):
                        continue
                    if auth and not requires_auth(test):
                        continue
                    if excluded and excluded.search(test_id(test)):
                        why = f"strata: left out by --exclude {args.exclude!r}"
                        setattr(test, method, unittest.skip(why)(getattr(test, method)))
                    for skip, reason in [] if args.all or args.members > 1 else ONE_MEMBER_SKIPS:
                        if re.search(skip, test_id(test)):
                            why = f"strata: a replica set of one member: {reason} (--all runs it)"
                            setattr(test, method, unittest.skip(why)(getattr(test, method)))
                    suite.addTest(test)

        def on_alarm(signum, frame):
            raise TestTimeout(f"test still running after {args.timeout}s")

        signal.signal(signal.SIGALRM, on_alarm)
        def kill_all_sessions(area):
            # An area starts with no transaction left open by the one before. Some of pymongo's
            # own tests leave one on purpose (test_3_3_commit_not_retried_after_timeout: its
            # commits are cut off by closeConnection, so the transaction stays open until
            # transactionLifetimeLimitSeconds). The unified runner kills sessions before each
            # test for the same reason.
            from pymongo.errors import PyMongoError
            try:
                client_context.client.admin.command("killAllSessions", [])
            except PyMongoError as error:
                log(f"== killAllSessions before {area}: {error}")

        recorder = Recorder(lambda t: class_area.get(type(t), "?"), command_log, args.timeout,
                            args.verbose, on_new_area=kill_all_sessions)
        log(f"== [{args.run_pass}] running {suite.countTestCases()} tests")
        suite.run(recorder)
        results = recorder.results
        client_context.client.close()
        try:
            pymongo_test.teardown()
        except Exception:  # gc garbage / leaked clients: reported, not fatal
            log(f"== pymongo teardown: {first_line(sys.exc_info())}")
        ok = True
    finally:
        code = server.stop()
        for other in others:
            code = code or other.stop()
        if code not in (0, None):
            log(f"== strata exited {code}; log kept in {server.log_path}")
            ok = False
        elif ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"== strata log: {server.log_path}")
        with open(args.json, "w") as f:
            json.dump({"results": results}, f)
    return 0 if ok else 2


def run(args):
    """Run each pass in its own process, then merge and report."""
    started = time.monotonic()
    version = pinned_pymongo_version()
    pymongo_tests(version)  # download and unpack once, before the passes
    passes = ["plain"] if args.no_auth_pass else ["plain", "auth"]
    forwarded = ["--areas", ",".join(args.area_list), "--timeout", str(args.timeout), "--members", str(args.members)]
    forwarded += ["-k", args.k] if args.k else []
    forwarded += ["--exclude", args.exclude] if args.exclude else []
    forwarded += [flag for flag, on in (("--all", args.all), ("--keep", args.keep), ("-v", args.verbose)) if on]
    merged = collections.OrderedDict()
    status = 0
    with tempfile.TemporaryDirectory(prefix="strata-unified-results-") as tmp:
        for name in passes:
            out = os.path.join(tmp, f"{name}.json")
            code = subprocess.call([sys.executable, os.path.abspath(__file__), "--pass", name,
                                    "--json", out, *forwarded])
            if code != 0 or not os.path.exists(out):
                log(f"== the {name} pass did not complete (exit {code})")
                status = 2
            if not os.path.exists(out):
                continue
            with open(out) as f:
                for r in json.load(f)["results"]:
                    r["pass"] = name
                    # The auth pass runs only tests that need auth, which the plain pass skipped.
                    merged[r["id"]] = r
    elapsed = time.monotonic() - started
    return max(status, report(args, list(merged.values()), elapsed, version))


def report(args, results, elapsed, version):
    counts = collections.OrderedDict((a, collections.Counter()) for a in args.area_list)
    for r in results:
        counts.setdefault(r["area"], collections.Counter())[r["outcome"]] += 1
    log("")
    log(f"== unified spec tests, pymongo {version} runner, {elapsed:.0f}s")
    header = f"{'area':<29}{'passed':>7}{'failed':>7}{'errors':>7}{'skipped':>8}{'xfail':>6}{'total':>7}"
    log(header)
    total = collections.Counter()
    for area, c in counts.items():
        total.update(c)
        log(f"{area:<29}{c['passed']:>7}{c['failed']:>7}{c['error']:>7}{c['skipped']:>8}"
            f"{c['xfail'] + c['xpass']:>6}{sum(c.values()):>7}")
    log(f"{'all':<29}{total['passed']:>7}{total['failed']:>7}{total['error']:>7}"
        f"{total['skipped']:>8}{total['xfail'] + total['xpass']:>6}{sum(total.values()):>7}")
    log("(failed: an assertion of the test did not hold; errors: an exception escaped it;"
        " xfail: pymongo's own expected failures)")

    if args.skips:
        reasons = collections.Counter(r.get("detail", "") for r in results if r["outcome"] == "skipped")
        log("\n== skip reasons")
        for reason, n in reasons.most_common():
            log(f"{n:>5}  {reason}")

    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"pymongo": version, "seconds": round(elapsed, 1), "results": results}, f, indent=1)
    log(f"== every result, with tracebacks and the commands of failed tests: {args.json}")

    failing = sorted(r["id"] for r in results if r["outcome"] in ("failed", "error"))
    if args.write_baseline:
        with open(args.write_baseline, "w") as f:
            f.write(f"# unified spec tests failing against Strata (pymongo {version} runner)\n")
            f.writelines(f"{t}\n" for t in failing)
        log(f"== wrote {len(failing)} failing tests to {args.write_baseline}")
    if args.baseline:
        with open(args.baseline) as f:
            known = {line.strip() for line in f if line.strip() and not line.startswith("#")}
        new = [t for t in failing if t not in known]
        fixed = sorted(r["id"] for r in results if r["id"] in known and r["outcome"] == "passed")
        if fixed:
            log(f"\n== {len(fixed)} tests in the baseline now pass (remove them from it):")
            for t in fixed:
                log(f"  {t}")
        if new:
            log(f"\n== {len(new)} failing tests not in the baseline:")
            for t in new:
                log(f"  {t}")
            return 1
        log(f"== baseline {args.baseline}: no failure outside it ({len(failing)} known)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--areas", help=f"comma-separated subset of: {', '.join(AREAS)}")
    parser.add_argument("-k", help="only tests whose id (Class.test_method) matches this regex")
    parser.add_argument("--exclude", help="skip the tests whose id matches this regex (reported as skipped)")
    parser.add_argument("--json", default=os.path.join(CACHE, "results.json"))
    parser.add_argument("--timeout", type=int, default=30, help="seconds per test (default 30)")
    parser.add_argument("--baseline", help="file of known failing test ids; exit 1 on others")
    parser.add_argument("--write-baseline", help="write the failing test ids to this file")
    parser.add_argument("--all", action="store_true",
                        help="also run the tests that need a second member (ONE_MEMBER_SKIPS)")
    parser.add_argument("--members", type=int, default=1,
                        help="members of the replica set the tests run against (default 1; with more, "
                             "the first is the only electable one and the tests that need a secondary run)")
    parser.add_argument("--no-auth-pass", action="store_true",
                        help="skip the second pass (a server with --auth, for the tests needing auth)")
    parser.add_argument("--skips", action="store_true", help="print the skip reasons")
    parser.add_argument("--keep", action="store_true", help="keep the dbpath and log")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every test's outcome")
    parser.add_argument("--pass", dest="run_pass", choices=["plain", "auth"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    # pymongo's own modules ("pymongo-*") run only when named: they need a pass of their own.
    default_areas = [a for a in AREAS if (args.members > 1 or a not in SEVERAL_MEMBERS)
                     and not a.startswith("pymongo-")]
    args.area_list = args.areas.split(",") if args.areas else default_areas
    unknown = [a for a in args.area_list if a not in AREAS]
    if unknown:
        parser.error(f"unknown areas {unknown}; known: {', '.join(AREAS)}")
    sys.exit(run_pass(args) if args.run_pass else run(args))


if __name__ == "__main__":
    main()
