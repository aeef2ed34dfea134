//! Seed post 001 ("Performance of Fudge Persistence in MongoDB"): the time to build documents
//! against the time to persist them, for 1,000,000 small documents (3 primitive fields and a
//! list of 5 integers) and 100,000 large ones (300 fields of several types in 10 sub-documents,
//! and three byte arrays of 4, 2 and 1 KiB).
//!
//! The post's columns were three ways of building a Java driver object; here the two ways a Rust
//! program has: a `bson::Document` that the driver serializes (`document`, as the post's
//! BasicDBObject), and BSON bytes built directly (`raw`). The post had no secondary index, and
//! neither has this workload. Building is timed alone (the documents are built and dropped);
//! persisting builds and inserts, as the post's persistence loop did.

use std::time::Instant;

use bson::raw::CString;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document, RawDocumentBuf};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::args::{DocumentForm, FudgeArgs};
use crate::context::Context;
use crate::inserter::{Inserter, shared_recorder};

const SUB_DOCUMENTS: usize = 10;
const FIELDS_PER_SUB_DOCUMENT: usize = 30;
const BYTE_ARRAYS: [usize; 3] = [4096, 2048, 1024];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Size {
    Small,
    Large,
}

pub async fn run(context: &mut Context, args: &FudgeArgs) -> anyhow::Result<()> {
    let small = context.common.scaled(args.small_docs);
    let large = context.common.scaled(args.large_docs);
    context.parameter("small_docs", small);
    context.parameter("large_docs", large);
    context.parameter("forms", &args.forms);
    context.parameter("batch", args.batch);
    context.parameter("write_concern", args.write_concern.label());
    let keys = Keys::new()?;
    let mut forms = args.forms.clone();
    forms.dedup();
    for (size, count) in [(Size::Small, small), (Size::Large, large)] {
        for &form in &forms {
            let mut rng = StdRng::seed_from_u64(context.common.seed);
            let name = format!("{} {}", if size == Size::Small { "small" } else { "large" }, form_name(form));
            match form {
                DocumentForm::Document => {
                    let mut build = |_: u64| document(size, &mut rng);
                    series(context, args, &name, count, &mut build).await?;
                }
                DocumentForm::Raw => {
                    let mut build = |_: u64| raw(size, &keys, &mut rng);
                    series(context, args, &name, count, &mut build).await?;
                }
            }
        }
    }
    Ok(())
}

fn form_name(form: DocumentForm) -> &'static str {
    match form {
        DocumentForm::Document => "bson::Document",
        DocumentForm::Raw => "raw BSON",
    }
}

/// Times building `count` documents, then builds and inserts them as a series.
async fn series<T: Serialize + Send + Sync>(
    context: &mut Context,
    args: &FudgeArgs,
    name: &str,
    count: u64,
    build: &mut impl FnMut(u64) -> T,
) -> anyhow::Result<()> {
    context.progress.phase(&format!("{name}: build"), count);
    let started = Instant::now();
    for i in 0..count {
        std::hint::black_box(build(i));
    }
    let build_seconds = started.elapsed().as_secs_f64();
    context.progress.advance(count);
    context.measure(name, "build seconds", build_seconds, "s");

    let collection = context.fresh_database().await?.collection::<T>("fudge");
    context.progress.phase(&format!("{name}: persist"), count);
    let recorder = shared_recorder(count, context.interval_for(count));
    let mut inserter = Inserter::new(
        collection.clone(),
        args.write_concern,
        args.batch,
        count,
        recorder.clone(),
        context.progress.clone(),
    );
    let inserted = inserter.run_to_end(build).await;
    drop(inserter);
    context.finish_series(name, false, args.write_concern, recorder, &collection, inserted).await?;
    if let Some(series) = context.results.series.last() {
        let persist_seconds = series.seconds;
        context.measure(name, "persist seconds", persist_seconds, "s");
    }
    Ok(())
}

/// Field names of the large document, made once (raw BSON keys are C strings).
struct Keys {
    sub_documents: Vec<CString>,
    fields: Vec<CString>,
    byte_arrays: Vec<CString>,
}

