package strata;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.mongodb.ConnectionString;
import com.mongodb.ErrorCategory;
import com.mongodb.MongoClientSettings;
import com.mongodb.MongoCredential;
import com.mongodb.MongoWriteException;
import com.mongodb.client.ClientSession;
import com.mongodb.client.MongoChangeStreamCursor;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Accumulators;
import com.mongodb.client.model.Aggregates;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Updates;
import com.mongodb.client.model.changestream.ChangeStreamDocument;
import com.mongodb.client.model.changestream.OperationType;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/** Goal: the Java sync driver's everyday calls work against strata. Method: start the binary
 * on a free port with a temp dbpath, run connect, insertMany, createIndex, find on the index,
 * update, delete, aggregate and a duplicate key, then SIGTERM and expect exit 0; once against a
 * plain server and once with --auth and requireTLS (SCRAM over TLS, with the CA and
 * certificates in $STRATA_TLS_DIR that ../run makes). Then a transaction and a change stream
 * on a one-member replica set. */
class SmokeTest {
    private static final String PASSWORD = "a long secret";

    @Test
    void smoke() throws Exception {
        run(false);
    }

    @Test
    void smokeWithAuthAndTls() throws Exception {
        run(true);
    }

    /** The binary started on a free port with a temp dbpath and these extra arguments. */
    private record Strata(Process process, String address) {
        static Strata start(List<String> extra) throws Exception {
            String bin = System.getenv("STRATA_BIN");
            assertNotNull(bin, "STRATA_BIN is not set");
            Path dbpath = Files.createTempDirectory("strata-java");
            List<String> command = new ArrayList<>(List.of(bin, "serve", "--dbpath", dbpath.toString(), "--port", "0"));
            command.addAll(extra);
            ProcessBuilder builder = new ProcessBuilder(command);
            builder.environment().put("RUST_LOG", "warn");
            builder.redirectError(ProcessBuilder.Redirect.INHERIT);
            Process process = builder.start();
            String line = new BufferedReader(new InputStreamReader(process.getInputStream())).readLine();
            if (line == null || !line.startsWith("strata listening on ")) {
                process.destroyForcibly();
                throw new AssertionError("first line: " + line);
            }
            return new Strata(process, line.substring("strata listening on ".length()).trim());
        }

        /** SIGTERM, and expect exit 0. */
        void stop() throws Exception {
            process.destroy();
            assertTrue(process.waitFor(60, TimeUnit.SECONDS));
            assertEquals(0, process.exitValue());
        }
    }

    /** On a one-member replica set (--replSet, then replSetInitiate): a transaction through
     * ClientSession.withTransaction writes to two collections that another client sees only after
     * the commit, a body that throws leaves nothing, and a change stream on a collection reports
     * an insert, an update and a delete, then resumes after the first one. */
    @Test
    void transactionAndChangeStreamOnReplicaSet() throws Exception {
        Strata server = Strata.start(List.of("--replSet", "rs0"));
        try {
            try (MongoClient direct = MongoClients.create("mongodb://" + server.address() + "/?directConnection=true")) {
                direct.getDatabase("admin").runCommand(new Document("replSetInitiate", new Document()));
            }
            String uri = "mongodb://" + server.address() + "/?replicaSet=rs0";
            try (MongoClient client = MongoClients.create(uri); MongoClient other = MongoClients.create(uri)) {
                transactions(client, other.getDatabase("javatx"));
                changeStream(client.getDatabase("javatx").getCollection("events"));
            }
        } finally {
            server.stop();
        }
    }

    private static void transactions(MongoClient client, MongoDatabase other) {
        MongoCollection<Document> orders = client.getDatabase("javatx").getCollection("orders");
        MongoCollection<Document> stock = client.getDatabase("javatx").getCollection("stock");
        Supplier<List<Document>> seen = () -> Arrays.asList(other.getCollection("orders").find(Filters.eq("_id", 1)).first(),
                other.getCollection("stock").find(Filters.eq("_id", "a")).first());
        try (ClientSession session = client.startSession()) {
            List<Document> before = session.withTransaction(() -> {
                orders.insertOne(session, new Document("_id", 1).append("sku", "a"));
                stock.insertOne(session, new Document("_id", "a").append("reserved", 1));
                return seen.get();
            });
            assertEquals(Arrays.asList(null, null), before);
            assertEquals(List.of(new Document("_id", 1).append("sku", "a"), new Document("_id", "a").append("reserved", 1)),
                    seen.get());
            IllegalStateException aborted = assertThrows(IllegalStateException.class, () -> session.withTransaction(() -> {
                orders.insertOne(session, new Document("_id", 2));
                stock.insertOne(session, new Document("_id", "b"));
                throw new IllegalStateException("changed my mind");
            }));
            assertEquals("changed my mind", aborted.getMessage());
            assertEquals(0, orders.countDocuments(Filters.eq("_id", 2)) + stock.countDocuments(Filters.eq("_id", "b")));
        }
    }

