//! `strata repair`: salvages every document that can still be read from a damaged data
//! directory into a new one, rebuilds every index from them, and reports what was lost.
//!
//! The damaged directory is never written: its data file and log are copied (under its lock,
//! so no server starts on it meanwhile) to a scratch directory inside the new one, which is
//! opened for salvage (`storage::Options::salvage`: replay stops at the first damage in the log
//! instead of refusing to open). Each collection's documents are read past damaged blocks
//! ([`crate::Collection::salvage_documents`]) and inserted into a fresh store with the
//! collection's options, UUID and index specifications; indexes are rebuilt from the
//! documents rather than copied, so they agree with them. The `local` database (the oplog,
//! the replica-set configuration) is node state, not data, and is not copied.

use std::io;
use std::path::Path;
use std::time::Duration;

use bson::RawDocumentBuf;
use storage::io::{FileSystem, Lock, LockGuard, RealFs};
use storage::{DATA_FILE, Durability, LOCK_FILE, LOG_DIR};

use crate::error::{Error, Result};
use crate::{Collection, CollectionInfo, Store, StoreOptions};

/// What the salvage of the whole directory found.
#[derive(Debug, Default)]
pub struct RepairReport {
    /// The checkpoint catalog was damaged and read from its copy.
    pub catalog_damage: Option<String>,
    /// Log replay stopped at damage: the commits logged after it are lost.
    pub log_damage: Option<String>,
    pub collections: Vec<CollectionReport>,
}

/// What the salvage of one collection found.
#[derive(Debug, Default)]
pub struct CollectionReport {
    pub namespace: String,
    pub salvaged: u64,
    /// The count the collection kept (its counter), if it could be read.
    pub counted: Option<u64>,
    /// Each unreadable range, named by the `_id`s around it, and each document refused.
    pub damage: Vec<String>,
    pub index_errors: Vec<String>,
}

const BATCH_DOCUMENTS: usize = 1000;

/// Salvages `damaged` into `out` (a new directory); `each` sees every collection's report as
/// soon as it is done.
pub fn repair(damaged: &Path, out: &Path, each: &mut dyn FnMut(&CollectionReport)) -> Result<RepairReport> {
    if out.join(DATA_FILE).exists() {
        return Err(Error::bad_value(format!(
            "{} already holds a data file; repair writes into a new directory",
            out.display()
        )));
    }
    let scratch = out.join(".repair-source");
    {
        let _lock = lock_unused(damaged)?;
        copy_data_directory(damaged, &scratch)
            .map_err(|error| io_error(error, "copying the damaged directory".into()))?;
    }
    let result = salvage(&scratch, out, each);
    std::fs::remove_dir_all(&scratch).map_err(|error| io_error(error, "removing the scratch copy".into()))?;
    result
}

fn io_error(error: io::Error, doing: String) -> Error {
    Error::from(storage::Error::io(doing, error))
}

/// A running server holds the directory's lock; repairing under it would copy a moving target.
fn lock_unused(dir: &Path) -> Result<LockGuard> {
    if !dir.join(DATA_FILE).exists() {
        return Err(Error::bad_value(format!("{} holds no Strata data file", dir.display())));
    }
    match RealFs.try_lock(&dir.join(LOCK_FILE), "strata repair") {
        Ok(Lock::Taken(guard)) => Ok(guard),
        Ok(Lock::HeldBy(holder)) => {
            Err(Error::DirectoryLocked(format!("{} is in use ({holder}); stop that server first", dir.display())))
        }
        Err(error) => Err(io_error(error, format!("locking {}", dir.display()))),
    }
}

fn copy_data_directory(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to.join(LOG_DIR))?;
    std::fs::copy(from.join(DATA_FILE), to.join(DATA_FILE))?;
    let log = from.join(LOG_DIR);
    if log.is_dir() {
        for entry in std::fs::read_dir(&log)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), to.join(LOG_DIR).join(entry.file_name()))?;
            }
        }
    }
    Ok(())
}

fn salvage(scratch: &Path, out: &Path, each: &mut dyn FnMut(&CollectionReport)) -> Result<RepairReport> {
    let source_options = StoreOptions {
        engine: storage::Options { salvage: true, ..storage::Options::default() },
        // Nothing may change the source's documents while they are read: no TTL deletes.
        ttl_interval: Duration::from_secs(365 * 24 * 3600),
        ..StoreOptions::default()
    };
    let source = Store::open(scratch, source_options)?;
    let recovery = source.engine_stats().recovery;
    let mut report = RepairReport {
        catalog_damage: recovery.catalog_damage.clone(),
        log_damage: recovery.log_damage.clone(),
        collections: Vec::new(),
    };
    let target = Store::open(out, StoreOptions::default())?;
    // From the catalog alone: the databases' sizes come from counters that may be damaged.
    for database in source.database_names() {
        if database == crate::oplog::DB {
            continue;
        }
        for info in source.list_collections(&database) {
            let namespace = (database.as_str(), info.name.as_str());
            if info.view {
                // A view holds no documents: its definition is copied as it is.
                target.collection(namespace).create(info.options.clone())?;
                continue;
            }
            let collection = salvage_collection(&source.collection(namespace), &target.collection(namespace), &info)?;
            each(&collection);
            report.collections.push(collection);
        }
    }
    target.close()?;
    drop(source);
    Ok(report)
}

fn salvage_collection(
    source: &Collection<'_>,
    target: &Collection<'_>,
    info: &CollectionInfo,
) -> Result<CollectionReport> {
    let mut report = CollectionReport { namespace: source.namespace().to_string(), ..CollectionReport::default() };
    target.create_with_uuid(info.options.clone(), info.uuid)?;
    report.counted = source.estimated_document_count().ok();
    let mut copier = Copier { target, batch: Vec::with_capacity(BATCH_DOCUMENTS), inserted: 0, refused: Vec::new() };
    report.damage = source.salvage_documents(&mut |document| {
        copier.push(document);
        Ok(())
    })?;
    copier.flush();
    report.salvaged = copier.inserted;
    report.damage.extend(copier.refused);
    let specs: Vec<bson::Document> = match source.list_indexes() {
        Ok(specs) => specs.into_iter().filter(|spec| spec.get_str("name").ok() != Some("_id_")).collect(),
        Err(error) => {
            report.index_errors.push(format!("index specifications unreadable: {error}"));
            Vec::new()
        }
    };
    if !specs.is_empty()
        && let Err(error) = target.create_indexes(&specs)
    {
        report.index_errors.push(format!("rebuilding the indexes failed: {error}"));
    }
    Ok(report)
}

/// Inserts salvaged documents into the new store in batches.
struct Copier<'a> {
    target: &'a Collection<'a>,
    batch: Vec<RawDocumentBuf>,
    inserted: u64,
    refused: Vec<String>,
}

impl Copier<'_> {
    fn push(&mut self, document: RawDocumentBuf) {
        self.batch.push(document);
        if self.batch.len() >= BATCH_DOCUMENTS {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        let outcome = self.target.insert(batch, false, Durability::None);
        self.inserted += outcome.inserted as u64;
        self.refused.extend(outcome.errors.into_iter().map(|(_, e)| format!("a salvaged document was refused: {e}")));
    }
}
