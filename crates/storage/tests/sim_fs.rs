//! Goal: `SimFs` keeps the promises of the `io` contract and breaks every promise it does not
//! make: synced data and names survive any power loss; unsynced writes, creates and renames
//! sometimes vanish, tear or garble; injected faults fail exactly the calls asked for.
//!
//! Method: small workloads, then a crash under each of `SEEDS` seeds (or a fault at each call
//! index), checking every outcome. Assertion messages carry the seed that replays a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::io::{Fault, File, FileSystem, OpenMode, SimFs};

const SEEDS: u64 = 2000;

/// The whole content of `path`, or `None` if it does not exist.
fn read_all(fs: &SimFs, path: &str) -> Option<Vec<u8>> {
    let file = match fs.open(Path::new(path), OpenMode::Existing) {
        Ok(file) => file,
        Err(error) if error.raw_os_error() == Some(2) => return None,
        Err(error) => panic!("open {path}: {error}"),
    };
    let mut bytes = vec![0; usize::try_from(file.len().unwrap()).unwrap()];
    file.read_exact_at(&mut bytes, 0).unwrap();
    Some(bytes)
}

/// Creates `path` with `bytes`, syncs it, and syncs its directory: fully durable.
fn write_durable(fs: &SimFs, path: &str, bytes: &[u8]) -> Arc<dyn File> {
    let file = fs.open(Path::new(path), OpenMode::CreateNew).unwrap();
    file.write_all_at(bytes, 0).unwrap();
    file.sync().unwrap();
    fs.sync_dir(Path::new(path).parent().unwrap()).unwrap();
    file
}

/// A SimFs with a durable directory `/db`.
fn with_db_dir() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    fs
}

/// Goal: data synced with `File::sync` under a name synced with `sync_dir` survives every
/// crash, whatever unsynced work surrounds it.
/// Method: a durable file, then unsynced appends to it, an unsynced new file and an unsynced
/// rewrite of another durable file's tail; crash under every seed and check the synced bytes.
#[test]
fn synced_data_survives_every_crash() {
    let fs = with_db_dir();
    let synced: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    let file = write_durable(&fs, "/db/a", &synced);
    file.write_all_at(&[0xEE; 3000], 5000).unwrap();
    let other = write_durable(&fs, "/db/b", b"0123456789");
    other.write_all_at(b"xyz", 20).unwrap();
    let fresh = fs.open(Path::new("/db/c"), OpenMode::CreateNew).unwrap();
    fresh.write_all_at(b"unsynced", 0).unwrap();

    for seed in 0..SEEDS {
        let crashed = fs.crash(seed);
        crashed.verify();
        let a = read_all(&crashed, "/db/a").unwrap_or_else(|| panic!("seed {seed}: a lost"));
        assert_eq!(a.get(..5000), Some(&synced[..]), "seed {seed}");
        let b = read_all(&crashed, "/db/b").unwrap_or_else(|| panic!("seed {seed}: b lost"));
        assert_eq!(b.get(..10), Some(&b"0123456789"[..]), "seed {seed}");
    }
}

/// What a crash did to one unsynced write, judged by its bytes afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Applied,
    Dropped,
    Torn,
    Garbled,
}

fn judge(bytes: &[u8], offset: usize, expected: &[u8]) -> Outcome {
    let found: Vec<u8> = (offset..offset + expected.len()).map(|i| bytes.get(i).copied().unwrap_or(0)).collect();
    let intact = found.iter().zip(expected).take_while(|(a, b)| a == b).count();
    let rest_zero = found.get(intact..).unwrap().iter().all(|byte| *byte == 0);
    match (intact, rest_zero) {
        (n, _) if n == expected.len() => Outcome::Applied,
        (0, true) => Outcome::Dropped,
        (_, true) => Outcome::Torn,
        _ => Outcome::Garbled,
    }
}

