//! The simulated directory tree: which names exist, and which file (inode) each one names.
//!
//! `SimFs` keeps two [`Namespace`]s, live and durable, and a [`Journal`] of the changes made
//! to the live one since they were last made durable. A change is one [`Change`]: make a
//! directory, create, remove or rename a file; each names the inode it acts on.
//!
//! Invariants:
//! - Paths are normalized and absolute; `/` is always a directory.
//! - In the live namespace every entry's parent is a directory. The durable namespace may hold
//!   entries under a directory that is not durable itself (the child's directory was synced,
//!   its parent was not); `prune` drops them when the power goes.
//! - Replaying any subset of the journal, in order, over the durable namespace gives a
//!   namespace: a change whose premise no longer holds (rename of a file whose create was
//!   lost) is skipped, never half applied. A rename is one change, so it is atomic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A file's identity, independent of its names.
pub(super) type Inode = u64;

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Entry {
    File(Inode),
    Dir,
    Missing,
}

/// One change to a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Change {
    MakeDir { path: PathBuf },
    Create { path: PathBuf, inode: Inode },
    Remove { path: PathBuf, inode: Inode },
    Rename { from: PathBuf, to: PathBuf, inode: Inode },
}

impl Change {
    /// The paths this change reads or writes.
    fn paths(&self) -> impl Iterator<Item = &Path> {
        let (first, second) = match self {
            Change::MakeDir { path } | Change::Create { path, .. } | Change::Remove { path, .. } => (path, None),
            Change::Rename { from, to, .. } => (from, Some(to)),
        };
        std::iter::once(first.as_path()).chain(second.map(PathBuf::as_path))
    }

    /// Whether this change edits an entry of `dir`.
    fn edits_dir(&self, dir: &Path) -> bool {
        self.paths().any(|path| parent(path) == dir)
    }
}

/// The directory holding `path`; `/` for `/` itself.
pub(super) fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("/"))
}

/// Directories and file names, each file name pointing at an inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Namespace {
    dirs: BTreeSet<PathBuf>,
    files: BTreeMap<PathBuf, Inode>,
}

impl Namespace {
    /// A namespace holding only `/`.
    pub(super) fn new() -> Namespace {
        Namespace { dirs: BTreeSet::from([PathBuf::from("/")]), files: BTreeMap::new() }
    }

    pub(super) fn entry(&self, path: &Path) -> Entry {
        if self.dirs.contains(path) {
            Entry::Dir
        } else {
            self.files.get(path).map_or(Entry::Missing, |inode| Entry::File(*inode))
        }
    }

    /// Names of the files and directories directly in `dir`, sorted.
    pub(super) fn list(&self, dir: &Path) -> Vec<String> {
        let dirs = self.dirs.iter().filter(|path| path.as_path() != Path::new("/"));
        let mut names: Vec<String> = dirs
            .chain(self.files.keys())
            .filter(|path| parent(path) == dir)
            .filter_map(|path| path.file_name()?.to_str().map(str::to_string))
            .collect();
        names.sort_unstable();
        names
    }

    /// Applies `change` if its premise holds here; returns whether it did.
    pub(super) fn apply(&mut self, change: &Change) -> bool {
        match change {
            Change::MakeDir { path } => {
                if self.files.contains_key(path) {
                    return false;
                }
                self.dirs.insert(path.clone());
            }
            Change::Create { path, inode } => {
                if self.entry(path) != Entry::Missing {
                    return false;
                }
                self.files.insert(path.clone(), *inode);
            }
            Change::Remove { path, inode } => {
                if self.entry(path) != Entry::File(*inode) {
                    return false;
                }
                self.files.remove(path);
            }
            Change::Rename { from, to, inode } => {
                if self.entry(from) != Entry::File(*inode) || self.dirs.contains(to) {
                    return false;
                }
                self.files.remove(from);
                self.files.insert(to.clone(), *inode);
            }
        }
        true
    }

    /// Drops every entry whose directory does not exist (what a power loss does to files in a
    /// directory whose own name was never made durable).
    pub(super) fn prune(&mut self) {
        // BTreeSet order puts a directory before everything under it.
        let mut kept = BTreeSet::new();
        for dir in std::mem::take(&mut self.dirs) {
            if dir.as_path() == Path::new("/") || kept.contains(parent(&dir)) {
                kept.insert(dir);
            }
        }
        self.dirs = kept;
        let dirs = &self.dirs;
        self.files.retain(|path, _| dirs.contains(parent(path)));
    }

