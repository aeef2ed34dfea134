//! Collation: MongoDB's `collation` option, comparing strings by a language's rules (ICU's,
//! through ICU4X's collator and its compiled CLDR data) instead of by their UTF-8 bytes.
//!
//! [`Collation::parse`] validates the spec as MongoDB does (`locale` required; `strength` 1–5,
//! `caseLevel`, `caseFirst`, `numericOrdering`, `alternate`, `maxVariable`, `normalization`,
//! `backwards`, `version`) and [`Collation::spec`] is the spec filled in as MongoDB reports it.
//! `locale: "simple"` is the binary order, as if no collation were given.
//!
//! Comparing under a collation: every string, at any depth of a value, is replaced by a
//! *surrogate* whose UTF-8 bytes sort as the collator orders the string (its ICU sort key,
//! each byte `b` written as the character U+0100 + `b`, whose two-byte UTF-8 forms sort as the
//! bytes do). MongoDB's value order ([`document::compare_values`]) and the order-preserving key
//! bytes of sorts then need nothing else: two strings are equal exactly when the collator says
//! so (equal sort keys), and order as it orders them.
//!
//! `backwards: true` (French secondary order) is ICU's backward-secondary setting, given to
//! ICU4X through its data ([`backwards`]). `normalization` is accepted either way (ICU4X always normalizes, which gives the same
//! answers as MongoDB's `normalization: true`).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use bson::{Bson, Document, doc};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, MaxVariable, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering};
use icu_collator::{Collator, CollatorBorrowed, CollatorPreferences};

mod backwards;

use crate::error::{ErrorCode, QueryError, fail};

/// A parsed collation; cheap to clone.
#[derive(Clone)]
pub struct Collation {
    spec: Document,
    /// `None`: the simple (binary) collation.
    collator: Option<Arc<Collator>>,
}

impl std::fmt::Debug for Collation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Collation({})", self.spec)
    }
}

impl PartialEq for Collation {
    fn eq(&self, other: &Collation) -> bool {
        self.spec == other.spec
    }
}

impl Eq for Collation {}

/// The fields of a collation spec, in MongoDB's order.
const FIELDS: &[&str] = &[
    "locale",
    "caseLevel",
    "caseFirst",
    "strength",
    "numericOrdering",
    "alternate",
    "maxVariable",
    "normalization",
    "backwards",
    "version",
];

impl Collation {
    /// The binary order (`{locale: "simple"}`).
    pub fn simple() -> Collation {
        Collation { spec: doc! {"locale": "simple"}, collator: None }
    }

    /// Parses a `collation` argument.
    pub fn parse(value: &Bson) -> Result<Collation, QueryError> {
        let Bson::Document(spec) = value else {
            return Err(QueryError::TypeMismatch(format!(
                "BSON field 'collation' is the wrong type '{}', expected type 'object'",
                crate::expr::bson_type_name(value)
            )));
        };
        if let Some(unknown) = spec.keys().find(|key| !FIELDS.contains(&key.as_str())) {
            return Err(fail(
                ErrorCode::IDLUnknownField,
                format!("BSON field 'collation.{unknown}' is an unknown field."),
            ));
        }
        let locale = match spec.get("locale") {
            Some(Bson::String(locale)) => locale.as_str(),
            Some(other) => return Err(mismatch("locale", "string", other)),
            None => {
                return Err(fail(
                    ErrorCode::NoSuchKey,
                    "BSON field 'collation.locale' is missing but a required field",
                ));
            }
        };
        if locale == "simple" {
            return match spec.len() {
                1 => Ok(Collation::simple()),
                _ => Err(QueryError::bad_value("Options cannot be specified with the simple collation")),
            };
        }
        let settings = Settings::parse(spec)?;
        let collator = settings.collator(locale)?;
        Ok(Collation { spec: settings.spec(locale), collator: Some(Arc::new(collator)) })
    }