/// Goal: unsynced writes are not durable: across seeds each one is sometimes applied,
/// dropped, torn and garbled, and they survive in any subset, not only as a prefix.
/// Method: four unsynced non-zero writes to a durable empty file; crash under every seed;
/// classify each write's bytes; count outcomes and look for a later write surviving an
/// earlier one's loss.
#[test]
fn unsynced_writes_vanish_tear_or_garble() {
    let fs = with_db_dir();
    let file = write_durable(&fs, "/db/log", b"");
    let writes: Vec<(usize, Vec<u8>)> = (0..4).map(|i| (i * 1500 + 100, vec![0x10 + i as u8; 1500])).collect();
    for (offset, bytes) in &writes {
        file.write_all_at(bytes, *offset as u64).unwrap();
    }

    let mut seen = BTreeMap::new();
    let mut out_of_order = false;
    for seed in 0..SEEDS {
        let bytes = read_all(&fs.crash(seed), "/db/log").expect("synced name survives");
        let outcomes: Vec<Outcome> = writes.iter().map(|(offset, expected)| judge(&bytes, *offset, expected)).collect();
        for outcome in &outcomes {
            *seen.entry(*outcome).or_insert(0) += 1;
        }
        out_of_order |= outcomes.first() == Some(&Outcome::Dropped) && outcomes.last() == Some(&Outcome::Applied);
        assert!(bytes.len() <= 6100, "seed {seed}: file grew past its writes");
    }
    for outcome in [Outcome::Applied, Outcome::Dropped, Outcome::Torn, Outcome::Garbled] {
        assert!(seen.get(&outcome).copied().unwrap_or(0) > SEEDS / 20, "{outcome:?}: {seen:?}");
    }
    assert!(out_of_order, "a later write never survived an earlier one's loss");
}

/// Goal: a created file whose directory was not synced may vanish; one whose directory was
/// synced never does, even with its own data synced in both cases.
/// Method: a durable file (its directory synced after its create), then a second file
/// created with its data synced but its directory not; crash under every seed.
#[test]
fn unsynced_create_may_vanish_synced_never() {
    let fs = with_db_dir();
    write_durable(&fs, "/db/kept", b"kept");
    let maybe = fs.open(Path::new("/db/maybe"), OpenMode::CreateNew).unwrap();
    maybe.write_all_at(b"maybe", 0).unwrap();
    maybe.sync().unwrap();

    let (mut present, mut vanished) = (0, 0);
    for seed in 0..SEEDS {
        let crashed = fs.crash(seed);
        assert_eq!(read_all(&crashed, "/db/kept").as_deref(), Some(&b"kept"[..]), "seed {seed}");
        match read_all(&crashed, "/db/maybe") {
            Some(bytes) => {
                assert_eq!(bytes, b"maybe", "seed {seed}: synced data under a kept name");
                present += 1;
            }
            None => vanished += 1,
        }
    }
    assert!(present > 0 && vanished > 0, "present {present}, vanished {vanished}");
}

/// Goal: a new directory is a name in its parent: files synced inside it survive only once
/// the parent is synced too.
/// Method: create /a/b, a durable file in it; crash before and after syncing /a and /.
#[test]
fn new_directory_needs_its_parent_synced() {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new("/a/b")).unwrap();
    write_durable(&fs, "/a/b/f", b"f");
    let lost = (0..SEEDS).filter(|seed| read_all(&fs.crash(*seed), "/a/b/f").is_none()).count();
    assert!(lost > 0, "an unsynced directory always survived");

    fs.sync_dir(Path::new("/a")).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    for seed in 0..SEEDS {
        assert_eq!(read_all(&fs.crash(seed), "/a/b/f").as_deref(), Some(&b"f"[..]), "{seed}");
    }
}

/// Goal: rename replaces atomically: after a crash the name holds the old durable file or
/// the new one, never nothing and never a mix (tmp may survive, but only if the rename did
/// not); after `sync_dir`, only the new one.
/// Method: durable `current` = "old"; write and sync `tmp` = "new", rename it over `current`;
/// crash under every seed; then sync the directory and crash again.
#[test]
fn rename_is_atomic() {
    let fs = with_db_dir();
    write_durable(&fs, "/db/current", b"old");
    let tmp = fs.open(Path::new("/db/tmp"), OpenMode::CreateNew).unwrap();
    tmp.write_all_at(b"new", 0).unwrap();
    tmp.sync().unwrap();
    fs.rename(Path::new("/db/tmp"), Path::new("/db/current")).unwrap();
    assert_eq!(fs.list(Path::new("/db")).unwrap(), ["current"]);

    let (mut old, mut new) = (0, 0);
    for seed in 0..SEEDS {
        let crashed = fs.crash(seed);
        match read_all(&crashed, "/db/current").as_deref() {
            Some(b"old") => old += 1,
            Some(b"new") => new += 1,
            other => panic!("seed {seed}: current = {other:?}"),
        }
        // The create of tmp may survive without the rename, never with it.
        if let Some(bytes) = read_all(&crashed, "/db/tmp") {
            assert_eq!(bytes, b"new", "seed {seed}");
            assert_eq!(read_all(&crashed, "/db/current").unwrap(), b"old", "seed {seed}");
        }
    }
    assert!(old > 0 && new > 0, "old {old}, new {new}");

    fs.sync_dir(Path::new("/db")).unwrap();
    for seed in 0..SEEDS {
        let crashed = fs.crash(seed);
        assert_eq!(crashed.list(Path::new("/db")).unwrap(), ["current"], "seed {seed}");
        assert_eq!(read_all(&crashed, "/db/current").unwrap(), b"new", "seed {seed}");
    }
}