    /// Every inode some name points at.
    pub(super) fn inodes(&self) -> BTreeSet<Inode> {
        self.files.values().copied().collect()
    }

    /// Checks that every entry sits in an existing directory and no name is both kinds.
    pub(super) fn verify(&self) {
        assert!(self.dirs.contains(Path::new("/")), "root directory missing");
        for dir in self.dirs.iter().filter(|dir| dir.as_path() != Path::new("/")) {
            assert!(self.dirs.contains(parent(dir)), "directory {dir:?} has no parent");
        }
        for path in self.files.keys() {
            assert!(self.dirs.contains(parent(path)), "file {path:?} has no directory");
            assert!(!self.dirs.contains(path), "{path:?} is both a file and a directory");
        }
    }
}

/// Changes applied to the live namespace and not yet durable, oldest first.
#[derive(Clone, Debug, Default)]
pub(super) struct Journal {
    changes: Vec<Change>,
}

impl Journal {
    pub(super) fn push(&mut self, change: Change) {
        self.changes.push(change);
    }

    pub(super) fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Removes and returns, oldest first, what `sync_dir(dir)` makes durable: every change
    /// editing an entry of `dir`, and every earlier change to a path such a change touches
    /// (a rename into `dir` needs the create of its source, wherever that was).
    pub(super) fn take_for_dir(&mut self, dir: &Path) -> Vec<Change> {
        let mut needed: BTreeSet<PathBuf> = BTreeSet::new();
        let mut taken = vec![false; self.changes.len()];
        for (change, take) in self.changes.iter().zip(taken.iter_mut()).rev() {
            if change.edits_dir(dir) || change.paths().any(|path| needed.contains(path)) {
                *take = true;
                needed.extend(change.paths().map(Path::to_path_buf));
            }
        }
        let (synced, pending): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.changes).into_iter().zip(taken).partition(|(_, take)| *take);
        self.changes = pending.into_iter().map(|(change, _)| change).collect();
        synced.into_iter().map(|(change, _)| change).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> PathBuf {
        PathBuf::from(text)
    }

    /// Goal: a rename whose source create was lost is skipped whole, not half applied.
    /// Method: replay only the rename over an empty namespace.
    #[test]
    fn rename_without_its_create_is_skipped() {
        let mut namespace = Namespace::new();
        let rename = Change::Rename { from: path("/a"), to: path("/b"), inode: 1 };
        assert!(!namespace.apply(&rename));
        assert_eq!(namespace, Namespace::new());
    }

    /// Goal: syncing a directory takes its own changes plus the ones they depend on, and
    /// leaves the other directories' changes pending.
    /// Method: create in /x, rename it into /y, create in /z; sync /y.
    #[test]
    fn sync_dir_takes_dependencies() {
        let create_x = Change::Create { path: path("/x/a"), inode: 1 };
        let rename = Change::Rename { from: path("/x/a"), to: path("/y/a"), inode: 1 };
        let create_z = Change::Create { path: path("/z/c"), inode: 2 };
        let mut journal = Journal::default();
        for change in [create_x.clone(), rename.clone(), create_z.clone()] {
            journal.push(change);
        }
        assert_eq!(journal.take_for_dir(Path::new("/y")), vec![create_x, rename]);
        assert_eq!(journal.changes(), [create_z]);
    }

    /// Goal: prune drops files and directories under a directory that does not exist.
    /// Method: a durable namespace with /a/b/f but no /a.
    #[test]
    fn prune_drops_orphans() {
        let mut namespace = Namespace::new();
        assert!(namespace.apply(&Change::MakeDir { path: path("/a/b") }));
        assert!(namespace.apply(&Change::Create { path: path("/a/b/f"), inode: 3 }));
        assert!(namespace.apply(&Change::Create { path: path("/g"), inode: 4 }));
        namespace.prune();
        namespace.verify();
        assert_eq!(namespace.entry(Path::new("/a/b/f")), Entry::Missing);
        assert_eq!(namespace.entry(Path::new("/g")), Entry::File(4));
    }
}
