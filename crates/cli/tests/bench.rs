//! `strata bench`: every workload at a tiny scale against a Strata server the bench starts
//! itself (this binary's `serve`), its results files checked; `compare`; `--uri` against a server
//! the test started, checked through the driver; `--memory-limit` in a cgroup where this machine
//! has one, and its clear error where it has not.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Strata, temp_dir};
use mongodb::bson::doc;
use serde_json::Value;

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata")).arg("bench").args(args).output().unwrap()
}

/// Runs a workload into `out` as `name`, asserts it succeeded, returns the parsed JSON.
fn run_workload(out: &Path, name: &str, args: &[&str]) -> Value {
    let out_arg = out.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--out", &out_arg, "--name", name]);
    let output = bench(&all);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "strata bench {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    check_files(out, name)
}

/// The four files exist and are what they claim; returns the JSON.
fn check_files(out: &Path, name: &str) -> Value {
    let file = |extension: &str| -> PathBuf { out.join(format!("{name}.{extension}")) };
    let json: Value = serde_json::from_str(&std::fs::read_to_string(file("json")).unwrap()).unwrap();
    let csv = std::fs::read_to_string(file("csv")).unwrap();
    assert!(csv.starts_with("record,series,name,docs,elapsed_seconds,value,unit\n"), "{csv}");
    let interval_rows = csv.lines().filter(|line| line.starts_with("interval_rate,")).count();
    assert!(interval_rows >= json["series"].as_array().unwrap().len(), "{csv}");
    let svg = std::fs::read_to_string(file("svg")).unwrap();
    let x_axis = if json["workload"] == "clients" { "connections" } else { "documents inserted" };
    assert!(svg.starts_with("<svg") && svg.contains(x_axis), "not an SVG plot");
    let png = std::fs::read(file("png")).unwrap();
    assert!(png.len() > 10_000 && png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG plot");
    assert_eq!(json["errors"], Value::Array(vec![]), "errors in {name}");
    let by_uri = json["command_line"].as_array().unwrap().iter().any(|arg| arg == "--uri");
    assert_eq!(json["server"]["started_by_bench"].as_bool(), Some(!by_uri));
    json
}

/// Each series inserted `expected[i]` documents, and the server counted exactly that many.
fn check_series(json: &Value, expected: &[(&str, u64)]) {
    let series = json["series"].as_array().unwrap();
    let names: Vec<&str> = series.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, expected.iter().map(|(name, _)| *name).collect::<Vec<_>>());
    for (series, (name, docs)) in series.iter().zip(expected) {
        assert_eq!(series["docs"].as_u64(), Some(*docs), "{name}");
        assert_eq!(series["server_count"].as_u64(), Some(*docs), "{name}");
        assert_eq!(series["partial"], Value::Bool(false), "{name}");
        let intervals = series["intervals"].as_array().unwrap();
        assert!(!intervals.is_empty(), "{name}");
        assert_eq!(intervals.last().unwrap()["docs"].as_u64(), Some(*docs), "{name}");
        assert!(series["rate"].as_f64().unwrap() > 0.0 && series["exit_velocity"].as_f64().unwrap() > 0.0, "{name}");
    }
}