/// Goal: the simulation catches the classic bug of renaming a file whose data was not synced:
/// the name can survive with torn, garbled or missing data.
/// Method: as `rename_is_atomic` but without syncing `tmp`, and with the directory synced.
#[test]
fn rename_of_unsynced_data_can_expose_garbage() {
    let fs = with_db_dir();
    write_durable(&fs, "/db/current", b"old");
    let tmp = fs.open(Path::new("/db/tmp"), OpenMode::CreateNew).unwrap();
    tmp.write_all_at(&[7; 4096], 0).unwrap();
    fs.rename(Path::new("/db/tmp"), Path::new("/db/current")).unwrap();
    fs.sync_dir(Path::new("/db")).unwrap();
    let broken = (0..SEEDS).filter(|seed| read_all(&fs.crash(*seed), "/db/current").unwrap() != [7; 4096]).count();
    assert!(broken > 0, "the unsynced rename target was always intact");
}

/// Goal: a crash is a pure function of the state and the seed, and its result is a new file
/// system that the old one's handles cannot touch.
/// Method: crash twice with one seed and compare; write through an old handle afterwards.
#[test]
fn crash_is_deterministic_and_independent() {
    let fs = with_db_dir();
    let file = write_durable(&fs, "/db/a", b"durable");
    file.write_all_at(&[1; 3000], 7).unwrap();
    for seed in 0..100 {
        assert_eq!(read_all(&fs.crash(seed), "/db/a"), read_all(&fs.crash(seed), "/db/a"));
    }
    let crashed = fs.crash(3);
    assert_eq!(crashed.calls(), 0);
    let before = read_all(&crashed, "/db/a");
    file.write_all_at(b"after", 0).unwrap();
    file.sync().unwrap();
    fs.open(Path::new("/db/b"), OpenMode::CreateNew).unwrap();
    assert_eq!(read_all(&crashed, "/db/a"), before);
    assert!(!crashed.exists(Path::new("/db/b")).unwrap());
}

/// The fault-sweep workload: independent calls, one of each method, after a setup that
/// opens `/db/a` and creates `/db/c` and `/db/e`. Returns each call's raw OS error.
fn workload(fs: &SimFs, file: &dyn File) -> Vec<Option<i32>> {
    fn code(result: std::io::Result<impl Sized>) -> Option<i32> {
        result.err().map(|error| error.raw_os_error().expect("an OS error"))
    }
    let mut buf = [0; 4];
    vec![
        code(file.write_all_at(b"abcd", 0)),
        code(file.read_at(&mut buf, 0)),
        code(file.sync()),
        code(file.len()),
        code(file.set_len(100)),
        code(fs.exists(Path::new("/db/a"))),
        code(fs.list(Path::new("/db"))),
        code(fs.create_dir_all(Path::new("/db/sub"))),
        code(fs.open(Path::new("/db/a"), OpenMode::Create)),
        code(fs.rename(Path::new("/db/c"), Path::new("/db/d"))),
        code(fs.remove(Path::new("/db/e"))),
        code(fs.sync_dir(Path::new("/db"))),
    ]
}

fn setup() -> (SimFs, Arc<dyn File>, u64) {
    let fs = with_db_dir();
    let file = fs.open(Path::new("/db/a"), OpenMode::CreateNew).unwrap();
    fs.open(Path::new("/db/c"), OpenMode::CreateNew).unwrap();
    fs.open(Path::new("/db/e"), OpenMode::CreateNew).unwrap();
    let base = fs.calls();
    (fs, file, base)
}

