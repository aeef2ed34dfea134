//! `strata export` and `strata import`: a collection to and from JSON lines (Extended JSON v2,
//! relaxed by default, as mongoexport writes it) or CSV (named `--fields`, dotted paths for
//! nested values; on import a header line or `--fields`, numbers and booleans recognized, dotted
//! names making nested documents), as mongoexport and mongoimport do.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use bson::{Bson, Document};
use mongodb::Client;

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    Json,
    Csv,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonFormat {
    Relaxed,
    Canonical,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    #[arg(long, short = 'd')]
    pub db: String,
    #[arg(long, short = 'c')]
    pub collection: String,
    /// Only the documents matching this filter (Extended JSON).
    #[arg(long, short = 'q')]
    pub query: Option<String>,
    /// Comma-separated field paths (required for CSV; for JSON, a projection).
    #[arg(long, short = 'f')]
    pub fields: Option<String>,
    #[arg(long = "type", value_enum, default_value = "json")]
    pub file_type: FileType,
    #[arg(long = "jsonFormat", value_enum, default_value = "relaxed")]
    pub json_format: JsonFormat,
    /// The file to write (default: standard output).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    #[arg(long, short = 'd')]
    pub db: String,
    #[arg(long, short = 'c')]
    pub collection: String,
    #[arg(long = "type", value_enum, default_value = "json")]
    pub file_type: FileType,
    /// The file to read (default: standard input).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// CSV: the first line names the fields.
    #[arg(long)]
    pub headerline: bool,
    /// CSV: comma-separated field names, when the file has no header line.
    #[arg(long, short = 'f')]
    pub fields: Option<String>,
    /// Drop the collection first.
    #[arg(long)]
    pub drop: bool,
}

fn field_list(fields: &Option<String>) -> Vec<String> {
    fields
        .as_deref()
        .map(|list| list.split(',').map(|f| f.trim().to_owned()).filter(|f| !f.is_empty()).collect())
        .unwrap_or_default()
}

pub async fn export(args: ExportArgs) -> anyhow::Result<()> {
    let fields = field_list(&args.fields);
    if args.file_type == FileType::Csv && fields.is_empty() {
        bail!("CSV export needs --fields");
    }
    let filter = match &args.query {
        Some(text) => crate::dump::parse_filter(text)?,
        None => Document::new(),
    };
    let client = Client::with_uri_str(&args.uri).await.with_context(|| format!("connecting to {}", args.uri))?;
    let collection = client.database(&args.db).collection::<Document>(&args.collection);
    let mut find = collection.find(filter);
    if !fields.is_empty() && args.file_type == FileType::Json {
        find = find.projection(fields.iter().map(|f| (f.clone(), Bson::Int32(1))).collect::<Document>());
    }
    let mut cursor = find.await?;
    let out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let out = std::io::BufWriter::new(out);
    let mut sink = match args.file_type {
        FileType::Csv => {
            let mut writer = csv::Writer::from_writer(out);
            writer.write_record(&fields)?;
            Sink::Csv(Box::new(writer))
        }
        FileType::Json => Sink::Json(out),
    };
    let mut count = 0u64;
    while cursor.advance().await? {
        let document = cursor.deserialize_current()?;
        match &mut sink {
            Sink::Csv(writer) => writer.write_record(fields.iter().map(|path| csv_cell(lookup(&document, path))))?,
            Sink::Json(out) => {
                let value = match args.json_format {
                    JsonFormat::Relaxed => Bson::Document(document).into_relaxed_extjson(),
                    JsonFormat::Canonical => Bson::Document(document).into_canonical_extjson(),
                };
                writeln!(out, "{value}")?;
            }
        }
        count += 1;
    }
    match &mut sink {
        Sink::Csv(writer) => writer.flush()?,
        Sink::Json(out) => out.flush()?,
    }
    eprintln!("exported {count} records");
    Ok(())
}

enum Sink {
    Json(std::io::BufWriter<Box<dyn Write>>),
    /// Boxed: the CSV writer carries its own buffer state.
    Csv(Box<csv::Writer<std::io::BufWriter<Box<dyn Write>>>>),
}

