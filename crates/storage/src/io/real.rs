//! [`RealFs`]: the [`FileSystem`] on the operating system's files, through `std::fs`.
//!
//! Positional reads and writes use `std::os::unix::fs::FileExt` (`pread`/`pwrite`), so one
//! open file is shared by all threads without a cursor or a lock. [`File::sync`] is
//! `fdatasync`, which also makes a changed file size durable; [`FileSystem::sync_dir`] opens
//! the directory and `fsync`s it, which is what makes a create, rename or remove durable on
//! Linux. Errors are the operating system's, unchanged.
//!
//! Unix only: the engine's durability argument rests on these POSIX calls.

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{File, FileSystem, Lock, LockGuard, OpenMode};

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

/// An open operating-system file.
#[derive(Debug)]
struct RealFile {
    file: fs::File,
}

impl FileSystem for RealFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let mut options = fs::OpenOptions::new();
        options.read(true).write(true);
        match mode {
            OpenMode::CreateNew => options.create_new(true),
            OpenMode::Create => options.create(true),
            OpenMode::Existing => &mut options,
        };
        let file = options.open(path)?;
        Ok(Arc::new(RealFile { file }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let name = entry?
                .file_name()
                .into_string()
                .map_err(|name| io::Error::new(io::ErrorKind::InvalidData, format!("name not UTF-8: {name:?}")))?;
            names.push(name);
        }
        names.sort_unstable();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        fs::File::open(dir)?.sync_all()
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        fs::exists(path)
    }

    /// `flock(LOCK_EX | LOCK_NB)` through std's `File::try_lock`: the lock belongs to this
    /// open file description, so it conflicts with another open of the same file in this
    /// process too, and the kernel drops it with the last descriptor (process death included).
    fn try_lock(&self, path: &Path, owner: &str) -> io::Result<Lock> {
        let file = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        match file.try_lock() {
            Ok(()) => {
                // The owner is for people reading a refusal; it needs no sync.
                file.set_len(0)?;
                file.write_all_at(owner.as_bytes(), 0)?;
                Ok(Lock::Taken(LockGuard::new(Box::new(file))))
            }
            Err(fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                // The holder may not have written its name yet: then it is unknown, not an error.
                let _ = io::Read::read_to_string(&mut &file, &mut holder);
                Ok(Lock::HeldBy(holder.trim().to_string()))
            }
            Err(fs::TryLockError::Error(error)) => Err(error),
        }
    }
}

impl RealFile {
    /// `posix_fadvise` on a range. Its result is ignored: it is advice, and failing to drop
    /// pages, or to read them early, changes nothing read.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn advise(&self, offset: u64, len: u64, advice: libc::c_int) {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else { return };
        // SAFETY: posix_fadvise reads no memory of ours; the descriptor is open while `self` is.
        let _ = unsafe { libc::posix_fadvise(self.file.as_raw_fd(), offset, len, advice) };
    }
}

