//! `strata repair --dbpath DIR --out NEW`: salvages every document that can still be read from a
//! damaged data directory into a new one, rebuilds every index from them, and reports what was
//! lost.
//!
//! The damaged directory is never written: its data file and log are copied to a scratch
//! directory inside NEW, which is opened for salvage (`storage::Options::salvage`: replay stops
//! at the first damage in the log instead of refusing to open). Each collection's documents are
//! read past damaged blocks (`Store::salvage_documents`) and inserted into a fresh store in
//! NEW, with the collection's options and index specifications; indexes are rebuilt from the
//! documents rather than copied, so they agree with them. The report names, per collection,
//! the documents salvaged against the count the collection kept, and each unreadable range by
//! the `_id`s around it. The `local` database (the oplog, the replica-set configuration) is
//! node state, not data, and is not copied.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use bson::RawDocumentBuf;
use docstore::{Store, StoreOptions};
use storage::Durability;

#[derive(clap::Args, Debug, Clone)]
pub struct RepairArgs {
    /// The damaged data directory (read, never written; no server may be running on it).
    #[arg(long)]
    pub dbpath: PathBuf,
    /// The new data directory to write (created; must not hold a data file).
    #[arg(long)]
    pub out: PathBuf,
}

/// What the salvage of one collection found.
#[derive(Debug, Default)]
struct CollectionReport {
    namespace: String,
    salvaged: u64,
    /// The count the collection kept (its counter), if it could be read.
    counted: Option<u64>,
    damage: Vec<String>,
    index_errors: Vec<String>,
}

const BATCH_DOCUMENTS: usize = 1000;

pub fn run(args: RepairArgs) -> anyhow::Result<()> {
    if args.out.join(storage::DATA_FILE).exists() {
        bail!("{} already holds a data file; repair writes into a new directory", args.out.display());
    }
    // Held while the directory is copied, so that no server starts on it meanwhile.
    let _lock = lock_unused(&args.dbpath)?;
    let scratch = args.out.join(".repair-source");
    copy_data_directory(&args.dbpath, &scratch)?;
    let result = salvage(&scratch, &args.out);
    std::fs::remove_dir_all(&scratch).with_context(|| format!("removing {}", scratch.display()))?;
    let reports = result?;
    print_summary(&args, &reports);
    Ok(())
}

/// A running server holds the directory's lock; repairing under it would copy a moving target.
fn lock_unused(dir: &Path) -> anyhow::Result<storage::io::LockGuard> {
    use storage::io::{FileSystem, Lock, RealFs};
    if !dir.join(storage::DATA_FILE).exists() {
        bail!("{} holds no Strata data file", dir.display());
    }
    match RealFs.try_lock(&dir.join(storage::LOCK_FILE), "strata repair") {
        Ok(Lock::Taken(guard)) => Ok(guard),
        Ok(Lock::HeldBy(holder)) => bail!("{} is in use ({holder}); stop that server first", dir.display()),
        Err(error) => bail!("cannot lock {}: {error}", dir.display()),
    }
}

fn copy_data_directory(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to.join(storage::LOG_DIR)).with_context(|| format!("creating {}", to.display()))?;
    std::fs::copy(from.join(storage::DATA_FILE), to.join(storage::DATA_FILE)).context("copying the data file")?;
    let log = from.join(storage::LOG_DIR);
    if log.is_dir() {
        for entry in std::fs::read_dir(&log).context("reading the log directory")? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), to.join(storage::LOG_DIR).join(entry.file_name()))
                    .context("copying the log")?;
            }
        }
    }
    Ok(())
}

