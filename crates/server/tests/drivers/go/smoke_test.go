// Smoke test of the official Go driver against the real strata binary ($STRATA_BIN): connect,
// insert many, create an index, find on it, update, delete, aggregate, a duplicate-key error;
// once against a plain server and once against one with --auth and requireTLS, logging in with
// SCRAM over TLS with the certificates in $STRATA_TLS_DIR (made by ../run). Then, on a one-member
// replica set, a transaction and a change stream (TestReplicaSet).
package smoke

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// startStrata starts the server and returns the URI options that reach it (for a secure
// server: TLS with the test CA, and the root user it creates through the localhost exception),
// with extra arguments after the usual ones.
func startStrata(t *testing.T, secure bool, extra ...string) (string, string, *exec.Cmd) {
	bin := os.Getenv("STRATA_BIN")
	if bin == "" {
		t.Fatal("STRATA_BIN is not set")
	}
	args := append([]string{"serve", "--dbpath", t.TempDir(), "--port", "0", "--cache-size", "64MiB"}, extra...)
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

// stop sends SIGTERM and expects a clean exit.
func stop(t *testing.T, cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("strata exit: %v", err)
	}
}

func smoke(t *testing.T, secure bool) {
	address, uriOptions, cmd := startStrata(t, secure)
	defer stop(t, cmd)
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

// changeEvent is the part of a change event the replica-set scenario checks.
type changeEvent struct {
	ID                bson.Raw `bson:"_id"`
	OperationType     string   `bson:"operationType"`
	FullDocument      bson.M   `bson:"fullDocument"`
	UpdateDescription struct {
		UpdatedFields bson.M `bson:"updatedFields"`
	} `bson:"updateDescription"`
}

// TestReplicaSet: on a one-member replica set (--replSet, then replSetInitiate), a transaction
// through session.WithTransaction writes to two collections that another client sees only after
// the commit, a transaction whose callback fails leaves nothing, and a change stream on a
// collection reports an insert, an update and a delete, then resumes after the first one.
func TestReplicaSet(t *testing.T) {
	address, uriOptions, cmd := startStrata(t, false, "--replSet", "rs0")
	defer stop(t, cmd)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	direct, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + address + "/?" + uriOptions))
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{}}}).Err(); err != nil {
		t.Fatal(err)
	}
	_ = direct.Disconnect(ctx)
	connect := func() *mongo.Client {
		client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + address + "/?replicaSet=rs0"))
		if err != nil {
			t.Fatal(err)
		}
		return client
	}
	client, other := connect(), connect()
	defer client.Disconnect(ctx)
	defer other.Disconnect(ctx)
	orders, stock := client.Database("gotx").Collection("orders"), client.Database("gotx").Collection("stock")
	seen := func() (found []bson.M) {
		for _, probe := range []struct {
			coll string
			id   any
		}{{"orders", 1}, {"stock", "a"}} {
			var doc bson.M
			err := other.Database("gotx").Collection(probe.coll).FindOne(ctx, bson.D{{Key: "_id", Value: probe.id}}).Decode(&doc)
			if err != nil && err != mongo.ErrNoDocuments {
				t.Fatal(err)
			}
			found = append(found, doc)
		}
		return found
	}
	session, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer session.EndSession(ctx)
	var before []bson.M
	_, err = session.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "sku", Value: "a"}}); err != nil {
			return nil, err
		}
		if _, err := stock.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "reserved", Value: 1}}); err != nil {
			return nil, err
		}
		before = seen()
		return nil, nil
	})
	if err != nil || !reflect.DeepEqual(before, []bson.M{nil, nil}) {
		t.Fatalf("transaction: %v; another client saw %v before the commit", err, before)
	}
	after := seen()
	if want := []bson.M{{"_id": int32(1), "sku": "a"}, {"_id": "a", "reserved": int32(1)}}; !reflect.DeepEqual(after, want) {
		t.Fatalf("after the commit another client saw %v, want %v", after, want)
	}
	changedMyMind := errors.New("changed my mind")
	_, err = session.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
			return nil, err
		}
		if _, err := stock.InsertOne(ctx, bson.D{{Key: "_id", Value: "b"}}); err != nil {
			return nil, err
		}
		return nil, changedMyMind
	})
	if !errors.Is(err, changedMyMind) {
		t.Fatalf("aborted transaction: %v", err)
	}
	left1, _ := orders.CountDocuments(ctx, bson.D{{Key: "_id", Value: 2}})
	left2, _ := stock.CountDocuments(ctx, bson.D{{Key: "_id", Value: "b"}})
	if left1+left2 != 0 {
		t.Fatalf("the aborted transaction left %d + %d documents", left1, left2)
	}

	events := client.Database("gotx").Collection("events")
	next := func(stream *mongo.ChangeStream) (event changeEvent) {
		if !stream.Next(ctx) {
			t.Fatalf("change stream: %v", stream.Err())
		}
		if err := stream.Decode(&event); err != nil {
			t.Fatal(err)
		}
		return event
	}
	stream, err := events.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	insert, update, remove := next(stream), next(stream), next(stream)
	_ = stream.Close(ctx)
	if kinds := []string{insert.OperationType, update.OperationType, remove.OperationType}; !reflect.DeepEqual(kinds, []string{"insert", "update", "delete"}) {
		t.Fatalf("operation types %v", kinds)
	}
	if want := (bson.M{"_id": int32(1), "n": int32(1)}); !reflect.DeepEqual(insert.FullDocument, want) {
		t.Fatalf("insert fullDocument %v", insert.FullDocument)
	}
	if want := (bson.M{"n": int32(2)}); !reflect.DeepEqual(update.UpdateDescription.UpdatedFields, want) {
		t.Fatalf("updatedFields %v", update.UpdateDescription.UpdatedFields)
	}
	resumed, err := events.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(insert.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close(ctx)
	again := []changeEvent{next(resumed), next(resumed)}
	if again[0].OperationType != "update" || again[1].OperationType != "delete" ||
		!bytes.Equal(again[0].ID, update.ID) || !bytes.Equal(again[1].ID, remove.ID) {
		t.Fatalf("resumed after the insert: %+v", again)
	}
}
