//! Goal: filter comparisons agree with the index-key order (so an index range scan returns
//! exactly what a collection scan would), and matching stored bytes agrees with matching the
//! decoded document.
//! Method: proptest over numbers of every type, strings and dates; proptest prints the
//! failing case and its seed.

use std::cmp::Ordering;

use bson::{Bson, Decimal128, doc};
use document::canonical_type_rank;
use document::keycodec::encode_value;
use proptest::prelude::*;
use query::filter::Filter;

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        (-5i32..5).prop_map(Bson::Int32),
        (-5i64..5).prop_map(Bson::Int64),
        (-20i32..20).prop_map(|i| Bson::Double(f64::from(i) / 4.0)),
        prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0]).prop_map(Bson::Double),
        prop::sample::select(vec!["-1.5", "0.25", "2.000", "NaN", "-0"])
            .prop_map(|t| Bson::Decimal128(t.parse::<Decimal128>().unwrap_or_else(|e| panic!("{e}")))),
        "[ab]{0,2}".prop_map(Bson::String),
        (-3i64..3).prop_map(|m| Bson::DateTime(bson::DateTime::from_millis(m))),
        Just(Bson::Null),
    ]
}

fn is_nan(value: &Bson) -> bool {
    match value {
        Bson::Double(d) => d.is_nan(),
        Bson::Decimal128(d) => d.to_string().contains("NaN"),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    // {a: {$op: v}} on {a: x} holds exactly when x and v have the same type rank and the
    // key bytes compare as the operator says (NaN: only equal to NaN).
    #[test]
    fn comparisons_agree_with_key_order(x in scalar(), v in scalar()) {
        let same_rank = canonical_type_rank(&x) == canonical_type_rank(&v);
        let order = encode_value(&x).cmp(&encode_value(&v));
        let nan = is_nan(&x) || is_nan(&v);
        let document = doc! {"a": x.clone()};
        for (operator, wanted) in [("$gt", [Ordering::Greater].as_slice()), ("$gte", &[Ordering::Greater, Ordering::Equal]), ("$lt", &[Ordering::Less]), ("$lte", &[Ordering::Less, Ordering::Equal]), ("$eq", &[Ordering::Equal])] {
            let filter = Filter::parse(&doc! {"a": {operator: v.clone()}}).unwrap_or_else(|e| panic!("{e}"));
            let expected = same_rank && wanted.contains(&order) && (!nan || order == Ordering::Equal);
            prop_assert_eq!(filter.matches(&document).unwrap_or_else(|e| panic!("{e}")), expected, "{} {:?} on {:?}", operator, v, x);
        }
    }

    // Raw matching (partial decode) is the same as matching the decoded document.
    #[test]
    fn raw_matching_agrees(x in scalar(), y in scalar(), v in scalar()) {
        let document = doc! {"bio": "long text", "a": x, "b": {"c": [y]}};
        let raw = bson::RawDocumentBuf::try_from(&document).unwrap_or_else(|e| panic!("{e}"));
        for filter in [doc! {"a": v.clone()}, doc! {"b.c": {"$gte": v.clone()}}, doc! {"$or": [{"a": {"$ne": v.clone()}}, {"b.c": v.clone()}]}] {
            let parsed = Filter::parse(&filter).unwrap_or_else(|e| panic!("{e}"));
            prop_assert_eq!(parsed.matches_raw(&raw).unwrap_or_else(|e| panic!("{e}")), parsed.matches(&document).unwrap_or_else(|e| panic!("{e}")));
        }
    }
}