    /// A `collation` argument that may be absent; `{locale: "simple"}` and absence are `None`.
    pub fn parse_optional(value: Option<&Bson>) -> Result<Option<Collation>, QueryError> {
        match value.map(Collation::parse).transpose()? {
            Some(collation) if collation.is_simple() => Ok(None),
            other => Ok(other),
        }
    }

    pub fn is_simple(&self) -> bool {
        self.collator.is_none()
    }

    /// The spec with every field filled in, as MongoDB reports a collation.
    pub fn spec(&self) -> &Document {
        &self.spec
    }

    /// `value` with every string replaced by its surrogate (see the module header); borrowed
    /// when there is nothing to replace.
    pub fn surrogate<'v>(&self, value: &'v Bson) -> Cow<'v, Bson> {
        let Some(collator) = &self.collator else { return Cow::Borrowed(value) };
        match value {
            Bson::String(text) => Cow::Owned(Bson::String(sort_key_text(&collator.as_borrowed(), text))),
            Bson::Symbol(text) => Cow::Owned(Bson::Symbol(sort_key_text(&collator.as_borrowed(), text))),
            Bson::Array(items) if items.iter().any(holds_text) => {
                Cow::Owned(Bson::Array(items.iter().map(|item| self.surrogate(item).into_owned()).collect()))
            }
            Bson::Document(fields) if fields.values().any(holds_text) => Cow::Owned(Bson::Document(
                fields.iter().map(|(name, item)| (name.clone(), self.surrogate(item).into_owned())).collect(),
            )),
            _ => Cow::Borrowed(value),
        }
    }

    /// MongoDB's value order under this collation.
    pub fn compare(&self, a: &Bson, b: &Bson) -> Ordering {
        document::compare_values(&self.surrogate(a), &self.surrogate(b))
    }
}

/// `a` and `b` in MongoDB's order, under `collation` if there is one.
pub fn compare_values(a: &Bson, b: &Bson, collation: Option<&Collation>) -> Ordering {
    match collation {
        Some(collation) => collation.compare(a, b),
        None => document::compare_values(a, b),
    }
}

/// Whether a value holds a string at any depth: what a collation changes the comparisons of
/// (and a filter whose index bounds it changes).
pub fn holds_text(value: &Bson) -> bool {
    match value {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Array(items) => items.iter().any(holds_text),
        Bson::Document(fields) => fields.values().any(holds_text),
        _ => false,
    }
}

/// The sort key's bytes as characters U+0100 + b (two UTF-8 bytes each, in the bytes' order).
fn sort_key_text(collator: &CollatorBorrowed<'_>, text: &str) -> String {
    let mut key: Vec<u8> = Vec::with_capacity(text.len() * 2);
    // Writing into a Vec cannot fail.
    let _ = collator.write_sort_key_to(text, &mut key);
    key.iter().filter_map(|byte| char::from_u32(0x100 + u32::from(*byte))).collect()
}

/// A spec's settings other than the locale, defaults filled in.
struct Settings {
    case_level: bool,
    case_first: &'static str,
    strength: i32,
    numeric_ordering: bool,
    alternate: &'static str,
    max_variable: &'static str,
    normalization: bool,
    backwards: bool,
}