impl File for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        // pread may return less than asked before the end of the file (signals, some file
        // systems); the trait promises a short read only at the end, so keep reading.
        let mut done = 0;
        while let Some(rest) = buf.get_mut(done..).filter(|rest| !rest.is_empty()) {
            match self.file.read_at(rest, offset + done as u64) {
                Ok(0) => break,
                Ok(read) => done += read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(done)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    #[cfg(target_os = "linux")]
    fn advise_done_with(&self, offset: u64, len: u64) {
        self.advise(offset, len, libc::POSIX_FADV_DONTNEED);
    }

    /// POSIX_FADV_WILLNEED submits the reads of the pages not cached and returns without
    /// waiting for them.
    #[cfg(target_os = "linux")]
    fn advise_will_need(&self, offset: u64, len: u64) {
        self.advise(offset, len, libc::POSIX_FADV_WILLNEED);
    }

    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn start_writeback(&self, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (libc::off64_t::try_from(offset), libc::off64_t::try_from(len)) else { return };
        // SAFETY: sync_file_range reads no memory of ours; the descriptor is open while `self`
        // is. Its result is ignored: durability comes from `sync`, never from this.
        let _ = unsafe { libc::sync_file_range(self.file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let unique = format!("strata-io-{name}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
            let dir = std::env::temp_dir().join(unique);
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// Goal: every `RealFs` and `RealFile` call does what the trait promises on a real disk.
    /// Method: in a fresh temp dir, create, write at offsets (with a gap), read back (exact and
    /// short at the end), sync, advise that pages are done with or needed soon, start writeback,
    /// resize, rename over an existing file, list, remove, and check each result and error kind.
    #[test]
    fn real_fs_round_trip() {
        let temp = TempDir::new("round-trip");
        let fs = RealFs;
        let dir = temp.0.join("data");
        fs.create_dir_all(&dir).unwrap();
        fs.create_dir_all(&dir).unwrap();
        let path = dir.join("a");

        let file = fs.open(&path, OpenMode::CreateNew).unwrap();
        file.write_all_at(b"hello", 0).unwrap();
        file.write_all_at(b"world", 10).unwrap();
        file.sync().unwrap();
        assert_eq!(file.len().unwrap(), 15);
        let mut buf = [0xAA; 15];
        file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello\0\0\0\0\0world");
        let mut tail = [0; 8];
        assert_eq!(file.read_at(&mut tail, 12).unwrap(), 3);
        assert_eq!(&tail[..3], b"rld");
        assert_eq!(file.read_at(&mut tail, 15).unwrap(), 0);
        let eof = file.read_exact_at(&mut tail, 12).unwrap_err();
        assert_eq!(eof.kind(), io::ErrorKind::UnexpectedEof);
        // Advice to drop cached pages (written and synced, or not yet) or to read them soon, and
        // writeback started early, change nothing read.
        file.write_all_at(b"W", 14).unwrap();
        file.advise_done_with(0, 15);
        file.advise_done_with(u64::MAX, 1);
        file.advise_will_need(0, 15);
        file.advise_will_need(u64::MAX, 1);
        file.start_writeback(0, 15);
        file.start_writeback(u64::MAX, 1);
        file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello\0\0\0\0\0worlW");
        file.set_len(4).unwrap();
        assert_eq!(file.len().unwrap(), 4);

        let again = fs.open(&path, OpenMode::CreateNew).err().unwrap();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        let missing = fs.open(&dir.join("b"), OpenMode::Existing).err().unwrap();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let other = fs.open(&dir.join("b"), OpenMode::Create).unwrap();
        other.write_all_at(b"new", 0).unwrap();
        other.sync().unwrap();

        fs.rename(&dir.join("b"), &path).unwrap();
        fs.sync_dir(&dir).unwrap();
        assert_eq!(fs.list(&dir).unwrap(), vec!["a".to_string()]);
        let reopened = fs.open(&path, OpenMode::Existing).unwrap();
        let mut new = [0; 3];
        reopened.read_exact_at(&mut new, 0).unwrap();
        assert_eq!(&new, b"new");
        // The handle opened before the rename still reads the replaced file.
        let mut old = [0; 4];
        file.read_exact_at(&mut old, 0).unwrap();
        assert_eq!(&old, b"hell");

        assert!(fs.exists(&path).unwrap());
        fs.remove(&path).unwrap();
        assert!(!fs.exists(&path).unwrap());
        assert_eq!(fs.remove(&path).unwrap_err().kind(), io::ErrorKind::NotFound);
        fs.sync_dir(&dir).unwrap();
        assert!(fs.list(&dir).unwrap().is_empty());
    }

    /// Goal: `list` returns bare names, sorted, including subdirectories.
    /// Method: create files out of order and one subdirectory, list the parent.
    #[test]
    fn real_fs_list_sorted_names() {
        let temp = TempDir::new("list");
        let fs = RealFs;
        for name in ["c", "a", "b"] {
            fs.open(&temp.0.join(name), OpenMode::CreateNew).unwrap();
        }
        fs.create_dir_all(&temp.0.join("d")).unwrap();
        assert_eq!(fs.list(&temp.0).unwrap(), vec!["a", "b", "c", "d"]);
        let not_dir = fs.list(&temp.0.join("a")).unwrap_err();
        assert_eq!(not_dir.raw_os_error(), Some(20));
    }
}
