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
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Accumulators;
import com.mongodb.client.model.Aggregates;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Updates;
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
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/** Goal: the Java sync driver's everyday calls work against strata. Method: start the binary
 * on a free port with a temp dbpath, run connect, insertMany, createIndex, find on the index,
 * update, delete, aggregate and a duplicate key, then SIGTERM and expect exit 0; once against a
 * plain server and once with --auth and requireTLS (SCRAM over TLS, with the CA and
 * certificates in $STRATA_TLS_DIR that ../run makes). */
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

    private void run(boolean secure) throws Exception {
        String bin = System.getenv("STRATA_BIN");
        assertNotNull(bin, "STRATA_BIN is not set");
        String certs = System.getenv("STRATA_TLS_DIR");
        Path dbpath = Files.createTempDirectory("strata-java");
        List<String> command = new ArrayList<>(List.of(bin, "serve", "--dbpath", dbpath.toString(), "--port", "0"));
        if (secure) {
            assertNotNull(certs, "STRATA_TLS_DIR is not set");
            command.addAll(List.of("--auth", "--tlsMode", "requireTLS",
                    "--tlsCertificateKeyFile", Path.of(certs, "server.pem").toString(),
                    "--tlsCAFile", Path.of(certs, "ca.pem").toString(), "--tlsAllowConnectionsWithoutCertificates"));
        }
        ProcessBuilder builder = new ProcessBuilder(command);
        builder.environment().put("RUST_LOG", "warn");
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        Process process = builder.start();
        try {
            String line = new BufferedReader(new InputStreamReader(process.getInputStream())).readLine();
            assertTrue(line != null && line.startsWith("strata listening on "), "first line: " + line);
            String address = line.substring("strata listening on ".length()).trim();
            String uri = "mongodb://" + address + "/?directConnection=true&compressors=zlib";
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
            process.destroy();
            assertTrue(process.waitFor(60, TimeUnit.SECONDS));
            assertEquals(0, process.exitValue());
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