fn salvage(scratch: &Path, out: &Path) -> anyhow::Result<Vec<CollectionReport>> {
    let source_options = StoreOptions {
        engine: storage::Options { salvage: true, ..storage::Options::default() },
        // Nothing may change the source's documents while they are read: no TTL deletes.
        ttl_interval: std::time::Duration::from_secs(365 * 24 * 3600),
        ..StoreOptions::default()
    };
    let source = Store::open(scratch, source_options)
        .context("the damaged directory cannot be opened even for salvage (its header or catalog is unreadable)")?;
    if let Some(damage) = &source.engine_stats().recovery.catalog_damage {
        println!("checkpoint catalog: damaged, read from its copy: {damage}");
    }
    if let Some(damage) = &source.engine_stats().recovery.log_damage {
        println!("log: replay stopped at damage; commits logged after it are lost: {damage}");
    }
    let target = Store::open(out, StoreOptions::default()).with_context(|| format!("creating {}", out.display()))?;
    let mut reports = Vec::new();
    // From the catalog alone: the databases' sizes come from counters that may be damaged.
    for database in source.database_names() {
        if database == "local" {
            continue;
        }
        for collection in source.list_collections(&database) {
            if collection.view {
                // A view holds no documents: its definition is copied as it is.
                target.create_collection(&database, &collection.name, collection.options.clone())?;
                continue;
            }
            reports.push(salvage_collection(&source, &target, &database, &collection)?);
        }
    }
    target.close().context("closing the new directory")?;
    drop(source);
    Ok(reports)
}

fn salvage_collection(
    source: &Store,
    target: &Store,
    db: &str,
    collection: &docstore::collection::CollectionInfo,
) -> anyhow::Result<CollectionReport> {
    let name = collection.name.as_str();
    let mut report = CollectionReport { namespace: format!("{db}.{name}"), ..CollectionReport::default() };
    target
        .create_collection_as(db, name, collection.options.clone(), collection.uuid)
        .with_context(|| format!("creating {db}.{name}"))?;
    report.counted = source.estimated_document_count(db, name).ok();
    let mut copier =
        Copier { target, db, name, batch: Vec::with_capacity(BATCH_DOCUMENTS), inserted: 0, refused: Vec::new() };
    report.damage = source.salvage_documents(db, name, &mut |document| {
        copier.push(document);
        Ok(())
    })?;
    copier.flush();
    report.salvaged = copier.inserted;
    report.damage.extend(copier.refused);
    let specs: Vec<bson::Document> = match source.list_indexes(db, name) {
        Ok(specs) => specs.into_iter().filter(|spec| spec.get_str("name").ok() != Some("_id_")).collect(),
        Err(error) => {
            report.index_errors.push(format!("index specifications unreadable: {error}"));
            Vec::new()
        }
    };
    if !specs.is_empty()
        && let Err(error) = target.create_indexes(db, name, &specs)
    {
        report.index_errors.push(format!("rebuilding the indexes failed: {error}"));
    }
    print_collection(&report);
    Ok(report)
}

/// Inserts salvaged documents into the new store in batches.
struct Copier<'a> {
    target: &'a Store,
    db: &'a str,
    name: &'a str,
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
        let outcome = self.target.insert(self.db, self.name, batch, false, Durability::None);
        self.inserted += outcome.inserted as u64;
        self.refused.extend(outcome.errors.into_iter().map(|(_, e)| format!("a salvaged document was refused: {e}")));
    }
}

fn print_collection(report: &CollectionReport) {
    let counted = report.counted.map_or("unknown".to_string(), |n| n.to_string());
    println!("{}: {} documents salvaged (the collection counted {counted})", report.namespace, report.salvaged);
    for damage in &report.damage {
        println!("  lost: {damage}");
    }
    for error in &report.index_errors {
        println!("  index: {error}");
    }
}

fn print_summary(args: &RepairArgs, reports: &[CollectionReport]) {
    let salvaged: u64 = reports.iter().map(|r| r.salvaged).sum();
    let damaged = reports.iter().filter(|r| !r.damage.is_empty() || !r.index_errors.is_empty()).count();
    let short: u64 = reports.iter().map(|r| r.counted.unwrap_or(r.salvaged).saturating_sub(r.salvaged)).sum();
    println!(
        "repaired {} into {}: {} collections, {salvaged} documents salvaged, {damaged} collections with damage, {short} documents fewer than counted",
        args.dbpath.display(),
        args.out.display(),
        reports.len()
    );
}
