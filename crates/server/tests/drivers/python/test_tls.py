"""TLS through pymongo: requireTLS refuses plain clients and serves TLS ones (with a CA the
test makes, with and without a client certificate), preferTLS serves both on one port, and
rotateCertificates switches new connections to new files without a restart. The server also
runs with --auth here, so users log in with SCRAM over TLS, as in production."""

import os
import threading

import pytest
import trustme
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError

from conftest import StrataProcess


def write_server_files(ca, directory, name):
    server_pem = os.path.join(directory, f"{name}-server.pem")
    ca_pem = os.path.join(directory, f"{name}-ca.pem")
    certificate = ca.issue_cert("localhost", "127.0.0.1")
    certificate.private_key_and_cert_chain_pem.write_to_path(server_pem)
    ca.cert_pem.write_to_path(ca_pem)
    return server_pem, ca_pem


@pytest.fixture(scope="module")
def pki(workdir):
    ca = trustme.CA()
    server_pem, ca_pem = write_server_files(ca, workdir, "first")
    client_pem = os.path.join(workdir, "client.pem")
    ca.issue_cert("client@example.org").private_key_and_cert_chain_pem.write_to_path(client_pem)
    return {"ca": ca, "server": server_pem, "ca_file": ca_pem, "client": client_pem, "dir": workdir}


def tls_args(pki, mode):
    return ["--tlsMode", mode, "--tlsCertificateKeyFile", pki["server"], "--tlsCAFile", pki["ca_file"],
            "--tlsAllowConnectionsWithoutCertificates"]


@pytest.fixture(scope="module")
def tls_server(workdir, pki):
    process = StrataProcess(os.path.join(workdir, "tls"), extra_args=["--auth", *tls_args(pki, "requireTLS")])
    first = process.client(tls=True, tlsCAFile=pki["ca_file"])
    first.admin.command("createUser", "admin", pwd="secret", roles=["root"])
    first.close()
    yield process
    process.stop()


def test_require_tls_refuses_plain_clients(tls_server):
    plain = tls_server.client(serverSelectionTimeoutMS=1500)
    with pytest.raises(ServerSelectionTimeoutError):
        plain.admin.command("ping")
    plain.close()


def test_scram_over_tls(tls_server, pki):
    client = tls_server.client(tls=True, tlsCAFile=pki["ca_file"], username="admin", password="secret")
    client.test.c.insert_one({"over": "tls"})
    assert client.test.c.find_one({}, {"_id": 0}) == {"over": "tls"}
    client.close()
    wrong = tls_server.client(tls=True, tlsCAFile=pki["ca_file"], username="admin", password="nope")
    with pytest.raises(OperationFailure) as failure:
        wrong.test.c.find_one()
    assert failure.value.code == 18
    wrong.close()


def test_client_certificate(tls_server, pki):
    client = tls_server.client(tls=True, tlsCAFile=pki["ca_file"], tlsCertificateKeyFile=pki["client"],
                               username="admin", password="secret")
    assert client.admin.command("ping")["ok"] == 1.0
    client.close()


def test_untrusted_server_certificate_is_refused(tls_server, workdir):
    other_ca = trustme.CA()
    other_pem = os.path.join(workdir, "other-ca.pem")
    other_ca.cert_pem.write_to_path(other_pem)
    client = tls_server.client(tls=True, tlsCAFile=other_pem, serverSelectionTimeoutMS=1500)
    with pytest.raises(ServerSelectionTimeoutError):
        client.admin.command("ping")
    client.close()


def test_prefer_tls_serves_both(workdir, pki):
    process = StrataProcess(os.path.join(workdir, "prefer"), extra_args=tls_args(pki, "preferTLS"))
    try:
        plain = process.client()
        secure = process.client(tls=True, tlsCAFile=pki["ca_file"])
        plain.test.c.insert_one({"by": "plain"})
        secure.test.c.insert_one({"by": "tls"})
        assert plain.test.c.count_documents({}) == 2 and secure.test.c.count_documents({}) == 2
        plain.close()
        secure.close()
    finally:
        process.stop()


