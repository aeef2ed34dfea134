package strata;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.mongodb.ErrorCategory;
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
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/** Goal: the Java sync driver's everyday calls work against strata. Method: start the binary
 * on a free port with a temp dbpath, run connect, insertMany, createIndex, find on the index,
 * update, delete, aggregate and a duplicate key, then SIGTERM and expect exit 0. */
class SmokeTest {
    @Test
    void smoke() throws Exception {
        String bin = System.getenv("STRATA_BIN");
        assertNotNull(bin, "STRATA_BIN is not set");
        Path dbpath = Files.createTempDirectory("strata-java");
        ProcessBuilder builder = new ProcessBuilder(bin, "serve", "--dbpath", dbpath.toString(), "--port", "0");
        builder.environment().put("RUST_LOG", "warn");
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        Process process = builder.start();
        try {
            String line = new BufferedReader(new InputStreamReader(process.getInputStream())).readLine();
            assertTrue(line != null && line.startsWith("strata listening on "), "first line: " + line);
            String address = line.substring("strata listening on ".length()).trim();
            try (MongoClient client = MongoClients.create("mongodb://" + address + "/?directConnection=true&compressors=zlib")) {
                exercise(client);
            }
        } finally {
            process.destroy();
            assertTrue(process.waitFor(60, TimeUnit.SECONDS));
            assertEquals(0, process.exitValue());
        }
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
