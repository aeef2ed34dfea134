//! `strata restore DIR`: mongodump's layout back into a server — each collection created with
//! its options, its documents inserted as they are in the file (never re-encoded; a document
//! that fails, a duplicate key, is counted and skipped, as mongorestore does), then its
//! indexes built. `--drop` drops each collection first; `--db`/`--collection` restore a part;
//! gzipped files (`.gz`) are read as such.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use bson::{Bson, RawDocumentBuf, doc};
use mongodb::Client;
use tokio::sync::Semaphore;

use crate::layout::{self, Metadata};

#[derive(clap::Args, Debug, Clone)]
pub struct RestoreArgs {
    /// The dump directory (as `strata dump` or mongodump wrote it).
    #[arg(default_value = "dump")]
    pub dir: PathBuf,
    /// The server to write, e.g. mongodb://127.0.0.1:27017.
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    /// Only this database.
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    /// Only this collection (needs --db).
    #[arg(long, short = 'c')]
    pub collection: Option<String>,
    /// Drop each collection before restoring it.
    #[arg(long)]
    pub drop: bool,
    /// Accepted for mongorestore's sake: `.gz` files are always read gunzipped.
    #[arg(long)]
    pub gzip: bool,
    /// Do not build the dumped indexes (the `_id` index is always there).
    #[arg(long = "noIndexRestore")]
    pub no_index_restore: bool,
    /// Collections restored at once.
    #[arg(long = "numParallelCollections", short = 'j', default_value_t = 4)]
    pub parallel: usize,
}

/// Documents (or bytes) per insert.
const BATCH_DOCUMENTS: usize = 1000;
const BATCH_BYTES: usize = 8 * 1024 * 1024;

/// One collection's files in the dump.
#[derive(Debug, Clone)]
struct Dumped {
    db: String,
    collection: String,
    data: PathBuf,
    metadata: Option<PathBuf>,
}

