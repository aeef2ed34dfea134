//! Goal: every commit acknowledged with `Immediate` durability survives `kill -9` of the
//! process, and nothing else changes.
//!
//! Method: the test re-runs its own binary as a child (selected by an environment variable)
//! that commits forever, each commit writing key `i` into two trees at once, printing `ack i`
//! after `commit` returns. The parent kills it with SIGKILL after a random moment, reopens the
//! engine on the real file system, runs `verify()`, and checks that every acknowledged key is
//! in both trees with its value, that at most the one commit in flight beyond them is there (in
//! both trees or neither), and that nothing else is. It repeats, the child continuing from where
//! the data says it is. The seed is printed; `STRATA_SEED` replays a run.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use storage::{Durability, Engine, Options};

const CHILD_ENV: &str = "STRATA_KILL_TEST_CHILD_DIR";
const ROUNDS: usize = 30;

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 200) as usize)).into_bytes()
}

fn key(i: u64) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

fn options() -> Options {
    // Small nodes and cache, frequent checkpoints: kills land in flushes, evictions and
    // checkpoints, not only between commits.
    Options {
        node_size_bytes: 64 << 10,
        basement_size_bytes: 8 << 10,
        cache_size_bytes: 1 << 20,
        checkpoint_interval: Duration::from_millis(150),
        ..Options::default()
    }
}

/// The child: commits from the first missing key on, forever.
fn child(dir: &Path) {
    let engine = Engine::open(dir, options()).expect("child open");
    let trees = ["a", "b"].map(|name| engine.tree(name).unwrap_or_else(|| engine.create_tree(name).expect("create")));
    let start = engine.snapshot().iter(trees[0]).count() as u64;
    println!("ready {start}");
    for i in start.. {
        let mut txn = engine.begin();
        txn.put(trees[0], key(i), value(i));
        txn.put(trees[1], key(i), value(i));
        txn.commit(Durability::Immediate).expect("commit");
        println!("ack {i}");
    }
}

#[test]
fn acknowledged_commits_survive_kill_9() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(Path::new(&dir));
        return;
    }
    let seed: u64 = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = scratch_dir();
    let mut acked_total: Option<u64> = None;
    for round in 0..ROUNDS {
        let started = Instant::now();
        let acked = run_child_and_kill(&dir, Duration::from_millis(rng.gen_range(50..400)));
        acked_total = acked.or(acked_total);
        let killed = started.elapsed();
        check(&dir, acked_total, round, seed);
        println!(
            "round {round}: last ack {acked:?}, child ran {killed:?}, check took {:?}",
            started.elapsed() - killed
        );
    }
    assert!(acked_total.unwrap_or(0) > 0, "the child acknowledged commits");
    let _ = std::fs::remove_dir_all(&dir);
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-kill-{}-{}", std::process::id(), rand::random::<u32>()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs the child for about `run_for` after it is ready, kills it with SIGKILL, and returns the
/// last key it acknowledged.
fn run_child_and_kill(dir: &Path, run_for: Duration) -> Option<u64> {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args(["--exact", "acknowledged_commits_survive_kill_9", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut last_ack = None;
    let mut deadline: Option<Instant> = None;
    let started = Instant::now();
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) || now - started > Duration::from_secs(30) {
            break;
        }
        match receiver.recv_timeout(Duration::from_millis(5)) {
            // libtest may print its own "test ... " prefix on the same line.
            Ok(line) if line.contains("ready ") => deadline = Some(Instant::now() + run_for),
            Ok(line) => {
                if let Some(i) = line.strip_prefix("ack ").and_then(|n| n.parse::<u64>().ok()) {
                    last_ack = Some(i);
                }
            }
            Err(_) => {}
        }
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // Acks printed before the kill may still be in the pipe.
    let _ = reader.join();
    while let Ok(line) = receiver.try_recv() {
        if let Some(i) = line.strip_prefix("ack ").and_then(|n| n.parse::<u64>().ok()) {
            last_ack = Some(i);
        }
    }
    last_ack
}

fn check(dir: &Path, acked: Option<u64>, round: usize, seed: u64) {
    let engine = Engine::open(dir, options()).unwrap_or_else(|e| panic!("round {round}, seed {seed}: reopen: {e}"));
    engine.verify().unwrap_or_else(|e| panic!("round {round}, seed {seed}: verify: {e}"));
    let snapshot = engine.snapshot();
    let mut counts = Vec::new();
    for name in ["a", "b"] {
        let Some(tree) = engine.tree(name) else {
            assert!(acked.is_none(), "round {round}: tree {name} missing after acknowledged commits");
            return;
        };
        let mut expected = 0u64;
        for item in snapshot.iter(tree) {
            let (k, v) = item.expect("scan");
            assert_eq!(k, key(expected), "round {round}, seed {seed}: keys are 0..n without gaps");
            assert_eq!(v, value(expected), "round {round}, seed {seed}: value of key {expected}");
            expected += 1;
        }
        counts.push(expected);
    }
    assert_eq!(counts[0], counts[1], "round {round}, seed {seed}: a commit is in both trees or neither");
    if let Some(acked) = acked {
        assert!(counts[0] > acked, "round {round}, seed {seed}: lost acknowledged key {acked} (have {})", counts[0]);
        assert!(counts[0] <= acked + 2, "round {round}, seed {seed}: more commits than were attempted");
    }
    drop(snapshot);
    engine.close().expect("close");
}