/// The value at a dotted path (through documents, and array elements by index).
fn lookup<'d>(document: &'d Document, path: &str) -> Option<&'d Bson> {
    let mut parts = path.split('.');
    let mut current = document.get(parts.next()?)?;
    for part in parts {
        current = match current {
            Bson::Document(inner) => inner.get(part)?,
            Bson::Array(items) => items.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// A CSV cell as mongoexport writes it: strings as they are, numbers and booleans plainly,
/// anything else as relaxed Extended JSON.
fn csv_cell(value: Option<&Bson>) -> String {
    match value {
        None | Some(Bson::Null) => String::new(),
        Some(Bson::String(text)) => text.clone(),
        Some(Bson::Int32(n)) => n.to_string(),
        Some(Bson::Int64(n)) => n.to_string(),
        Some(Bson::Double(n)) => n.to_string(),
        Some(Bson::Boolean(b)) => b.to_string(),
        Some(other) => other.clone().into_relaxed_extjson().to_string(),
    }
}

/// Documents per insert.
const BATCH: usize = 1000;

pub async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let input: Box<dyn BufRead> = match &args.file {
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        )),
        None => Box::new(std::io::BufReader::new(std::io::stdin())),
    };
    let documents = match args.file_type {
        FileType::Json => json_documents(input)?,
        FileType::Csv => csv_documents(input, &args)?,
    };
    let client = Client::with_uri_str(&args.uri).await.with_context(|| format!("connecting to {}", args.uri))?;
    let collection = client.database(&args.db).collection::<Document>(&args.collection);
    if args.drop {
        collection.drop().await?;
    }
    let (mut inserted, mut failed) = (0usize, 0usize);
    for batch in documents.chunks(BATCH) {
        match collection.insert_many(batch.to_vec()).ordered(false).await {
            Ok(result) => inserted += result.inserted_ids.len(),
            Err(error) => match *error.kind {
                mongodb::error::ErrorKind::InsertMany(ref failure) if failure.write_concern_error.is_none() => {
                    let refused = failure.write_errors.as_ref().map_or(0, Vec::len);
                    failed += refused;
                    inserted += batch.len() - refused;
                }
                _ => return Err(error.into()),
            },
        }
    }
    eprintln!("{inserted} document(s) imported successfully. {failed} document(s) failed to import.");
    Ok(())
}

/// One Extended JSON document per line (blank lines skipped); an error names the line.
fn json_documents(input: Box<dyn BufRead>) -> anyhow::Result<Vec<Document>> {
    let mut documents = Vec::new();
    for (number, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("line {}: not JSON", number + 1))?;
        match Bson::try_from(value).with_context(|| format!("line {}: not Extended JSON", number + 1))? {
            Bson::Document(document) => documents.push(document),
            _ => bail!("line {}: not a JSON object", number + 1),
        }
    }
    Ok(documents)
}

fn csv_documents(input: Box<dyn BufRead>, args: &ImportArgs) -> anyhow::Result<Vec<Document>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(args.headerline).from_reader(input);
    let fields: Vec<String> =
        if args.headerline { reader.headers()?.iter().map(str::to_owned).collect() } else { field_list(&args.fields) };
    if fields.is_empty() {
        bail!("CSV import needs --headerline or --fields");
    }
    let mut documents = Vec::new();
    for record in reader.records() {
        let record = record?;
        let mut document = Document::new();
        for (field, cell) in fields.iter().zip(record.iter()) {
            insert_path(&mut document, field, typed(cell));
        }
        documents.push(document);
    }
    Ok(documents)
}

/// A CSV cell's value: an integer, a double, a boolean, or the text.
fn typed(cell: &str) -> Bson {
    if let Ok(n) = cell.parse::<i64>() {
        return i32::try_from(n).map(Bson::Int32).unwrap_or(Bson::Int64(n));
    }
    if let Ok(x) = cell.parse::<f64>()
        && cell.chars().any(|c| c.is_ascii_digit())
    {
        return Bson::Double(x);
    }
    match cell {
        "true" => Bson::Boolean(true),
        "false" => Bson::Boolean(false),
        _ => Bson::String(cell.to_owned()),
    }
}

/// Sets `a.b.c` in `document`, making the documents on the way.
fn insert_path(document: &mut Document, path: &str, value: Bson) {
    match path.split_once('.') {
        None => {
            document.insert(path, value);
        }
        Some((head, rest)) => {
            if !matches!(document.get(head), Some(Bson::Document(_))) {
                document.insert(head, Document::new());
            }
            if let Some(Bson::Document(inner)) = document.get_mut(head) {
                insert_path(inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn csv_cells_and_paths() {
        let document = doc! { "a": { "b": [10, 20] }, "s": "x,y", "t": true };
        assert_eq!(csv_cell(lookup(&document, "a.b.1")), "20");
        assert_eq!(csv_cell(lookup(&document, "s")), "x,y");
        assert_eq!(csv_cell(lookup(&document, "missing")), "");
        let mut built = Document::new();
        insert_path(&mut built, "a.b", typed("7"));
        insert_path(&mut built, "a.c", typed("2.5"));
        insert_path(&mut built, "d", typed("true"));
        insert_path(&mut built, "e", typed("text"));
        assert_eq!(built, doc! { "a": { "b": 7, "c": 2.5 }, "d": true, "e": "text" });
        assert_eq!(typed("9000000000"), Bson::Int64(9_000_000_000));
        assert_eq!(typed("inf"), Bson::String("inf".into()));
    }
}
