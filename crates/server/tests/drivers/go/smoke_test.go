// Smoke test of the official Go driver against the real strata binary ($STRATA_BIN): connect,
// insert many, create an index, find on it, update, delete, aggregate, a duplicate-key error;
// once against a plain server and once against one with --auth and requireTLS, logging in with
// SCRAM over TLS with the certificates in $STRATA_TLS_DIR (made by ../run).
package smoke

import (
	"bufio"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// startStrata starts the server and returns the URI options that reach it (for a secure
// server: TLS with the test CA, and the root user it creates through the localhost exception).
func startStrata(t *testing.T, secure bool) (string, string, *exec.Cmd) {
	bin := os.Getenv("STRATA_BIN")
	if bin == "" {
		t.Fatal("STRATA_BIN is not set")
	}
	args := []string{"serve", "--dbpath", t.TempDir(), "--port", "0", "--cache-size", "64MiB"}
	certs := os.Getenv("STRATA_TLS_DIR")
	if secure {
		if certs == "" {
			t.Fatal("STRATA_TLS_DIR is not set")
		}
		args = append(args, "--auth", "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", filepath.Join(certs, "server.pem"),
			"--tlsCAFile", filepath.Join(certs, "ca.pem"), "--tlsAllowConnectionsWithoutCertificates")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "strata listening on ") {
		t.Fatalf("unexpected first line %q: %v", line, err)
	}
	address := strings.TrimSpace(strings.TrimPrefix(line, "strata listening on "))
	if !secure {
		return address, "directConnection=true", cmd
	}
	tlsOptions := "directConnection=true&tls=true&tlsCAFile=" + url.QueryEscape(filepath.Join(certs, "ca.pem"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	setup, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + address + "/?" + tlsOptions))
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Disconnect(ctx)
	create := bson.D{{Key: "createUser", Value: "admin"}, {Key: "pwd", Value: "a long secret"}, {Key: "roles", Value: bson.A{"root"}}}
	if err := setup.Database("admin").RunCommand(ctx, create).Err(); err != nil {
		t.Fatal(err)
	}
	return url.UserPassword("admin", "a long secret").String() + "@" + address, tlsOptions + "&authSource=admin", cmd
}

func TestSmoke(t *testing.T) {
	t.Run("plain", func(t *testing.T) { smoke(t, false) })
	t.Run("auth+TLS", func(t *testing.T) { smoke(t, true) })
}

func smoke(t *testing.T, secure bool) {
	address, uriOptions, cmd := startStrata(t, secure)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("strata exit: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + address + "/?" + uriOptions + "&compressors=zstd,zlib,snappy"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	if err := client.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	coll := client.Database("gosmoke").Collection("people")
	docs := make([]any, 0, 300)
	for i := 0; i < 300; i++ {
		docs = append(docs, bson.D{{Key: "name", Value: "n" + string(rune('a'+i%26)) + strings.Repeat("x", i%7)}, {Key: "n", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	name, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}, Options: options.Index().SetUnique(true)})
	if err != nil || name != "n_1" {
		t.Fatalf("createIndex: %v %v", name, err)
	}
	var found bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "n", Value: 42}}).Decode(&found); err != nil {
		t.Fatal(err)
	}
	cursor, err := coll.Find(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 100}}}}, options.Find().SetBatchSize(30))
	if err != nil {
		t.Fatal(err)
	}
	var all []bson.M
	if err := cursor.All(ctx, &all); err != nil || len(all) != 200 {
		t.Fatalf("find: %d %v", len(all), err)
	}
	updated, err := coll.UpdateMany(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$lt", Value: 10}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "low", Value: true}}}})
	if err != nil || updated.ModifiedCount != 10 {
		t.Fatalf("update: %+v %v", updated, err)
	}
	deleted, err := coll.DeleteMany(ctx, bson.D{{Key: "low", Value: true}})
	if err != nil || deleted.DeletedCount != 10 {
		t.Fatalf("delete: %+v %v", deleted, err)
	}
	agg, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 290}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "count", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var groups []bson.M
	if err := agg.All(ctx, &groups); err != nil || len(groups) != 1 || groups[0]["count"] != int32(10) {
		t.Fatalf("aggregate: %v %v", groups, err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "n", Value: 42}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("expected a duplicate key error, got %v", err)
	}
	var writeErr mongo.WriteException
	if we, ok := err.(mongo.WriteException); ok {
		writeErr = we
	}
	if len(writeErr.WriteErrors) != 1 || writeErr.WriteErrors[0].Code != 11000 {
		t.Fatalf("write error shape: %+v", err)
	}
}
