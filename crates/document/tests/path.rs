//! Goal: field paths read documents as MongoDB does, for filters and for index keys.
//! Method: table tests from the manual's examples and the edge cases (arrays of documents,
//! nested and empty arrays, numeric components, missing fields, sparse, parallel arrays).

use bson::{Bson, Document, doc};
use document::keycodec::decode_key;
use document::path::{Candidate, FieldPath, IndexSpec, Sparseness, get_dotted, match_candidates};

fn path(text: &str) -> FieldPath {
    FieldPath::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

fn describe(candidates: &[Candidate<'_>]) -> Vec<String> {
    candidates
        .iter()
        .map(|c| match c {
            Candidate::Missing => "missing".to_string(),
            Candidate::Value(v) => format!("{v}"),
            Candidate::ArrayElement(v) => format!("elem {v}"),
        })
        .collect()
}

#[test]
fn match_candidates_table() {
    let cases: Vec<(Document, &str, Vec<&str>)> = vec![
        (doc! {"a": 1}, "a", vec!["1"]),
        (doc! {}, "a", vec!["missing"]),
        (doc! {"a": 1}, "a.b", vec!["missing"]),
        (doc! {"a": [1, 2]}, "a", vec!["elem 1", "elem 2", "[1, 2]"]),
        (doc! {"a": [1, 2]}, "a.b", vec![]),
        (doc! {"a": [{"b": 1}, {"c": 1}]}, "a.b", vec!["1", "missing"]),
        (doc! {"a": [{"b": 1}, {"b": [2, 3]}]}, "a.b", vec!["1", "elem 2", "elem 3", "[2, 3]"]),
        (doc! {"a": [[1, 2], 3]}, "a", vec!["elem [1, 2]", "elem 3", "[[1, 2], 3]"]),
        (doc! {"a": [5, 6]}, "a.1", vec!["6"]),
        (doc! {"a": [5, 6]}, "a.2", vec![]),
        (doc! {"a": [{"x": 1}, {"x": 2}]}, "a.0.x", vec!["1"]),
        (doc! {"a": {"0": 7}}, "a.0", vec!["7"]),
        (doc! {"a": [{"b": [{"c": 1}, {"c": 2}]}]}, "a.b.c", vec!["1", "2"]),
    ];
    for (document, text, expected) in cases {
        let got = describe(&match_candidates(&document, path(text).parts()));
        assert_eq!(got, expected, "{document} {text}");
    }
}

#[test]
fn get_dotted_table() {
    let document = doc! {"a": {"b": [10, {"c": 3}]}};
    assert_eq!(get_dotted(&document, path("a.b.0").parts()), Some(&Bson::Int32(10)));
    assert_eq!(get_dotted(&document, path("a.b.1.c").parts()), Some(&Bson::Int32(3)));
    assert_eq!(get_dotted(&document, path("a.b.c").parts()), None);
    assert!(FieldPath::parse("a..b").is_err());
    assert!(FieldPath::parse("").is_err());
}

fn key_values(pattern: Document, sparseness: Sparseness, document: Document) -> Vec<Vec<Bson>> {
    let spec = IndexSpec::from_key_pattern(&pattern, sparseness).unwrap_or_else(|e| panic!("{e}"));
    spec.key_values(&document).unwrap_or_else(|e| panic!("{e}")).values
}

// Goal: the keys of the manual's multikey examples, missing → null, [] → undefined.
#[test]
fn index_keys_table() {
    let dense = Sparseness::Dense;
    let cases: Vec<(Document, Document, Vec<Vec<Bson>>)> = vec![
        (doc! {"a": 1}, doc! {"a": 5}, vec![vec![Bson::Int32(5)]]),
        (doc! {"a": 1}, doc! {}, vec![vec![Bson::Null]]),
        (doc! {"a": 1}, doc! {"a": []}, vec![vec![Bson::Undefined]]),
        (doc! {"a": 1}, doc! {"a": [3, 1, 3, 1.0]}, vec![vec![Bson::Int32(1)], vec![Bson::Int32(3)]]),
        (doc! {"a": -1}, doc! {"a": [1, 2]}, vec![vec![Bson::Int32(2)], vec![Bson::Int32(1)]]),
        (doc! {"a": 1}, doc! {"a": [[1, 2]]}, vec![vec![Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])]]),
        (
            doc! {"a.b": 1},
            doc! {"a": [{"b": 2}, {"c": 1}, {"b": [3, 4]}]},
            vec![vec![Bson::Int32(2)], vec![Bson::Int32(3)], vec![Bson::Int32(4)]],
        ),
        (doc! {"a.b": 1}, doc! {"a": [{"c": 1}]}, vec![vec![Bson::Null]]),
        (doc! {"a.1": 1}, doc! {"a": [7, 8]}, vec![vec![Bson::Int32(8)]]),
        (
            doc! {"a": 1, "b": 1},
            doc! {"a": 1, "b": [2, 3]},
            vec![vec![Bson::Int32(1), Bson::Int32(2)], vec![Bson::Int32(1), Bson::Int32(3)]],
        ),
        (
            doc! {"a.x": 1, "a.z": 1},
            doc! {"a": [{"x": 1, "z": 2}, {"x": 3, "z": 4}]},
            vec![
                vec![Bson::Int32(1), Bson::Int32(2)],
                vec![Bson::Int32(1), Bson::Int32(4)],
                vec![Bson::Int32(3), Bson::Int32(2)],
                vec![Bson::Int32(3), Bson::Int32(4)],
            ],
        ),
    ];
    for (pattern, document, expected) in cases {
        assert_eq!(key_values(pattern.clone(), dense, document.clone()), expected, "{pattern} {document}");
        // The encoded keys (fast path for array-free documents included) decode to the same.
        let spec = IndexSpec::from_key_pattern(&pattern, dense).unwrap_or_else(|e| panic!("{e}"));
        let keys = spec.keys(&document).unwrap_or_else(|e| panic!("{e}"));
        let decoded: Vec<Vec<Bson>> = keys
            .keys
            .iter()
            .map(|k| decode_key(&k.order, &k.types, &spec.directions()).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert_eq!(decoded, expected, "encoded {pattern} {document}");
    }
}

#[test]
fn sparse_parallel_and_raw() {
    assert!(key_values(doc! {"a": 1}, Sparseness::Sparse, doc! {"b": 1}).is_empty());
    assert_eq!(key_values(doc! {"a": 1}, Sparseness::Sparse, doc! {"a": null}), vec![vec![Bson::Null]]);
    assert_eq!(
        key_values(doc! {"a": 1, "b": 1}, Sparseness::Sparse, doc! {"b": 1}),
        vec![vec![Bson::Null, Bson::Int32(1)]]
    );

    let spec = IndexSpec::from_key_pattern(&doc! {"a": 1, "b": 1}, Sparseness::Dense).unwrap_or_else(|e| panic!("{e}"));
    let error = spec.key_values(&doc! {"a": [1], "b": [2]}).err().unwrap_or_else(|| panic!("parallel arrays accepted"));
    assert_eq!(error.code(), 171);
    assert_eq!(error.to_string(), "cannot index parallel arrays [b] [a]");

    let raw =
        bson::RawDocumentBuf::try_from(&doc! {"bio": "long", "a": [2, 1], "b": "x"}).unwrap_or_else(|e| panic!("{e}"));
    let keys = spec.keys_raw(&raw).unwrap_or_else(|e| panic!("{e}"));
    assert!(keys.multikey);
    assert_eq!(keys.keys.len(), 2);
    let first =
        decode_key(&keys.keys[0].order, &keys.keys[0].types, &spec.directions()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first, vec![Bson::Int32(1), Bson::String("x".into())]);

    assert!(IndexSpec::from_key_pattern(&doc! {"a": 0}, Sparseness::Dense).is_err());
    assert!(IndexSpec::from_key_pattern(&doc! {"a": "text"}, Sparseness::Dense).is_err());
}

/// A hashed field keys the hash of its value (a missing one as null's), refuses arrays on its
/// path (16766), and leaves the other fields of a compound index multikey as usual.
#[test]
fn hashed_keys() {
    let spec =
        IndexSpec::from_key_pattern(&doc! {"a": "hashed", "b": 1}, Sparseness::Dense).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.hashed(), Some(0));
    let values = |document: bson::Document| spec.key_values(&document).unwrap_or_else(|e| panic!("{e}")).values;
    let hash = |value: Bson| Bson::Int64(document::hash::hash_value(&value));
    assert_eq!(values(doc! {"a": 3.5, "b": 1}), vec![vec![hash(Bson::Int32(3)), Bson::Int32(1)]]);
    assert_eq!(values(doc! {"b": 1}), vec![vec![hash(Bson::Null), Bson::Int32(1)]]);
    assert_eq!(values(doc! {"a": {"x": 1}, "b": [1, 2]}).len(), 2);
    for bad in [doc! {"a": [1]}, doc! {"a": []}, doc! {"a": [{"x": 1}]}] {
        assert_eq!(spec.key_values(&bad).err().map(|e| e.code()), Some(16766), "{bad}");
    }
    let nested =
        IndexSpec::from_key_pattern(&doc! {"a.x": "hashed"}, Sparseness::Sparse).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(nested.key_values(&doc! {"a": [{"x": 1}]}).err().map(|e| e.code()), Some(16766));
    assert!(nested.key_values(&doc! {"b": 1}).unwrap_or_else(|e| panic!("{e}")).values.is_empty());
    let raw = bson::RawDocumentBuf::try_from(&doc! {"a": "s", "b": 2}).unwrap_or_else(|e| panic!("{e}"));
    let keys = spec.keys_raw(&raw).unwrap_or_else(|e| panic!("{e}"));
    let decoded =
        decode_key(&keys.keys[0].order, &keys.keys[0].types, &spec.directions()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decoded, vec![hash(Bson::String("s".into())), Bson::Int32(2)]);
    assert!(IndexSpec::from_key_pattern(&doc! {"a": "hashed", "b": "hashed"}, Sparseness::Dense).is_err());
}

