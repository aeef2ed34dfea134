//! mongodump's directory layout: `<out>/<db>/<collection>.bson` (the documents, each BSON
//! document's bytes one after another) and `<out>/<db>/<collection>.metadata.json` (canonical
//! Extended JSON: `{indexes, uuid, collectionName, type, options}`), each with `.gz` appended
//! when gzipped. Collection names are used as file names as they are (MongoDB's names hold no
//! '/'; mongodump escapes only names too long for a file system, which Strata's limits avoid).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use bson::{Bson, Document, RawDocumentBuf, doc};

pub fn data_file(dir: &Path, db: &str, collection: &str, gzip: bool) -> PathBuf {
    dir.join(db).join(format!("{collection}.bson{}", if gzip { ".gz" } else { "" }))
}

pub fn metadata_file(dir: &Path, db: &str, collection: &str, gzip: bool) -> PathBuf {
    dir.join(db).join(format!("{collection}.metadata.json{}", if gzip { ".gz" } else { "" }))
}

/// What mongodump writes about a collection besides its documents.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub collection: String,
    pub options: Document,
    pub indexes: Vec<Document>,
    pub uuid: Option<String>,
}

impl Metadata {
    pub fn to_json(&self) -> String {
        let mut document = doc! {
            "indexes": self.indexes.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
            "collectionName": self.collection.clone(),
            "type": "collection",
            "options": self.options.clone(),
        };
        if let Some(uuid) = &self.uuid {
            document.insert("uuid", uuid.clone());
        }
        Bson::Document(document).into_canonical_extjson().to_string()
    }

    pub fn from_json(text: &str) -> anyhow::Result<Metadata> {
        let value: serde_json::Value = serde_json::from_str(text).context("the metadata is not JSON")?;
        let Bson::Document(document) = Bson::try_from(value).context("the metadata is not Extended JSON")? else {
            bail!("the metadata is not a JSON object");
        };
        let indexes = match document.get_array("indexes") {
            Ok(indexes) => indexes.iter().filter_map(|index| index.as_document().cloned()).collect(),
            Err(_) => Vec::new(),
        };
        Ok(Metadata {
            collection: document.get_str("collectionName").unwrap_or_default().to_owned(),
            options: document.get_document("options").cloned().unwrap_or_default(),
            indexes,
            uuid: document.get_str("uuid").ok().map(str::to_owned),
        })
    }
}

/// A writer of a file, gzipped or not.
pub fn create(path: &Path, gzip: bool) -> anyhow::Result<Box<dyn Write + Send>> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let file =
        std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?);
    Ok(if gzip {
        Box::new(flate2::write::GzEncoder::new(file, flate2::Compression::default()))
    } else {
        Box::new(file)
    })
}

/// A reader of a file, gunzipped if its name ends in `.gz`.
pub fn open(path: &Path) -> anyhow::Result<Box<dyn Read + Send>> {
    let file =
        std::io::BufReader::new(std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?);
    let gzip = path.extension().is_some_and(|extension| extension == "gz");
    Ok(if gzip { Box::new(flate2::read::GzDecoder::new(file)) } else { Box::new(file) })
}

/// The next document of a `.bson` file, or `None` at its end.
pub fn read_document(reader: &mut dyn Read) -> anyhow::Result<Option<RawDocumentBuf>> {
    let mut length = [0u8; 4];
    match reader.read_exact(&mut length) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error.into()),
    }
    let size = i32::from_le_bytes(length);
    if !(5..=48 * 1024 * 1024).contains(&size) {
        bail!("a document claims {size} bytes: the file is not a BSON dump");
    }
    let mut bytes = length.to_vec();
    bytes.resize(size as usize, 0);
    reader.read_exact(bytes.get_mut(4..).unwrap_or_default()).context("the file ends inside a document")?;
    Ok(Some(RawDocumentBuf::from_bytes(bytes).context("a document in the file is not valid BSON")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_as_canonical_extended_json() {
        let metadata = Metadata {
            collection: "c".into(),
            options: doc! { "capped": false },
            indexes: vec![doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }],
            uuid: None,
        };
        let json = metadata.to_json();
        assert!(json.contains(r#""v":{"$numberInt":"2"}"#), "{json}");
        assert_eq!(Metadata::from_json(&json).unwrap(), metadata);
    }

    #[test]
    fn documents_read_back_and_bad_files_are_refused() {
        let one = bson::rawdoc! { "a": 1 };
        let mut bytes = one.as_bytes().to_vec();
        bytes.extend_from_slice(one.as_bytes());
        let mut reader = &bytes[..];
        assert_eq!(read_document(&mut reader).unwrap().unwrap(), one);
        assert_eq!(read_document(&mut reader).unwrap().unwrap(), one);
        assert!(read_document(&mut reader).unwrap().is_none());
        let mut truncated = &bytes[..7];
        assert!(read_document(&mut truncated).is_err());
        let mut garbage = &b"\xff\xff\xff\x7fxxxx"[..];
        assert!(read_document(&mut garbage).is_err());
    }
}