/// Goal: `fail_at(n, fault)` fails call n and only call n, with the fault's error, for every
/// method and every fault kind; failed calls are counted too.
/// Method: run the workload once to count its calls; then for each call index and fault,
/// run it again on a fresh file system with that one fault and check every call's result.
#[test]
fn each_fault_fails_exactly_its_call() {
    let (fs, file, base) = setup();
    assert_eq!(base, 5);
    assert!(workload(&fs, file.as_ref()).iter().all(Option::is_none));
    let count = fs.calls() - base;
    assert_eq!(count, 12, "one call per workload step");

    for fault in [Fault::Eio, Fault::Enospc, Fault::ShortWrite] {
        for n in 0..count {
            let (fs, file, base) = setup();
            fs.fail_at(base + n, fault);
            let results = workload(&fs, file.as_ref());
            for (call, result) in (0..).zip(&results) {
                let expected = match (call == n, fault, call) {
                    (false, _, _) => None,
                    (true, Fault::Eio, _) | (true, Fault::ShortWrite, 1..) => Some(5),
                    (true, Fault::Enospc, _) | (true, Fault::ShortWrite, 0) => Some(28),
                };
                assert_eq!(*result, expected, "{fault:?} at {n}, call {call}");
            }
            assert_eq!(fs.calls(), base + count, "{fault:?} at {n}");
            fs.verify();
        }
    }
}

/// Goal: a failed call changes nothing: a failed write leaves no bytes, a failed rename or
/// remove leaves the names, a failed create leaves no file.
/// Method: one fault per kind of change, then look.
#[test]
fn failed_calls_change_nothing() {
    let fs = with_db_dir();
    let file = write_durable(&fs, "/db/a", b"abc");
    fs.fail_at(fs.calls(), Fault::Eio);
    assert!(file.write_all_at(b"zzz", 0).is_err());
    fs.fail_at(fs.calls(), Fault::Enospc);
    assert!(file.set_len(0).is_err());
    fs.fail_at(fs.calls(), Fault::Eio);
    assert!(fs.rename(Path::new("/db/a"), Path::new("/db/b")).is_err());
    fs.fail_at(fs.calls(), Fault::Eio);
    assert!(fs.remove(Path::new("/db/a")).is_err());
    fs.fail_at(fs.calls(), Fault::Enospc);
    assert!(fs.open(Path::new("/db/new"), OpenMode::CreateNew).is_err());
    assert_eq!(read_all(&fs, "/db/a").unwrap(), b"abc");
    assert_eq!(fs.list(Path::new("/db")).unwrap(), ["a"]);
}

/// Goal: a short write lands exactly the first half of its bytes and reports ENOSPC.
/// Method: short-write 1001 bytes at offset 10 into an empty file; read back.
#[test]
fn short_write_leaves_half() {
    let fs = with_db_dir();
    let file = fs.open(Path::new("/db/a"), OpenMode::CreateNew).unwrap();
    let bytes: Vec<u8> = (0..1001u32).map(|i| (i % 200 + 1) as u8).collect();
    fs.fail_at(fs.calls(), Fault::ShortWrite);
    let error = file.write_all_at(&bytes, 10).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(28));
    assert_eq!(error.kind(), std::io::ErrorKind::StorageFull);
    assert_eq!(file.len().unwrap(), 10 + 500);
    let content = read_all(&fs, "/db/a").unwrap();
    assert_eq!(&content[10..], &bytes[..500]);
}

/// Goal: `fail_from` is a dead disk: every call from the given one fails, earlier ones do not,
/// and `clear_faults` revives it.
/// Method: fail from the third call of a loop of reads; then clear.
#[test]
fn fail_from_kills_every_later_call() {
    let fs = with_db_dir();
    let file = write_durable(&fs, "/db/a", b"abcd");
    let base = fs.calls();
    fs.fail_from(base + 2, Fault::Eio);
    let mut buf = [0; 4];
    let failed: Vec<bool> = (0..6).map(|_| file.read_at(&mut buf, 0).is_err()).collect();
    assert_eq!(failed, [false, false, true, true, true, true]);
    assert!(fs.exists(Path::new("/db/a")).is_err());
    fs.clear_faults();
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 4);
}