/// `keys_raw` reads the commonest documents straight from their bytes; on every shape (present,
/// missing, null, arrays, nested documents, a repeated field name, dotted paths, sparse and
/// dense, ascending and descending) it must yield what the general path yields from the decoded
/// document.
#[test]
fn raw_keys_agree_with_decoded_keys() {
    let patterns = [
        doc! {"a": 1},
        doc! {"a": -1},
        doc! {"a": 1, "b": -1},
        doc! {"b": 1, "a": 1, "c": 1},
        doc! {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1},
        doc! {"a.x": 1},
        doc! {"a": 1, "b.y": 1},
    ];
    let documents = [
        doc! {"a": 1, "b": "x", "c": 2.5},
        doc! {"a": "text", "bio": "long"},
        doc! {"b": 1},
        doc! {"a": null, "b": null},
        doc! {"a": [3, 1], "b": 2},
        doc! {"a": {"x": 5}, "b": {"y": [1, 2]}},
        doc! {"a": [], "b": 1},
        doc! {"a": bson::oid::ObjectId::from_bytes([7; 12]), "b": bson::DateTime::from_millis(5), "c": true},
        doc! {"a": 1i64, "b": -0.0, "c": f64::NAN, "d": "z", "e": {"f": 1}},
        doc! {"a": "nul\0inside", "b": -7, "c": i64::MIN, "d": false},
        every_type(),
    ];
    // A repeated field name cannot be built with `doc!`: append to raw bytes.
    let mut repeated = bson::RawDocumentBuf::new();
    repeated.append(bson::raw::cstr!("a"), 1);
    repeated.append(bson::raw::cstr!("b"), "first");
    repeated.append(bson::raw::cstr!("a"), "second");
    let mut raws: Vec<bson::RawDocumentBuf> =
        documents.iter().map(|d| bson::RawDocumentBuf::try_from(d).unwrap_or_else(|e| panic!("{e}"))).collect();
    raws.push(repeated);
    for pattern in &patterns {
        for sparseness in [Sparseness::Dense, Sparseness::Sparse] {
            let spec = IndexSpec::from_key_pattern(pattern, sparseness).unwrap_or_else(|e| panic!("{e}"));
            for raw in &raws {
                let decoded = document::path::decode_fields(raw, spec.fields().iter().map(|(p, _)| p.head()))
                    .unwrap_or_else(|e| panic!("{e}"));
                let general = spec.keys(&decoded).map_err(|e| e.to_string());
                let fast = spec.keys_raw(raw).map_err(|e| e.to_string());
                assert_eq!(fast, general, "{pattern} {sparseness:?} {raw:?}");
            }
        }
    }
}

