"""Replica-set members that speak TLS to each other and prove themselves with X.509
certificates, as mongod's `--clusterAuthMode x509`: three members, each with its own
certificate from one CA, whose subjects share an organization and unit; clients present
certificates of another unit. Through pymongo: the set replicates (so its members reached each
other over TLS: every member refuses plain connections), a client holding a member's
certificate is the members' own user, and a server whose certificate names another
organization cannot be added.

Every member listens on 127.0.0.1 on a port picked free for the test; every wait is bounded.
"""

import os

import pymongo
import pytest
import trustme
from pymongo.write_concern import WriteConcern

from conftest import StrataProcess
from faults import assert_cannot_join, free_port, wait_for

SET = "rsx509"
ORGANIZATION = "Strata test cluster"


@pytest.fixture(scope="module")
def pki(workdir):
    ca = trustme.CA(organization_name=ORGANIZATION)
    directory = os.path.join(workdir, "x509-pki")
    os.makedirs(directory)
    ca_file = os.path.join(directory, "ca.pem")
    ca.cert_pem.write_to_path(ca_file)

    def issue(name, organization=ORGANIZATION, unit="members"):
        path = os.path.join(directory, f"{name}.pem")
        certificate = ca.issue_cert(
            "localhost", "127.0.0.1", common_name=name, organization_name=organization, organization_unit_name=unit
        )
        certificate.private_key_and_cert_chain_pem.write_to_path(path)
        return path

    return {"ca_file": ca_file, "issue": issue, "client": issue("app", unit="clients")}


class Member:
    def __init__(self, workdir, index, certificate, pki):
        self.dbpath = os.path.join(workdir, f"x509-m{index}")
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.pki = pki
        args = ["--replSet", SET, "--clusterAuthMode", "x509", "--tlsMode", "requireTLS",
                "--tlsCertificateKeyFile", certificate, "--tlsCAFile", pki["ca_file"]]
        self.process = StrataProcess(self.dbpath, port=self.port, extra_args=args)

    def direct(self, certificate=None, **options):
        options.setdefault("serverSelectionTimeoutMS", 5000)
        return pymongo.MongoClient(
            "127.0.0.1", self.port, directConnection=True, tls=True,
            tlsCAFile=self.pki["ca_file"], tlsCertificateKeyFile=certificate or self.pki["client"], **options,
        )

    def is_primary(self):
        try:
            with self.direct() as client:
                return client.admin.command("hello").get("isWritablePrimary")
        except pymongo.errors.PyMongoError:
            return False


def test_members_speak_tls_and_prove_themselves_with_certificates(workdir, pki):
    certificates = [pki["issue"](f"member{i}") for i in range(3)]
    members = [Member(workdir, i, certificates[i], pki) for i in range(3)]
    stranger = None
    try:
        config = {"_id": SET, "members": [{"_id": i, "host": m.host} for i, m in enumerate(members)],
                  "settings": {"electionTimeoutMillis": 1000}}
        with members[0].direct() as first:  # from localhost, before any user: the localhost exception
            first.admin.command("replSetInitiate", config)
        primary = wait_for("a primary", lambda: next((m for m in members if m.is_primary()), None))
        with primary.direct() as direct:
            direct.admin.command("createUser", "root", pwd="a long secret", roles=["root"])

        seeds = ",".join(m.host for m in members)
        client = pymongo.MongoClient(
            f"mongodb://root:a%20long%20secret@{seeds}/?replicaSet={SET}&authSource=admin", tls=True,
            tlsCAFile=pki["ca_file"], tlsCertificateKeyFile=pki["client"], serverSelectionTimeoutMS=15000,
        )
        # Acknowledged by all three: the entries went to both secondaries over TLS, each link
        # proven with a member's certificate.
        client.t.c.with_options(write_concern=WriteConcern(w=3, wtimeout=15000)).insert_many(
            [{"_id": i} for i in range(100)]
        )
        status = client.admin.command("replSetGetStatus")
        assert sorted(m["stateStr"] for m in status["members"]) == ["PRIMARY", "SECONDARY", "SECONDARY"]

        # A member's certificate is the members' own user; a client's is a user of $external.
        with members[1].direct(certificates[2], authMechanism="MONGODB-X509") as as_member:
            users = as_member.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
            assert users == [{"user": "__system", "db": "local"}]
        with members[1].direct(authMechanism="MONGODB-X509", serverSelectionTimeoutMS=3000) as as_client:
            with pytest.raises(pymongo.errors.OperationFailure) as refused:
                as_client.admin.command("ping")  # no such $external user
            assert refused.value.code == 18

        # Same CA, another organization: not a member, so it cannot be added.
        stranger = Member(workdir, 3, pki["issue"]("intruder", organization="Elsewhere"), pki)
        assert_cannot_join(client, stranger.host)
        client.close()
    finally:
        for m in members + ([stranger] if stranger else []):
            if m.process.process.poll() is None:
                m.process.stop()


def test_x509_membership_needs_tls_between_members(workdir, pki):
    args = ["--replSet", SET, "--clusterAuthMode", "x509", "--tlsMode", "allowTLS",
            "--tlsCertificateKeyFile", pki["issue"]("lonely"), "--tlsCAFile", pki["ca_file"]]
    with pytest.raises(AssertionError) as refused:
        StrataProcess(os.path.join(workdir, "x509-allow"), extra_args=args)
    assert "unexpected first line ''" in str(refused.value)
    with open(os.path.join(workdir, "x509-allow.log"), encoding="utf-8") as log:
        assert "needs TLS between members" in log.read()