/// Goal: a failed sync loses its writes for good, as Linux does: a later successful sync
/// does not make them durable, though reads still see them until the crash.
/// Method: write, fail the sync, sync again successfully, crash under every seed.
#[test]
fn failed_sync_loses_its_writes() {
    let fs = with_db_dir();
    let file = write_durable(&fs, "/db/a", b"");
    file.write_all_at(b"lost", 0).unwrap();
    fs.fail_at(fs.calls(), Fault::Eio);
    assert_eq!(file.sync().unwrap_err().raw_os_error(), Some(5));
    file.sync().unwrap();
    assert_eq!(read_all(&fs, "/db/a").unwrap(), b"lost");
    for seed in 0..SEEDS {
        assert_eq!(read_all(&fs.crash(seed), "/db/a").unwrap(), b"", "seed {seed}");
    }
}

/// Goal: `calls()` counts every `FileSystem` and `File` method call once, including failed
/// ones, and `read_exact_at` counts the `read_at`s it makes.
/// Method: one call of each method, checking the count after each.
#[test]
fn calls_counts_every_method() {
    let fs = SimFs::new();
    let path = Path::new("/a");
    let mut expected = 0;
    let mut step = |fs: &SimFs, calls: u64| {
        expected += calls;
        assert_eq!(fs.calls(), expected);
    };
    assert_eq!(fs.calls(), 0);
    let file = fs.open(path, OpenMode::CreateNew).unwrap();
    step(&fs, 1);
    file.write_all_at(b"abc", 0).unwrap();
    step(&fs, 1);
    file.read_exact_at(&mut [0; 3], 0).unwrap();
    step(&fs, 1);
    assert!(file.read_exact_at(&mut [0; 3], 2).is_err());
    step(&fs, 2); // one short read, then the read at the end

    file.sync().unwrap();
    step(&fs, 1);
    file.len().unwrap();
    step(&fs, 1);
    file.set_len(1).unwrap();
    step(&fs, 1);
    fs.exists(path).unwrap();
    step(&fs, 1);
    fs.list(Path::new("/")).unwrap();
    step(&fs, 1);
    fs.create_dir_all(Path::new("/d")).unwrap();
    step(&fs, 1);
    fs.sync_dir(Path::new("/")).unwrap();
    step(&fs, 1);
    fs.rename(path, Path::new("/b")).unwrap();
    step(&fs, 1);
    assert!(fs.remove(path).is_err());
    step(&fs, 1);
    fs.remove(Path::new("/b")).unwrap();
    step(&fs, 1);
}

/// Goal: namespace errors match the operating system's, so engine code behaves the same on
/// `SimFs` and `RealFs`.
/// Method: each misuse once, checking the raw OS error.
#[test]
fn namespace_errors_match_the_os() {
    let fs = with_db_dir();
    write_durable(&fs, "/db/a", b"");
    let code = |result: std::io::Result<()>| result.unwrap_err().raw_os_error();
    let open = |path: &str, mode| fs.open(Path::new(path), mode).map(|_| ());
    assert_eq!(code(open("/db/a", OpenMode::CreateNew)), Some(17));
    assert_eq!(code(open("/db/x", OpenMode::Existing)), Some(2));
    assert_eq!(code(open("/nodir/x", OpenMode::Create)), Some(2));
    assert_eq!(code(open("/db", OpenMode::Create)), Some(21));
    assert_eq!(code(open("/db/a/x", OpenMode::Create)), Some(20));
    assert_eq!(code(fs.remove(Path::new("/db/x"))), Some(2));
    assert_eq!(code(fs.remove(Path::new("/db"))), Some(21));
    assert_eq!(code(fs.rename(Path::new("/db/x"), Path::new("/db/y"))), Some(2));
    assert_eq!(code(fs.rename(Path::new("/db/a"), Path::new("/db"))), Some(21));
    assert_eq!(code(fs.list(Path::new("/db/a")).map(|_| ())), Some(20));
    assert_eq!(code(fs.create_dir_all(Path::new("/db/a"))), Some(17));
    assert_eq!(code(fs.sync_dir(Path::new("/db/x"))), Some(2));
    assert!(fs.exists(Path::new("/db/./a")).unwrap());
    assert!(fs.exists(Path::new("db/../db/a")).unwrap());
    assert_eq!(fs.list(Path::new("/")).unwrap(), ["db"]);
}

/// One open file of the random workload's model: its handle, live bytes, and whether those
/// bytes are all synced.
struct ModelFile {
    handle: Arc<dyn File>,
    bytes: Vec<u8>,
    clean: bool,
}