/// One document holding every BSON type, each under several of the names the patterns index.
fn every_type() -> bson::Document {
    use bson::spec::BinarySubtype;
    let values: Vec<bson::Bson> = vec![
        bson::Bson::MinKey,
        bson::Bson::Undefined,
        bson::Bson::Decimal128(bson::Decimal128::from_bytes([1; 16])),
        bson::Bson::Binary(bson::Binary { subtype: BinarySubtype::Generic, bytes: vec![0, 1, 2] }),
        bson::Bson::RegularExpression(bson::Regex { pattern: cstring("^a"), options: cstring("i") }),
        bson::Bson::JavaScriptCode("f()".into()),
        bson::Bson::Symbol("sym".into()),
        bson::Bson::Timestamp(bson::Timestamp { time: 3, increment: 4 }),
        bson::Bson::MaxKey,
    ];
    let mut document = bson::Document::new();
    for (i, value) in values.into_iter().enumerate() {
        document.insert(format!("v{i}"), value.clone());
        // The patterns index a..e: give each a different exotic type in turn.
        if let Some(name) = ["a", "b", "c", "d", "e"].get(i) {
            document.insert(*name, value);
        }
    }
    document
}

#[test]
fn the_scanner_sees_the_elements_bson_sees() {
    let documents = [every_type(), doc! {"a": 1, "b": {"c": [1, "x", {"d": null}]}, "": "empty name"}, doc! {}];
    for document in &documents {
        let raw = bson::RawDocumentBuf::try_from(document).unwrap_or_else(|e| panic!("{e}"));
        let (complete, scanned) = scanned_elements(raw.as_bytes());
        assert_eq!(complete, Some(()), "{document}");
        let expected = bson_elements(&raw).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(scanned, expected, "{document}");
        // Every truncation of the document is refused, never read past its end.
        for cut in 0..raw.as_bytes().len() {
            let prefix = &raw.as_bytes()[..cut];
            assert_eq!(document::scan::for_each_element(prefix, |_| {}), None, "cut at {cut}");
        }
    }
}