def test_rotate_certificates(workdir, pki):
    directory = os.path.join(workdir, "rotate-files")
    os.makedirs(directory)
    server_pem, ca_pem = write_server_files(pki["ca"], directory, "live")
    args = ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", server_pem]
    process = StrataProcess(os.path.join(workdir, "rotate"), extra_args=args)
    try:
        old = process.client(tls=True, tlsCAFile=ca_pem)
        old.admin.command("ping")
        new_ca = trustme.CA()
        new_server, new_ca_pem = write_server_files(new_ca, directory, "next")
        os.replace(new_server, server_pem)
        assert old.admin.command("rotateCertificates")["ok"] == 1.0
        fresh = process.client(tls=True, tlsCAFile=new_ca_pem)
        assert fresh.admin.command("ping")["ok"] == 1.0
        stale = process.client(tls=True, tlsCAFile=ca_pem, serverSelectionTimeoutMS=1500)
        with pytest.raises(ServerSelectionTimeoutError):
            stale.admin.command("ping")
        for client in (old, fresh, stale):
            client.close()
    finally:
        process.stop()


def certificate_subject(path):
    from cryptography import x509

    with open(path, "rb") as pem:
        return x509.load_pem_x509_certificate(pem.read()).subject.rfc4514_string()


def test_x509_authentication(tls_server, pki):
    root = tls_server.client(tls=True, tlsCAFile=pki["ca_file"], username="admin", password="secret")
    subject = certificate_subject(pki["client"])
    root["$external"].command("createUser", subject, roles=[{"role": "readWrite", "db": "certs"}])
    client = tls_server.client(tls=True, tlsCAFile=pki["ca_file"], tlsCertificateKeyFile=pki["client"],
                               authMechanism="MONGODB-X509")
    client.certs.c.insert_one({"by": "certificate"})
    status = client.admin.command("connectionStatus")["authInfo"]
    assert status["authenticatedUsers"] == [{"user": subject, "db": "$external"}]
    assert status["authenticatedUserRoles"] == [{"role": "readWrite", "db": "certs"}]
    with pytest.raises(OperationFailure) as failure:
        client.other.c.insert_one({})
    assert failure.value.code == 13
    client.close()
    # Without a certificate there is no one to be.
    bare = tls_server.client(tls=True, tlsCAFile=pki["ca_file"], authMechanism="MONGODB-X509",
                             username=subject)
    with pytest.raises(OperationFailure) as failure:
        bare.certs.c.find_one()
    assert failure.value.code == 18
    bare.close()
    # A certificate whose subject is not a user authenticates no one.
    root["$external"].command("dropUser", subject)
    stale = tls_server.client(tls=True, tlsCAFile=pki["ca_file"], tlsCertificateKeyFile=pki["client"],
                              authMechanism="MONGODB-X509")
    with pytest.raises(OperationFailure) as failure:
        stale.certs.c.find_one()
    assert failure.value.code == 18
    stale.close()
    root.close()


def test_many_tls_clients_at_once(tls_server, pki):
    """150 connections calling at once: more bursts than the server lets linger (64), so bursts
    end as soon as a client has nothing pending, which over TLS means nothing decrypted and
    nothing on the socket; no request may be lost or stall in between."""
    client = tls_server.client(
        tls=True, tlsCAFile=pki["ca_file"], username="admin", password="secret", maxPoolSize=200
    )
    collection = client.crowd.c
    collection.drop()
    errors = []

    def work(worker):
        try:
            for i in range(30):
                collection.insert_one({"_id": worker * 1000 + i, "w": worker})
                assert collection.find_one({"_id": worker * 1000 + i})["w"] == worker
        except Exception as error:  # reported below with the worker's number
            errors.append(f"worker {worker}: {error!r}")

    busiest, done = [0], threading.Event()

    def watch():  # the most bursts seen running at once (serverStatus.connections.active)
        while not done.is_set():
            active = client.admin.command("serverStatus")["connections"]["active"]
            busiest[0] = max(busiest[0], active)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(150)]
    watcher = threading.Thread(target=watch)
    for thread in [watcher, *threads]:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    done.set()
    watcher.join(timeout=30)
    print(f"at most {busiest[0]} bursts running at once")
    assert not errors, errors[:5]
    assert collection.count_documents({}) == 150 * 30
    connections = client.admin.command("serverStatus")["connections"]
    assert 1 <= connections["active"] <= connections["current"]
    client.close()
