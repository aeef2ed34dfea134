//! `strata dump`: every collection (or those `--db`/`--collection` name) to mongodump's layout,
//! documents as the server sends them (never re-encoded), `--query` to filter, `--gzip`, up to
//! `--numParallelCollections` collections at once, a progress bar per collection.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use bson::{Document, RawDocumentBuf, doc};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use mongodb::{Client, Database};
use tokio::sync::Semaphore;

use crate::layout::{self, Metadata};

#[derive(clap::Args, Debug, Clone)]
pub struct DumpArgs {
    /// The server to read, e.g. mongodb://127.0.0.1:27017.
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    /// The directory to write (created if missing).
    #[arg(long, short = 'o', default_value = "dump")]
    pub out: PathBuf,
    /// Only this database.
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    /// Only this collection (needs --db).
    #[arg(long, short = 'c')]
    pub collection: Option<String>,
    /// Only the documents matching this filter (Extended JSON; needs --collection).
    #[arg(long, short = 'q')]
    pub query: Option<String>,
    /// Compress every file with gzip.
    #[arg(long)]
    pub gzip: bool,
    /// Collections dumped at once.
    #[arg(long = "numParallelCollections", short = 'j', default_value_t = 4)]
    pub parallel: usize,
}

pub async fn run(args: DumpArgs) -> anyhow::Result<()> {
    if args.collection.is_some() && args.db.is_none() {
        bail!("--collection needs --db");
    }
    if args.query.is_some() && args.collection.is_none() {
        bail!("--query needs --collection");
    }
    let filter = match &args.query {
        Some(text) => parse_filter(text)?,
        None => Document::new(),
    };
    let client = Client::with_uri_str(&args.uri).await.with_context(|| format!("connecting to {}", args.uri))?;
    let namespaces = namespaces(&client, &args).await?;
    let progress = MultiProgress::new();
    let slots = Arc::new(Semaphore::new(args.parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (db, collection) in namespaces {
        let (client, args, filter, progress, slots) =
            (client.clone(), args.clone(), filter.clone(), progress.clone(), slots.clone());
        tasks.spawn(async move {
            let _slot = slots.acquire().await?;
            dump_collection(&client.database(&db), &collection, &args, filter, &progress).await
        });
    }
    let mut dumped = 0;
    while let Some(result) = tasks.join_next().await {
        result??;
        dumped += 1;
    }
    eprintln!("dumped {dumped} collections to {}", args.out.display());
    Ok(())
}

pub fn parse_filter(text: &str) -> anyhow::Result<Document> {
    let value: serde_json::Value = serde_json::from_str(text).context("--query is not JSON")?;
    match bson::Bson::try_from(value).context("--query is not Extended JSON")? {
        bson::Bson::Document(filter) => Ok(filter),
        _ => bail!("--query must be a JSON object"),
    }
}

/// The (database, collection) pairs to dump: user collections (no `system.*`, no `local` or
/// `config` unless named).
async fn namespaces(client: &Client, args: &DumpArgs) -> anyhow::Result<Vec<(String, String)>> {
    let databases = match &args.db {
        Some(db) => vec![db.clone()],
        None => {
            let names = client.list_database_names().await.context("listing databases")?;
            names.into_iter().filter(|name| !crate::SERVER_DATABASES.contains(&name.as_str())).collect()
        }
    };
    let mut namespaces = Vec::new();
    for db in databases {
        let collections = match &args.collection {
            Some(collection) => vec![collection.clone()],
            None => client.database(&db).list_collection_names().filter(doc! { "type": "collection" }).await?,
        };
        for collection in collections.into_iter().filter(|name| !name.starts_with("system.")) {
            namespaces.push((db.clone(), collection));
        }
    }
    namespaces.sort();
    Ok(namespaces)
}

async fn dump_collection(
    database: &Database,
    collection: &str,
    args: &DumpArgs,
    filter: Document,
    progress: &MultiProgress,
) -> anyhow::Result<()> {
    let db = database.name().to_owned();
    let metadata = metadata(database, collection).await?;
    let mut out = layout::create(&layout::metadata_file(&args.out, &db, collection, args.gzip), args.gzip)?;
    out.write_all(metadata.to_json().as_bytes())?;
    out.flush()?;
    drop(out);
    let handle = database.collection::<RawDocumentBuf>(collection);
    let total = handle.estimated_document_count().await.unwrap_or(0);
    let bar = progress.add(ProgressBar::new(total));
    bar.set_style(
        ProgressStyle::with_template("{prefix:30} {bar:30} {pos}/{len} {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(format!("{db}.{collection}"));
    let path = layout::data_file(&args.out, &db, collection, args.gzip);
    let mut out = layout::create(&path, args.gzip)?;
    let mut cursor = handle.find(filter).await.with_context(|| format!("reading {db}.{collection}"))?;
    let mut count = 0u64;
    while cursor.advance().await? {
        out.write_all(cursor.current().as_bytes())?;
        count += 1;
        if count.is_multiple_of(1000) {
            bar.set_position(count);
        }
    }
    out.flush()?;
    bar.finish_with_message(format!("{count} documents"));
    bar.set_position(count);
    Ok(())
}

use std::io::Write as _;

/// The collection's options (from listCollections) and indexes (from listIndexes).
async fn metadata(database: &Database, collection: &str) -> anyhow::Result<Metadata> {
    let specs = database.run_command(doc! { "listCollections": 1, "filter": { "name": collection } }).await?;
    let info = specs
        .get_document("cursor")
        .ok()
        .and_then(|cursor| cursor.get_array("firstBatch").ok())
        .and_then(|batch| batch.first())
        .and_then(|first| first.as_document())
        .cloned()
        .unwrap_or_default();
    let options = info.get_document("options").cloned().unwrap_or_default();
    let uuid = info.get_document("info").ok().and_then(|info| match info.get("uuid") {
        Some(bson::Bson::Binary(binary)) => Some(binary.bytes.iter().map(|byte| format!("{byte:02x}")).collect()),
        _ => None,
    });
    let listed = database.run_command(doc! { "listIndexes": collection }).await?;
    let indexes = listed
        .get_document("cursor")
        .ok()
        .and_then(|cursor| cursor.get_array("firstBatch").ok())
        .map(|batch| batch.iter().filter_map(|index| index.as_document().cloned()).collect())
        .unwrap_or_default();
    Ok(Metadata { collection: collection.to_owned(), options, indexes, uuid })
}