/// Each element's name, type and value length, as the scanner reads them, and whether it read
/// the whole document.
/// An element as the scanner reports it: name, type byte, value length.
type Scanned = (Vec<u8>, u8, usize);

fn scanned_elements(bytes: &[u8]) -> (Option<()>, Vec<Scanned>) {
    let mut scanned = Vec::new();
    let complete = document::scan::for_each_element(bytes, |element| {
        scanned.push((element.name.to_vec(), element.kind as u8, element.value.len()))
    });
    (complete, scanned)
}

/// `scanned_elements` as bson's own reader reads them.
fn bson_elements(raw: &bson::RawDocument) -> Result<Vec<(Vec<u8>, u8, usize)>, bson::error::Error> {
    raw.iter_elements()
        .map(|element| element.map(|e| (e.key().as_str().as_bytes().to_vec(), e.element_type() as u8, e.size())))
        .collect()
}

fn cstring(text: &str) -> bson::raw::CString {
    text.to_string().try_into().unwrap_or_else(|e| panic!("{e}"))
}

proptest::proptest! {
    // Damaged bytes (proptest prints the failing case): every document bson reads, the scanner
    // reads as the same elements, and then the raw key path agrees with the general one. (The
    // scanner may accept more: it does not check the contents of values it does not decode, such
    // as a stored string's UTF-8; documents are checked by bson when they are inserted.)
    #[test]
    fn the_scanner_reads_what_bson_reads(at in 0usize..4096, byte in proptest::num::u8::ANY, cut in 0usize..3) {
        let mut document = every_type();
        document.insert("a", "name0000042");
        document.insert("s", 7);
        let raw = bson::RawDocumentBuf::try_from(&document).unwrap_or_else(|e| panic!("{e}"));
        let mut bytes = raw.as_bytes().to_vec();
        let at = at % bytes.len();
        bytes[at] = byte;
        bytes.truncate(bytes.len() - cut);
        let (complete, scanned) = scanned_elements(&bytes);
        let Ok(parsed) = bson::RawDocument::from_bytes(&bytes) else { return Ok(()) };
        let Ok(expected) = bson_elements(parsed) else { return Ok(()) };
        proptest::prop_assert_eq!(complete, Some(()));
        proptest::prop_assert_eq!(&scanned, &expected);
        let spec = IndexSpec::from_key_pattern(&doc! {"a": 1, "s": -1}, Sparseness::Dense).unwrap_or_else(|e| panic!("{e}"));
        let raw_keys = spec.keys_raw(parsed).map(|k| k.keys).map_err(|e| e.to_string());
        let decoded = Document::try_from(parsed).map_err(|e| e.to_string()).and_then(|d| spec.keys(&d).map(|k| k.keys).map_err(|e| e.to_string()));
        if let (Ok(raw_keys), Ok(decoded)) = (&raw_keys, &decoded) {
            proptest::prop_assert_eq!(raw_keys, decoded);
        }
    }
}
