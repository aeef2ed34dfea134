//! Compression per collection and per index: MongoDB's `storageEngine` option of `create` and
//! of an index spec, read for Strata.
//!
//! ```text
//! storageEngine: { strata: { compression: "zstd:6" } }                 Strata's own names
//! storageEngine: { wiredTiger: { configString: "block_compressor=zstd" } }   as for mongod
//! ```
//!
//! Strata's names are those of `strata serve --compression`: `none`, `lz4`, `zstd`,
//! `zstd:LEVEL`. WiredTiger's `block_compressor` values are read as the nearest Strata has:
//! `snappy` as lz4 (both fast), `zlib` as zstd (both small), `zstd` and `none` as themselves.
//! Options for other engines are ignored, as mongod ignores those of engines it does not run.
//! Without the option, the server's default (`--compression`) applies.

use bson::{Bson, Document};
use storage::Compression;

use crate::error::{Error, Result};

/// The compression `options` (a collection's options or an index spec) ask for, if any.
pub(crate) fn requested(options: &Document) -> Result<Option<Compression>> {
    options.get("storageEngine").map_or(Ok(None), from_storage_engine)
}

/// The compression a `storageEngine` option's value asks for, if any.
pub(crate) fn from_storage_engine(engines: &Bson) -> Result<Option<Compression>> {
    let Bson::Document(engines) = engines else {
        return Err(Error::bad_value("'storageEngine' has to be a document."));
    };
    let mut chosen = None;
    for (engine, config) in engines {
        let Bson::Document(config) = config else {
            return Err(Error::bad_value(format!("storageEngine.{engine} has to be an embedded document.")));
        };
        match engine.as_str() {
            "strata" => chosen = strata(config)?.or(chosen),
            "wiredTiger" => chosen = chosen.or(wired_tiger(config)?),
            _ => {}
        }
    }
    Ok(chosen)
}

fn strata(config: &Document) -> Result<Option<Compression>> {
    let mut chosen = None;
    for (key, value) in config {
        match (key.as_str(), value) {
            ("compression", Bson::String(name)) => {
                chosen = Some(Compression::parse(name).ok_or_else(|| {
                    Error::bad_value(format!(
                        "storageEngine.strata.compression must be none, lz4, zstd or zstd:LEVEL (-7 to 22), not \"{name}\""
                    ))
                })?);
            }
            ("compression", _) => return Err(Error::bad_value("storageEngine.strata.compression must be a string")),
            (other, _) => {
                return Err(Error::bad_value(format!(
                    "storageEngine.strata.{other} is not an option (Strata knows compression)"
                )));
            }
        }
    }
    Ok(chosen)
}

/// `block_compressor=...` in a WiredTiger config string (other settings mean nothing here).
fn wired_tiger(config: &Document) -> Result<Option<Compression>> {
    let Some(value) = config.get("configString") else { return Ok(None) };
    let Bson::String(text) = value else {
        return Err(Error::bad_value("storageEngine.wiredTiger.configString must be a string"));
    };
    for setting in text.split(',') {
        let Some((key, value)) = setting.split_once('=') else { continue };
        if key.trim() != "block_compressor" {
            continue;
        }
        return match value.trim() {
            "" | "none" => Ok(Some(Compression::None)),
            "snappy" | "lz4" => Ok(Some(Compression::Lz4)),
            "zlib" | "zstd" => Ok(Some(Compression::Zstd(Compression::ZSTD_DEFAULT_LEVEL))),
            other => Err(Error::bad_value(format!("unknown block_compressor \"{other}\" (none, snappy, zlib, zstd)"))),
        };
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    //! Goal: both spellings are read, and anything else is refused with a clear error.
    use bson::doc;

    use super::*;

    #[test]
    fn strata_and_wired_tiger_spellings() {
        let read = |options: Document| requested(&options);
        assert_eq!(read(doc! {}).unwrap(), None);
        assert_eq!(
            read(doc! {"storageEngine": {"strata": {"compression": "zstd:9"}}}).unwrap(),
            Some(Compression::Zstd(9))
        );
        assert_eq!(read(doc! {"storageEngine": {"strata": {"compression": "none"}}}).unwrap(), Some(Compression::None));
        let wt = |config: &str| read(doc! {"storageEngine": {"wiredTiger": {"configString": config}}});
        assert_eq!(wt("block_compressor=zlib").unwrap(), Some(Compression::Zstd(3)));
        assert_eq!(wt("prefix_compression=true,block_compressor=snappy").unwrap(), Some(Compression::Lz4));
        assert_eq!(wt("prefix_compression=true").unwrap(), None);
        assert_eq!(read(doc! {"storageEngine": {"inMemory": {}}}).unwrap(), None, "other engines' options are ignored");
        // Strata's own option wins over WiredTiger's, whichever comes first.
        let both = doc! {"storageEngine": {"wiredTiger": {"configString": "block_compressor=snappy"}, "strata": {"compression": "zstd"}}};
        assert_eq!(read(both).unwrap(), Some(Compression::Zstd(3)));
    }

    #[test]
    fn bad_options_are_bad_values() {
        for options in [
            doc! {"storageEngine": 1},
            doc! {"storageEngine": {"strata": 1}},
            doc! {"storageEngine": {"strata": {"compression": "brotli"}}},
            doc! {"storageEngine": {"strata": {"compression": 3}}},
            doc! {"storageEngine": {"strata": {"level": 3}}},
            doc! {"storageEngine": {"wiredTiger": {"configString": "block_compressor=lzma"}}},
        ] {
            assert!(matches!(requested(&options), Err(Error::BadValue(_))), "{options}");
        }
    }
}