/// The random workload's model of `/db`: live files and names, and which names changed since
/// the last `sync_dir`.
#[derive(Default)]
struct Model {
    files: Vec<ModelFile>,
    names: BTreeMap<String, usize>,
    dirty_names: BTreeSet<String>,
}

impl Model {
    /// One random operation on `fs` and the model; an operation that needs a file the name
    /// does not hold is skipped.
    fn step(&mut self, fs: &SimFs, rng: &mut StdRng) {
        let name = format!("f{}", rng.gen_range(0..4));
        let path = format!("/db/{name}");
        match (rng.gen_range(0..7), self.names.get(&name).copied()) {
            (0, None) => {
                let handle = fs.open(Path::new(&path), OpenMode::CreateNew).unwrap();
                self.files.push(ModelFile { handle, bytes: Vec::new(), clean: true });
                self.names.insert(name.clone(), self.files.len() - 1);
                self.dirty_names.insert(name);
            }
            (1, Some(index)) => {
                let file = &mut self.files[index];
                let offset = rng.gen_range(0..64);
                let bytes: Vec<u8> = (0..rng.gen_range(1..64)).map(|_| rng.r#gen()).collect();
                file.handle.write_all_at(&bytes, offset as u64).unwrap();
                file.bytes.resize(file.bytes.len().max(offset + bytes.len()), 0);
                file.bytes[offset..offset + bytes.len()].copy_from_slice(&bytes);
                file.clean = false;
            }
            (2, Some(index)) => {
                let len = rng.gen_range(0..128);
                self.files[index].handle.set_len(len as u64).unwrap();
                self.files[index].bytes.resize(len, 0);
                self.files[index].clean = false;
            }
            (3, Some(index)) => {
                self.files[index].handle.sync().unwrap();
                self.files[index].clean = true;
            }
            (4, Some(index)) => {
                let target = format!("f{}", rng.gen_range(0..4));
                fs.rename(Path::new(&path), Path::new(&format!("/db/{target}"))).unwrap();
                self.names.remove(&name);
                self.names.insert(target.clone(), index);
                self.dirty_names.extend([name, target]);
            }
            (5, Some(_)) => {
                fs.remove(Path::new(&path)).unwrap();
                self.names.remove(&name);
                self.dirty_names.insert(name);
            }
            (6, _) => {
                fs.sync_dir(Path::new("/db")).unwrap();
                self.dirty_names.clear();
            }
            _ => {}
        }
    }

    /// Checks a crashed file system against the clean part of the model; returns how many
    /// files it compared byte for byte.
    fn check(&self, crashed: &SimFs, context: &str) -> usize {
        crashed.verify();
        let mut exact = 0;
        for name in (0..4).map(|i| format!("f{i}")) {
            if self.dirty_names.contains(&name) {
                continue;
            }
            let found = read_all(crashed, &format!("/db/{name}"));
            match self.names.get(&name).map(|index| &self.files[*index]) {
                None => assert_eq!(found, None, "{context}, {name}"),
                Some(file) if file.clean => {
                    assert_eq!(found.as_ref(), Some(&file.bytes), "{context}, {name}");
                    exact += 1;
                }
                Some(_) => assert!(found.is_some(), "{context}, {name}"),
            }
        }
        exact
    }
}

/// Goal: under any sequence of file and name operations, a crash keeps what was made durable:
/// a name not changed since the last `sync_dir` names the same file (or stays absent), and
/// that file, if not changed since its last sync, holds exactly its synced bytes.
/// Method: seeded random sequences of creates, writes, resizes, syncs, renames, removes and
/// directory syncs over four names, against a model of the live state and of which names and
/// files are clean; after each sequence, crash under several seeds and check the clean part.
/// A failure names both seeds.
#[test]
fn random_workloads_keep_what_was_synced() {
    let mut exact_checks = 0;
    for seed in 0..300 {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = with_db_dir();
        let mut model = Model::default();
        for _ in 0..60 {
            model.step(&fs, &mut rng);
        }
        let live = fs.list(Path::new("/db")).unwrap();
        assert_eq!(live, model.names.keys().cloned().collect::<Vec<_>>(), "seed {seed}");
        for crash_seed in 0..16 {
            let context = format!("seed {seed}, crash seed {crash_seed}");
            exact_checks += model.check(&fs.crash(crash_seed), &context);
        }
    }
    assert!(exact_checks > 1000, "only {exact_checks} clean files checked");
}