impl Keys {
    fn new() -> anyhow::Result<Keys> {
        let names = |prefix: &str, count: usize| -> anyhow::Result<Vec<CString>> {
            (0..count).map(|i| CString::try_from(format!("{prefix}{i}")).map_err(anyhow::Error::from)).collect()
        };
        Ok(Keys {
            sub_documents: names("section", SUB_DOCUMENTS)?,
            fields: names("field", FIELDS_PER_SUB_DOCUMENT)?,
            byte_arrays: names("blob", BYTE_ARRAYS.len())?,
        })
    }
}

/// The value of field `j` of a large document: the type cycles through six kinds; integers are
/// small, as the post's pseudo-random shorts, ints and longs.
fn field_value(j: usize, rng: &mut StdRng) -> Bson {
    match j % 6 {
        0 => Bson::Int32(rng.gen_range(0..1_000)),
        1 => Bson::Int64(rng.gen_range(0..1_000_000)),
        2 => Bson::Double(rng.r#gen::<f64>() * 1e4),
        3 => Bson::String(format!("value-{:08x}", rng.r#gen::<u32>())),
        4 => Bson::Boolean(rng.r#gen()),
        _ => Bson::DateTime(bson::DateTime::from_millis(rng.gen_range(1_200_000_000_000..1_300_000_000_000))),
    }
}

fn bytes(length: usize, rng: &mut StdRng) -> Binary {
    let mut bytes = vec![0u8; length];
    rng.fill(bytes.as_mut_slice());
    Binary { subtype: BinarySubtype::Generic, bytes }
}

fn small_list(rng: &mut StdRng) -> Vec<i32> {
    (0..5).map(|_| rng.gen_range(0..100)).collect()
}

fn document(size: Size, rng: &mut StdRng) -> Document {
    let mut document = Document::new();
    if size == Size::Small {
        document.insert("level", rng.gen_range(0..8_i32));
        document.insert("timestamp", rng.gen_range(1_200_000_000_000..1_300_000_000_000_i64));
        document.insert("ratio", rng.r#gen::<f64>());
        document.insert("values", small_list(rng));
        return document;
    }
    for s in 0..SUB_DOCUMENTS {
        let mut section = Document::new();
        for j in 0..FIELDS_PER_SUB_DOCUMENT {
            section.insert(format!("field{j}"), field_value(j, rng));
        }
        document.insert(format!("section{s}"), section);
    }
    for (b, length) in BYTE_ARRAYS.iter().enumerate() {
        document.insert(format!("blob{b}"), bytes(*length, rng));
    }
    document
}

fn raw(size: Size, keys: &Keys, rng: &mut StdRng) -> RawDocumentBuf {
    if size == Size::Small {
        let values: bson::RawArrayBuf = small_list(rng).into_iter().collect();
        return bson::rawdoc! {
            "level": rng.gen_range(0..8_i32),
            "timestamp": rng.gen_range(1_200_000_000_000..1_300_000_000_000_i64),
            "ratio": rng.r#gen::<f64>(),
            "values": values,
        };
    }
    let mut document = RawDocumentBuf::new();
    for key in &keys.sub_documents {
        let mut section = RawDocumentBuf::new();
        for (j, field) in keys.fields.iter().enumerate() {
            match field_value(j, rng) {
                Bson::String(text) => section.append(field, text.as_str()),
                value => append_bson(&mut section, field, value),
            }
        }
        document.append(key, &section);
    }
    for (key, length) in keys.byte_arrays.iter().zip(BYTE_ARRAYS) {
        let binary = bytes(length, rng);
        document.append(key, bson::RawBinaryRef { subtype: binary.subtype, bytes: &binary.bytes });
    }
    document
}

fn append_bson(document: &mut RawDocumentBuf, key: &CString, value: Bson) {
    match value {
        Bson::Int32(v) => document.append(key, v),
        Bson::Int64(v) => document.append(key, v),
        Bson::Double(v) => document.append(key, v),
        Bson::Boolean(v) => document.append(key, v),
        Bson::DateTime(v) => document.append(key, v),
        other => document.append(key, other.to_string().as_str()),
    }
}