fn measurement(json: &Value, series: &str, name: &str) -> f64 {
    json["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["series"] == series && m["name"] == name)
        .unwrap_or_else(|| panic!("no measurement {series} / {name}"))["value"]
        .as_f64()
        .unwrap()
}

/// Goal: bio runs both series in sixths with the find after each, and compare reads two runs;
/// method: 6,000 documents twice, then compare a run with itself (every ratio 1.00x) and with
/// the other.
#[test]
fn bio_and_compare() {
    let out = temp_dir("bench-bio");
    let json = run_workload(&out, "a", &["bio", "--scale", "0.0001"]);
    check_series(&json, &[("without index", 6_000), ("with index on name", 6_000)]);
    assert_eq!(json["series"][0]["intervals"].as_array().unwrap().len(), 6);
    assert!(measurement(&json, "with index on name", "find by name after sixth 6, run 2") > 0.0);
    run_workload(&out, "b", &["bio", "--scale", "0.0001", "--indexes", "with"]);

    let same =
        bench(&["compare", &out.join("a.json").display().to_string(), &out.join("a.json").display().to_string()]);
    assert!(same.status.success());
    let same = String::from_utf8(same.stdout).unwrap();
    let ratios: Vec<&str> =
        same.lines().filter_map(|line| line.split_whitespace().last()).filter(|w| w.ends_with('x')).collect();
    assert!(ratios.len() >= 8 && ratios.iter().all(|ratio| *ratio == "1.00x"), "{same}");

    let other =
        bench(&["compare", &out.join("a.json").display().to_string(), &out.join("b.json").display().to_string()]);
    let other = String::from_utf8(other.stdout).unwrap();
    assert!(other.contains("series only in A: without index") && other.contains("with index on name"), "{other}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// Goal: fudge times building and persisting both sizes in both forms.
#[test]
fn fudge() {
    let out = temp_dir("bench-fudge");
    let json = run_workload(&out, "fudge", &["fudge", "--scale", "0.001"]);
    check_series(
        &json,
        &[
            ("small bson::Document", 1_000),
            ("small raw BSON", 1_000),
            ("large bson::Document", 100),
            ("large raw BSON", 100),
        ],
    );
    assert!(measurement(&json, "large raw BSON", "build seconds") > 0.0);
    std::fs::remove_dir_all(&out).unwrap();
}

/// Goal: pets inserts one per call and in batches, with and without the index, and its queries
/// return the counts they must (the bench fails the run otherwise).
#[test]
fn pets() {
    let out = temp_dir("bench-pets");
    let json = run_workload(&out, "pets", &["pets", "--scale", "0.001", "--queries", "5"]);
    check_series(
        &json,
        &[
            ("one per call, no index", 2_500),
            ("one per call, index on number", 2_500),
            ("batches of 1000, no index", 2_500),
            ("batches of 1000, index on number", 2_500),
        ],
    );
    assert!(measurement(&json, "batches of 1000, index on number", "range query on number, mean") > 0.0);
    std::fs::remove_dir_all(&out).unwrap();
}

/// Goal: roundtrip measures ping, insert_one and find_one on the server under test and on a
/// baseline binary started in the same run (here the same binary), with the server's CPU per
/// call read from /proc for both, and point reads beside a batch writer.
#[test]
fn roundtrip() {
    let out = temp_dir("bench-roundtrip");
    let binary = env!("CARGO_BIN_EXE_strata");
    let json = run_workload(
        &out,
        "roundtrip",
        &["roundtrip", "--calls", "300", "--rounds", "2", "--baseline", binary, "--beside-writer"],
    );
    for server in ["strata", "baseline"] {
        for operation in ["ping", "insert_one", "find_one"] {
            assert!(measurement(&json, server, &format!("{operation} calls/s")) > 0.0, "{server} {operation}");
            assert!(measurement(&json, server, &format!("{operation} server cpu")) >= 0.0, "{server} {operation}");
        }
        assert!(measurement(&json, server, "find_one beside writer p99") > 0.0, "{server}");
        assert!(measurement(&json, server, "writer beside reads") > 0.0, "{server}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// Goal: clients runs each level with w:1 and j:true, every insert counted by the server (the
/// workload checks), one plotted point per level; idle connections are measured.
#[test]
fn clients() {
    let out = temp_dir("bench-clients");
    let json = run_workload(&out, "clients", &["clients", "--connections", "1,8", "--seconds", "0.3", "--idle", "200"]);
    let series = json["series"].as_array().unwrap();
    assert_eq!(series.len(), 2);
    for series in series {
        let points: Vec<u64> =
            series["intervals"].as_array().unwrap().iter().map(|i| i["docs"].as_u64().unwrap()).collect();
        assert_eq!(points, vec![1, 8], "{series}");
    }
    for concern in ["w:1", "j:true"] {
        assert!(measurement(&json, concern, "8 connections, inserts/s") > 0.0, "{concern}");
        assert!(measurement(&json, concern, "8 connections, p99") > 0.0, "{concern}");
    }
    assert!(measurement(&json, "j:true", "8 connections, commits per log sync") >= 1.0);
    // Idle connections hold no thread: once the pool's keep-alive has passed, the server has no
    // more threads than before they connected.
    let threads = measurement(&json, "idle", "200 idle connections, server threads");
    assert!(
        threads <= measurement(&json, "idle", "server threads before") + 2.0,
        "{threads} threads for idle connections"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// Goal: both iibench variants, w:1 and j:true, with and without indexes, and the query thread
/// runs its queries without an error from the server.
#[test]
fn iibench() {
    let out = temp_dir("bench-iibench");
    let json = run_workload(&out, "iibench", &["iibench", "--scale", "0.0001", "--query-thread", "--query-begin", "0"]);
    let expected: Vec<(String, u64)> = ["iibench", "post"]
        .iter()
        .flat_map(|variant| {
            let indexes = if *variant == "iibench" { "3 indexes" } else { "4 indexes" };
            ["w:1", "j:true"].into_iter().flat_map(move |write| {
                [format!("{variant}, {write}, no index"), format!("{variant}, {write}, {indexes}")]
            })
        })
        .map(|name| (name, 10_000))
        .collect();
    let expected: Vec<(&str, u64)> = expected.iter().map(|(name, docs)| (name.as_str(), *docs)).collect();
    check_series(&json, &expected);
    assert!(measurement(&json, "iibench, w:1, 3 indexes", "queries") >= 1.0);
    std::fs::remove_dir_all(&out).unwrap();
}

/// Goal: stores' two inserters fill the range from both ends and the select client finds every
/// record by field1 and by field2.
#[test]
fn stores() {
    let out = temp_dir("bench-stores");
    let json = run_workload(&out, "stores", &["stores", "--scale", "0.0005"]);
    check_series(&json, &[("two inserters, no index", 2_500), ("two inserters, field1 field2 n indexed", 2_500)]);
    assert_eq!(measurement(&json, "two inserters, field1 field2 n indexed", "select client records found"), 5_000.0);
    std::fs::remove_dir_all(&out).unwrap();
}

/// Goal: --uri benchmarks a server the bench did not start, and leaves the last series' data
/// there; method: a test server, pets with batches and the index, then count through the driver.
#[tokio::test]
async fn against_a_uri() {
    let dir = temp_dir("bench-uri");
    let server = Strata::start(&dir.join("db"));
    let out = dir.join("out");
    let json = run_workload(
        &out,
        "pets",
        &[
            "pets",
            "--uri",
            &server.uri(),
            "--scale",
            "0.0004",
            "--modes",
            "batch",
            "--indexes",
            "with",
            "--db",
            "petsdb",
        ],
    );
    check_series(&json, &[("batches of 1000, index on number", 1_000)]);
    let client = mongodb::Client::with_uri_str(server.uri()).await.unwrap();
    let users = client.database("petsdb").collection::<mongodb::bson::Document>("users");
    assert_eq!(users.count_documents(doc! {}).await.unwrap(), 1_000);
    assert_eq!(users.count_documents(doc! { "number": 7 }).await.unwrap(), 5);
    let indexes = users.list_index_names().await.unwrap();
    assert!(indexes.contains(&"number_1".to_owned()), "{indexes:?}");
    drop(client);
    assert!(server.terminate().success());

    let refused = bench(&["pets", "--uri", "mongodb://127.0.0.1:1", "--memory-limit", "256MiB"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("apply to the server the bench starts"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: --memory-limit runs the started server in a memory cgroup and reports its peak, or says
/// clearly that this machine has no cgroup for it.
#[test]
fn memory_limit() {
    let out = temp_dir("bench-memory");
    let args = [
        "iibench",
        "--scale",
        "0.00002",
        "--variants",
        "tokutek",
        "--write-concerns",
        "w1",
        "--memory-limit",
        "256MiB",
    ];
    let out_arg = out.display().to_string();
    let output = bench(&[&args[..], &["--out", &out_arg, "--name", "capped"]].concat());
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        let json = check_files(&out, "capped");
        let peak = json["server"]["peak_memory_bytes"].as_u64().expect("a peak under --memory-limit");
        assert!(peak > 0 && peak <= 256 << 20, "peak {peak}");
        assert_eq!(json["server"]["memory_limit"], "256MiB");
    } else {
        assert!(stderr.contains("cgroup"), "the error should name the missing cgroup: {stderr}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