    private static void changeStream(MongoCollection<Document> events) {
        ChangeStreamDocument<Document> insert, update, delete;
        try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> stream =
                events.watch().maxAwaitTime(100, TimeUnit.MILLISECONDS).cursor()) {
            events.insertOne(new Document("_id", 1).append("n", 1));
            events.updateOne(Filters.eq("_id", 1), Updates.set("n", 2));
            events.deleteOne(Filters.eq("_id", 1));
            insert = stream.next();
            update = stream.next();
            delete = stream.next();
        }
        assertEquals(List.of(OperationType.INSERT, OperationType.UPDATE, OperationType.DELETE),
                List.of(insert.getOperationType(), update.getOperationType(), delete.getOperationType()));
        assertEquals(new Document("_id", 1).append("n", 1), insert.getFullDocument());
        assertEquals(new BsonDocument("n", new BsonInt32(2)), update.getUpdateDescription().getUpdatedFields());
        try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> resumed =
                events.watch().resumeAfter(insert.getResumeToken()).cursor()) {
            ChangeStreamDocument<Document> first = resumed.next();
            ChangeStreamDocument<Document> second = resumed.next();
            assertEquals(List.of(OperationType.UPDATE, OperationType.DELETE),
                    List.of(first.getOperationType(), second.getOperationType()));
            assertEquals(List.of(update.getResumeToken(), delete.getResumeToken()),
                    List.of(first.getResumeToken(), second.getResumeToken()));
        }
    }

    private void run(boolean secure) throws Exception {
        String certs = System.getenv("STRATA_TLS_DIR");
        List<String> extra = List.of();
        if (secure) {
            assertNotNull(certs, "STRATA_TLS_DIR is not set");
            extra = List.of("--auth", "--tlsMode", "requireTLS",
                    "--tlsCertificateKeyFile", Path.of(certs, "server.pem").toString(),
                    "--tlsCAFile", Path.of(certs, "ca.pem").toString(), "--tlsAllowConnectionsWithoutCertificates");
        }
        Strata server = Strata.start(extra);
        try {
            String uri = "mongodb://" + server.address() + "/?directConnection=true&compressors=zlib";
            if (!secure) {
                try (MongoClient client = MongoClients.create(uri)) {
                    exercise(client);
                }
                return;
            }
            SSLContext tls = trusting(Path.of(certs, "ca.pem"));
            try (MongoClient setup = MongoClients.create(settings(uri, tls, null))) {
                setup.getDatabase("admin").runCommand(new Document("createUser", "admin")
                        .append("pwd", PASSWORD).append("roles", List.of("root")));
            }
            MongoCredential admin = MongoCredential.createScramSha256Credential("admin", "admin", PASSWORD.toCharArray());
            try (MongoClient client = MongoClients.create(settings(uri, tls, admin))) {
                Document status = client.getDatabase("admin").runCommand(new Document("connectionStatus", 1));
                assertEquals("admin", status.get("authInfo", Document.class)
                        .getList("authenticatedUsers", Document.class).get(0).getString("user"));
                exercise(client);
            }
        } finally {
            server.stop();
        }
    }

    private static MongoClientSettings settings(String uri, SSLContext tls, MongoCredential credential) {
        MongoClientSettings.Builder builder = MongoClientSettings.builder()
                .applyConnectionString(new ConnectionString(uri))
                .applyToSslSettings(ssl -> ssl.enabled(true).context(tls));
        if (credential != null) {
            builder.credential(credential);
        }
        return builder.build();
    }

    /** A TLS context that trusts the test CA only. */
    private static SSLContext trusting(Path caFile) throws Exception {
        KeyStore roots = KeyStore.getInstance(KeyStore.getDefaultType());
        roots.load(null, null);
        try (InputStream pem = Files.newInputStream(caFile)) {
            roots.setCertificateEntry("strata-test-ca", CertificateFactory.getInstance("X.509").generateCertificate(pem));
        }
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(roots);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, trust.getTrustManagers(), null);
        return context;
    }

    private void exercise(MongoClient client) {
        MongoCollection<Document> items = client.getDatabase("javasmoke").getCollection("items");
        List<Document> documents = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            documents.add(new Document("sku", "s" + i).append("qty", i));
        }
        assertEquals(300, items.insertMany(documents).getInsertedIds().size());
        assertEquals("sku_1", items.createIndex(Indexes.ascending("sku"), new IndexOptions().unique(true)));
        assertEquals(42, items.find(Filters.eq("sku", "s42")).first().getInteger("qty"));
        List<Document> many = items.find(Filters.gte("qty", 100)).batchSize(25).into(new ArrayList<>());
        assertEquals(200, many.size());
        assertEquals(10, items.updateMany(Filters.lt("qty", 10), Updates.set("low", true)).getModifiedCount());
        assertEquals(10, items.deleteMany(Filters.eq("low", true)).getDeletedCount());
        Document group = items.aggregate(List.of(
                Aggregates.match(Filters.gte("qty", 290)),
                Aggregates.group(null, Accumulators.sum("count", 1)))).first();
        assertEquals(10, group.getInteger("count"));
        MongoWriteException duplicate = assertThrows(MongoWriteException.class,
                () -> items.insertOne(new Document("sku", "s42")));
        assertEquals(11000, duplicate.getError().getCode());
        assertEquals(ErrorCategory.DUPLICATE_KEY, duplicate.getError().getCategory());
    }
}