impl Settings {
    fn parse(spec: &Document) -> Result<Settings, QueryError> {
        let flag = |name: &str| match spec.get(name) {
            None => Ok(false),
            Some(Bson::Boolean(value)) => Ok(*value),
            Some(other) => Err(mismatch(name, "bool", other)),
        };
        let choice = |name: &str, allowed: &[&'static str], default: &'static str| match spec.get(name) {
            None => Ok(default),
            Some(Bson::String(value)) => allowed.iter().find(|a| **a == value).copied().ok_or_else(|| {
                QueryError::FailedToParse(format!(
                    "Enumeration value '{value}' for field 'collation.{name}' is not a valid value."
                ))
            }),
            Some(other) => Err(mismatch(name, "string", other)),
        };
        let strength = match spec.get("strength") {
            None => 3,
            Some(value) => match integer(value) {
                Some(level @ 1..=5) => level as i32,
                Some(_) => return Err(QueryError::bad_value("strength must be an integer 1 through 5")),
                None => return Err(mismatch("strength", "int", value)),
            },
        };
        let settings = Settings {
            case_level: flag("caseLevel")?,
            case_first: choice("caseFirst", &["upper", "lower", "off"], "off")?,
            strength,
            numeric_ordering: flag("numericOrdering")?,
            alternate: choice("alternate", &["non-ignorable", "shifted"], "non-ignorable")?,
            max_variable: choice("maxVariable", &["punct", "space"], "punct")?,
            normalization: flag("normalization")?,
            backwards: flag("backwards")?,
        };
        Ok(settings)
    }

    fn collator(&self, locale: &str) -> Result<Collator, QueryError> {
        let invalid = || QueryError::bad_value(format!("Field 'locale' is invalid in: {{ locale: \"{locale}\" }}"));
        // MongoDB writes locales ICU's way (en_US); BCP 47 has hyphens.
        let parsed: icu_locale_core::Locale = locale.replace('_', "-").parse().map_err(|_| invalid())?;
        let mut preferences = CollatorPreferences::from(&parsed);
        preferences.case_first = Some(match self.case_first {
            "upper" => CollationCaseFirst::Upper,
            "lower" => CollationCaseFirst::Lower,
            _ => CollationCaseFirst::False,
        });
        preferences.numeric_ordering =
            Some(if self.numeric_ordering { CollationNumericOrdering::True } else { CollationNumericOrdering::False });
        let mut options = CollatorOptions::default();
        options.strength = Some(match self.strength {
            1 => Strength::Primary,
            2 => Strength::Secondary,
            3 => Strength::Tertiary,
            4 => Strength::Quaternary,
            _ => Strength::Identical,
        });
        options.case_level = Some(if self.case_level { CaseLevel::On } else { CaseLevel::Off });
        options.alternate_handling = Some(if self.alternate == "shifted" {
            AlternateHandling::Shifted
        } else {
            AlternateHandling::NonIgnorable
        });
        options.max_variable =
            Some(if self.max_variable == "space" { MaxVariable::Space } else { MaxVariable::Punctuation });
        if self.backwards {
            let collator = Collator::try_new_unstable(&backwards::BackwardSecondLevel, preferences, options);
            return collator.map_err(|_| invalid());
        }
        CollatorBorrowed::try_new(preferences, options).map(CollatorBorrowed::static_to_owned).map_err(|_| invalid())
    }

    /// The spec MongoDB reports for a collation: every field, the version ICU's data gives.
    fn spec(&self, locale: &str) -> Document {
        doc! {
            "locale": locale,
            "caseLevel": self.case_level,
            "caseFirst": self.case_first,
            "strength": self.strength,
            "numericOrdering": self.numeric_ordering,
            "alternate": self.alternate,
            "maxVariable": self.max_variable,
            "normalization": self.normalization,
            "backwards": self.backwards,
            "version": "57.1",
        }
    }
}

/// A whole number given as any numeric type.
fn integer(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => Some(*d as i64),
        _ => None,
    }
}