pub async fn run(args: RestoreArgs) -> anyhow::Result<()> {
    if args.collection.is_some() && args.db.is_none() {
        bail!("--collection needs --db");
    }
    let dumped = find_dumped(&args)?;
    if dumped.is_empty() {
        bail!("nothing to restore in {}", args.dir.display());
    }
    let client = Client::with_uri_str(&args.uri).await.with_context(|| format!("connecting to {}", args.uri))?;
    let slots = Arc::new(Semaphore::new(args.parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for one in dumped {
        let (client, args, slots) = (client.clone(), args.clone(), slots.clone());
        tasks.spawn(async move {
            let _slot = slots.acquire().await?;
            restore_collection(&client, &one, &args).await
        });
    }
    let (mut inserted, mut failed) = (0u64, 0u64);
    while let Some(result) = tasks.join_next().await {
        let (done, refused) = result??;
        inserted += done;
        failed += refused;
    }
    eprintln!("{inserted} documents restored successfully. {failed} documents failed to restore.");
    Ok(())
}

fn find_dumped(args: &RestoreArgs) -> anyhow::Result<Vec<Dumped>> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(&args.dir).with_context(|| format!("reading {}", args.dir.display()))?;
    for entry in entries {
        let entry = entry?;
        let db = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type()?.is_dir() || args.db.as_ref().is_some_and(|only| *only != db) {
            continue;
        }
        for file in std::fs::read_dir(entry.path())? {
            let path = file?.path();
            let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
            let (collection, gzip) = match (name.strip_suffix(".bson"), name.strip_suffix(".bson.gz")) {
                (Some(collection), _) => (collection.to_owned(), false),
                (None, Some(collection)) => (collection.to_owned(), true),
                _ => continue,
            };
            if args.collection.as_ref().is_some_and(|only| *only != collection) {
                continue;
            }
            let metadata = layout::metadata_file(&args.dir, &db, &collection, gzip);
            let metadata = metadata.exists().then_some(metadata);
            found.push(Dumped { db: db.clone(), collection, data: path, metadata });
        }
    }
    found.sort_by(|a, b| (&a.db, &a.collection).cmp(&(&b.db, &b.collection)));
    Ok(found)
}

fn read_metadata(path: &Path) -> anyhow::Result<Metadata> {
    let mut text = String::new();
    layout::open(path)?.read_to_string(&mut text).with_context(|| format!("reading {}", path.display()))?;
    Metadata::from_json(&text).with_context(|| format!("in {}", path.display()))
}

use std::io::Read as _;

/// Restores one collection; returns (documents inserted, documents refused).
async fn restore_collection(client: &Client, dumped: &Dumped, args: &RestoreArgs) -> anyhow::Result<(u64, u64)> {
    let database = client.database(&dumped.db);
    let metadata = match &dumped.metadata {
        Some(path) => Some(read_metadata(path)?),
        None => None,
    };
    if args.drop {
        database.collection::<RawDocumentBuf>(&dumped.collection).drop().await?;
    }
    let mut create = doc! { "create": dumped.collection.clone() };
    if let Some(metadata) = &metadata {
        create.extend(metadata.options.clone());
    }
    let exists = vocabulary::ErrorCode::NamespaceExists.code();
    if let Err(error) = database.run_command(create).await
        && !matches!(*error.kind, mongodb::error::ErrorKind::Command(ref failure) if failure.code == exists)
    {
        return Err(error).with_context(|| format!("creating {}.{}", dumped.db, dumped.collection));
    }
    let (inserted, failed) = insert_file(client, dumped).await?;
    if let (Some(metadata), false) = (&metadata, args.no_index_restore) {
        build_indexes(client, dumped, metadata).await?;
    }
    eprintln!("{}.{}: {inserted} documents restored, {failed} failed", dumped.db, dumped.collection);
    Ok((inserted, failed))
}

async fn insert_file(client: &Client, dumped: &Dumped) -> anyhow::Result<(u64, u64)> {
    let collection = client.database(&dumped.db).collection::<RawDocumentBuf>(&dumped.collection);
    let path = dumped.data.clone();
    // The file is read on a blocking thread, a batch at a time.
    let (sender, mut batches) = tokio::sync::mpsc::channel::<anyhow::Result<Vec<RawDocumentBuf>>>(2);
    let reader = tokio::task::spawn_blocking(move || {
        let mut reader = match layout::open(&path) {
            Ok(reader) => reader,
            Err(error) => return drop(sender.blocking_send(Err(error))),
        };
        let (mut batch, mut bytes) = (Vec::new(), 0usize);
        loop {
            match layout::read_document(&mut reader) {
                Ok(Some(document)) => {
                    bytes += document.as_bytes().len();
                    batch.push(document);
                    if batch.len() >= BATCH_DOCUMENTS || bytes >= BATCH_BYTES {
                        if sender.blocking_send(Ok(std::mem::take(&mut batch))).is_err() {
                            return;
                        }
                        bytes = 0;
                    }
                }
                Ok(None) => break,
                Err(error) => return drop(sender.blocking_send(Err(error.context(format!("in {}", path.display()))))),
            }
        }
        if !batch.is_empty() {
            drop(sender.blocking_send(Ok(batch)));
        }
    });
    let (mut inserted, mut failed) = (0u64, 0u64);
    while let Some(batch) = batches.recv().await {
        let batch = batch?;
        let size = batch.len() as u64;
        match collection.insert_many(batch).ordered(false).await {
            Ok(result) => inserted += result.inserted_ids.len() as u64,
            Err(error) => match *error.kind {
                mongodb::error::ErrorKind::InsertMany(ref failure) => {
                    let refused = failure.write_errors.as_ref().map_or(0, |errors| errors.len() as u64);
                    if failure.write_concern_error.is_some() {
                        return Err(error.into());
                    }
                    failed += refused;
                    inserted += size - refused;
                }
                _ => return Err(error).with_context(|| format!("inserting into {}.{}", dumped.db, dumped.collection)),
            },
        }
    }
    reader.await?;
    Ok((inserted, failed))
}

async fn build_indexes(client: &Client, dumped: &Dumped, metadata: &Metadata) -> anyhow::Result<()> {
    let indexes: Vec<Bson> = metadata
        .indexes
        .iter()
        .filter(|index| index.get_str("name").ok() != Some("_id_"))
        .map(|index| {
            let mut index = index.clone();
            index.remove("ns");
            Bson::Document(index)
        })
        .collect();
    if indexes.is_empty() {
        return Ok(());
    }
    let command = doc! { "createIndexes": dumped.collection.clone(), "indexes": indexes };
    client
        .database(&dumped.db)
        .run_command(command)
        .await
        .with_context(|| format!("building the indexes of {}.{}", dumped.db, dumped.collection))?;
    Ok(())
}