fn mismatch(field: &str, expected: &str, value: &Bson) -> QueryError {
    QueryError::TypeMismatch(format!(
        "BSON field 'collation.{field}' is the wrong type '{}', expected type '{expected}'",
        crate::expr::bson_type_name(value)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collation(spec: Document) -> Collation {
        Collation::parse(&Bson::Document(spec)).unwrap()
    }

    #[test]
    fn strengths_order_and_equate_as_icu_does() {
        let primary = collation(doc! {"locale": "en", "strength": 1});
        let secondary = collation(doc! {"locale": "en", "strength": 2});
        let tertiary = collation(doc! {"locale": "en_US"});
        let s = |text: &str| Bson::String(text.into());
        assert_eq!(primary.compare(&s("cafe"), &s("CAFÉ")), Ordering::Equal);
        assert_eq!(secondary.compare(&s("cafe"), &s("CAFE")), Ordering::Equal);
        assert_ne!(secondary.compare(&s("cafe"), &s("café")), Ordering::Equal);
        assert_ne!(tertiary.compare(&s("cafe"), &s("Cafe")), Ordering::Equal);
        // Binary order puts every capital first; a collator interleaves them.
        assert_eq!(document::compare_values(&s("b"), &s("B")), Ordering::Greater);
        assert_eq!(tertiary.compare(&s("a"), &s("B")), Ordering::Less);
        // Nested strings compare under the collation too.
        let nested = |text: &str| Bson::Document(doc! {"k": [text]});
        assert_eq!(primary.compare(&nested("x"), &nested("X")), Ordering::Equal);
        let numeric = collation(doc! {"locale": "en", "numericOrdering": true});
        assert_eq!(numeric.compare(&s("10"), &s("9")), Ordering::Greater);
        assert_eq!(tertiary.compare(&s("10"), &s("9")), Ordering::Less);
        let upper = collation(doc! {"locale": "en", "caseFirst": "upper"});
        assert_eq!(upper.compare(&s("A"), &s("a")), Ordering::Less);
        assert_eq!(tertiary.compare(&s("A"), &s("a")), Ordering::Greater);
        let shifted = collation(doc! {"locale": "en", "alternate": "shifted", "strength": 3});
        assert_eq!(shifted.compare(&s("a-b"), &s("ab")), Ordering::Equal);
    }

    #[test]
    fn backwards_compares_accents_from_the_end() {
        let words = ["côté", "coté", "côte", "cote"];
        let sorted = |spec: Document| {
            let collation = collation(spec);
            let mut keyed: Vec<(Bson, &str)> =
                words.iter().map(|w| (collation.surrogate(&Bson::String((*w).into())).into_owned(), *w)).collect();
            keyed.sort_by(|a, b| document::compare_values(&a.0, &b.0));
            keyed.into_iter().map(|(_, w)| w).collect::<Vec<_>>()
        };
        assert_eq!(sorted(doc! {"locale": "fr"}), ["cote", "coté", "côte", "côté"]);
        assert_eq!(sorted(doc! {"locale": "fr", "backwards": true}), ["cote", "côte", "coté", "côté"]);
        assert_eq!(sorted(doc! {"locale": "en", "backwards": true, "strength": 2}), ["cote", "côte", "coté", "côté"]);
        let spec = collation(doc! {"locale": "fr", "backwards": true}).spec().clone();
        assert_eq!(spec.get_bool("backwards").ok(), Some(true));
        // Equality is unchanged: only the order of accent differences is.
        let backwards = collation(doc! {"locale": "fr", "backwards": true, "strength": 1});
        assert_eq!(backwards.compare(&Bson::String("côté".into()), &Bson::String("cote".into())), Ordering::Equal);
    }

    #[test]
    fn specs_are_checked_and_reported_as_mongodb_does() {
        let spec = collation(doc! {"locale": "fr", "strength": 2}).spec().clone();
        assert_eq!(spec.get_i32("strength").ok(), Some(2));
        assert_eq!(spec.get_str("caseFirst").ok(), Some("off"));
        assert!(Collation::parse_optional(Some(&Bson::Document(doc! {"locale": "simple"}))).unwrap().is_none());
        for (bad, code) in [
            (Bson::Int32(1), 14),
            (Bson::Document(doc! {}), 4),
            (Bson::Document(doc! {"locale": 1}), 14),
            (Bson::Document(doc! {"locale": "en", "strength": 6}), 2),
            (Bson::Document(doc! {"locale": "en", "caseFirst": "middle"}), 9),
            (Bson::Document(doc! {"locale": "en", "bogus": 1}), 40415),
            (Bson::Document(doc! {"locale": "simple", "strength": 1}), 2),
            (Bson::Document(doc! {"locale": "not a locale!"}), 2),
            (Bson::Document(doc! {"locale": "fr", "backwards": 1}), 14),
        ] {
            assert_eq!(Collation::parse(&bad).map(|_| ()).map_err(|e| e.code()), Err(code), "{bad}");
        }
    }
}
