//! Text indexes: what terms a document gives, and how a `$search` string reads.
//!
//! A text index (`{title: "text", body: "text"}`, or `{"$**": "text"}` for every string) is
//! stored as MongoDB shows it: key `{_fts: "text", _ftsx: 1}`, with `weights`,
//! `default_language`, `language_override` and `textIndexVersion: 3` beside it. Its entries are
//! ordinary standard-layout entries whose key is `(term, score)`: one per distinct term of a
//! document, so a search scans one key prefix per term.
//!
//! Analysis, for documents and searches alike: the text is cut into words at every character
//! that is not a letter or a digit, each word lower-cased and stripped of diacritics (Unicode
//! NFD, combining marks dropped: `café` is `cafe`), the language's stop words dropped
//! (NLTK's lists, through the `stop-words` crate), and the rest stemmed by the language's
//! Snowball stemmer (`rust-stemmers`). Language `none` keeps every word and stems none.
//!
//! A term's score in a document follows MongoDB's shape: per field, the term's occurrences
//! weigh 1, 1/2, 1/4... (so repetition saturates), times `0.5 + 0.5 × share of the field's
//! words`, times the field's weight; fields add up. Scores are relative (for sorting by
//! `{$meta: "textScore"}`), not MongoDB's to the last digit.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use bson::{Bson, Document, doc};
use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, Result};

/// The languages MongoDB's text search knows, with their ISO 639-1 codes.
const LANGUAGES: &[(&str, &str)] = &[
    ("danish", "da"),
    ("dutch", "nl"),
    ("english", "en"),
    ("finnish", "fi"),
    ("french", "fr"),
    ("german", "de"),
    ("hungarian", "hu"),
    ("italian", "it"),
    ("norwegian", "nb"),
    ("portuguese", "pt"),
    ("romanian", "ro"),
    ("russian", "ru"),
    ("spanish", "es"),
    ("swedish", "sv"),
    ("turkish", "tr"),
    ("none", "none"),
];

/// A text-search language (an index into `LANGUAGES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Language(usize);

impl Language {
    /// By name (`"english"`) or ISO code (`"en"`); MongoDB's error 17262 for others.
    pub fn parse(name: &str) -> Result<Language> {
        let lower = name.to_lowercase();
        LANGUAGES.iter().position(|(full, code)| *full == lower || *code == lower).map(Language).ok_or_else(|| {
            Error::Query(query::error::fail(
                vocabulary::location::TEXT_INDEX_LANGUAGE_OVERRIDE_UNSUPPORTED,
                format!("language override unsupported: {name}"),
            ))
        })
    }

    pub fn name(self) -> &'static str {
        LANGUAGES.get(self.0).map_or("none", |(name, _)| name)
    }

    fn stemmer(self) -> Option<rust_stemmers::Stemmer> {
        use rust_stemmers::Algorithm::*;
        let algorithm = match self.name() {
            "danish" => Danish,
            "dutch" => Dutch,
            "english" => English,
            "finnish" => Finnish,
            "french" => French,
            "german" => German,
            "hungarian" => Hungarian,
            "italian" => Italian,
            "norwegian" => Norwegian,
            "portuguese" => Portuguese,
            "romanian" => Romanian,
            "russian" => Russian,
            "spanish" => Spanish,
            "swedish" => Swedish,
            "turkish" => Turkish,
            _ => return None,
        };
        Some(rust_stemmers::Stemmer::create(algorithm))
    }

    /// The language's stop words, folded as words are (read once per language).
    fn stop_words(self) -> &'static HashSet<String> {
        static LISTS: OnceLock<Vec<HashSet<String>>> = OnceLock::new();
        let lists = LISTS.get_or_init(|| {
            LANGUAGES
                .iter()
                .map(|(name, code)| match *name {
                    "none" => HashSet::new(),
                    // The crate's NLTK list is keyed by ISO code; Norwegian's is "no".
                    _ => stop_words::get(if *code == "nb" { "no" } else { code }).iter().map(|w| fold(w)).collect(),
                })
                .collect()
        });
        static EMPTY: OnceLock<HashSet<String>> = OnceLock::new();
        lists.get(self.0).unwrap_or_else(|| EMPTY.get_or_init(HashSet::new))
    }

    /// The terms of a text: words folded, stop words dropped, stems.
    pub fn terms(self, text: &str) -> Vec<String> {
        self.terms_with(text, Sensitivity::default())
    }

    /// The terms of a text, each word folded as far as `sensitivity` allows before it is
    /// stemmed (a stop word is one whatever its case and accents).
    pub fn terms_with(self, text: &str, sensitivity: Sensitivity) -> Vec<String> {
        let stemmer = self.stemmer();
        let stop_words = self.stop_words();
        raw_words(text)
            .filter_map(|word| {
                let folded = fold(word);
                match (stop_words.contains(&folded), sensitivity.any()) {
                    (true, _) => None,
                    (false, false) => Some(folded),
                    (false, true) => Some(sensitivity.fold(word)),
                }
            })
            .map(|word| match &stemmer {
                Some(stemmer) => stemmer.stem(&word).into_owned(),
                None => word,
            })
            .collect()
    }
}

/// What a `$text` query tells apart that the index does not: case (`$caseSensitive`) and
/// diacritics (`$diacriticSensitive`). The default folds both, as the index does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sensitivity {
    pub case: bool,
    pub diacritics: bool,
}

impl Sensitivity {
    pub fn any(self) -> bool {
        self.case || self.diacritics
    }

    /// A word folded as far as this sensitivity allows: lower case unless case-sensitive,
    /// without diacritics unless diacritic-sensitive (then composed, so that one spelling
    /// compares equal however it was encoded).
    pub fn fold(self, word: &str) -> String {
        let marks_kept: String = if self.diacritics {
            word.nfc().collect()
        } else {
            word.nfd().filter(|c| !unicode_normalization::char::is_combining_mark(*c)).collect()
        };
        if self.case { marks_kept } else { marks_kept.chars().flat_map(char::to_lowercase).collect() }
    }
}

/// The words of a text as written.
fn raw_words(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty())
}

/// Lower case, diacritics dropped.
pub(crate) fn fold(word: &str) -> String {
    Sensitivity::default().fold(word)
}

/// A text index's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct TextSpec {
    /// Ascending or descending fields before the text fields in the key (a compound text
    /// index): a `$text` query must give each an equality, and the index is scanned under them.
    pub prefix: Vec<(String, Bson)>,
    /// Ascending or descending fields after the text fields: held in each entry after the
    /// score.
    pub suffix: Vec<(String, Bson)>,
    /// Field path → weight (`$**`: every string field, weight 1 unless listed).
    pub weights: Vec<(String, f64)>,
    pub wildcard: bool,
    pub default_language: Language,
    pub language_override: String,
}

impl TextSpec {
    /// From a createIndexes spec: the `"text"` fields of `key`, and the text options.
    pub fn from_spec(key: &Document, spec: &Document) -> Result<TextSpec> {
        let cannot = |message: String| Error::CannotCreateIndex(message);
        let mut weights: Vec<(String, f64)> = Vec::new();
        let mut wildcard = false;
        let (mut prefix, mut suffix) = (Vec::new(), Vec::new());
        let normalized = key.get("_fts").is_some();
        let mut seen_text = false;
        for (field, kind) in key {
            let text_field = match (field.as_str(), kind) {
                ("_fts", Bson::String(text)) if text == "text" => true,
                ("_ftsx", _) => true,
                ("$**", Bson::String(text)) if text == "text" => {
                    wildcard = true;
                    true
                }
                (_, Bson::String(text)) if text == "text" && !normalized => {
                    weights.push((field.clone(), 1.0));
                    true
                }
                (_, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)) => false,
                _ => {
                    return Err(cannot(format!(
                        "a text index may hold text fields and ascending or descending fields only (field '{field}')"
                    )));
                }
            };
            match (text_field, seen_text) {
                (true, _) if !suffix.is_empty() => {
                    return Err(cannot("the text fields of a compound text index must be adjacent".into()));
                }
                (true, _) => seen_text = true,
                (false, false) => prefix.push((field.clone(), kind.clone())),
                (false, true) => suffix.push((field.clone(), kind.clone())),
            }
        }
        if let Some(given) = spec.get("weights") {
            let Bson::Document(given) = given else {
                return Err(cannot("weights must be an object".into()));
            };
            for (field, weight) in given {
                let weight = match weight {
                    Bson::Int32(n) => f64::from(*n),
                    Bson::Int64(n) => *n as f64,
                    Bson::Double(d) => *d,
                    _ => return Err(cannot(format!("weight for text index field '{field}' must be a number"))),
                };
                if !(weight > 0.0 && weight < 100_000.0) {
                    return Err(cannot(format!(
                        "text index weight must be in the exclusive interval (0,99999) but found: {weight}"
                    )));
                }
                if field == "$**" {
                    wildcard = true;
                    continue;
                }
                match weights.iter_mut().find(|(name, _)| name == field) {
                    Some(existing) => existing.1 = weight,
                    None => weights.push((field.clone(), weight)),
                }
            }
        }
        weights.sort_by(|a, b| a.0.cmp(&b.0));
        let default_language = match spec.get("default_language") {
            None => Language::parse("english")?,
            Some(Bson::String(name)) => Language::parse(name)
                .map_err(|_| Error::bad_value(format!("default_language \"{name}\" is not supported")))?,
            Some(_) => return Err(cannot("default_language must be a string".into())),
        };
        let language_override = match spec.get("language_override") {
            None => "language".to_owned(),
            Some(Bson::String(name)) if !name.is_empty() => name.clone(),
            Some(_) => return Err(cannot("language_override must be a non-empty string".into())),
        };
        if weights.is_empty() && !wildcard {
            return Err(cannot("a text index needs at least one text field".into()));
        }
        Ok(TextSpec { prefix, suffix, weights, wildcard, default_language, language_override })
    }

    /// The key listIndexes shows: `{<prefix>, _fts: "text", _ftsx: 1, <suffix>}`.
    pub fn normalized_key(&self) -> Document {
        let mut key: Document = self.prefix.iter().cloned().collect();
        key.insert("_fts", "text");
        key.insert("_ftsx", 1);
        key.extend(self.suffix.iter().cloned());
        key
    }

    /// The fields listIndexes shows beside the key `{_fts: "text", _ftsx: 1}`.
    pub fn normalized_fields(&self) -> Document {
        let mut weights = Document::new();
        if self.wildcard {
            weights.insert("$**", 1);
        }
        for (field, weight) in &self.weights {
            if weight.fract() == 0.0 {
                weights.insert(field.clone(), *weight as i32);
            } else {
                weights.insert(field.clone(), *weight);
            }
        }
        doc! {
            "weights": weights,
            "default_language": self.default_language.name(),
            "language_override": self.language_override.clone(),
            "textIndexVersion": 3,
        }
    }

    /// The document's language: its `language_override` field, else the index's default.
    pub fn language_of(&self, document: &Document) -> Result<Language> {
        match document.get(&self.language_override) {
            Some(Bson::String(name)) => Language::parse(name),
            _ => Ok(self.default_language),
        }
    }

    /// The strings the index reads from a document, each with its field's weight.
    pub fn strings<'d>(&self, document: &'d Document) -> Vec<(&'d str, f64)> {
        let mut found = Vec::new();
        if self.wildcard {
            collect_strings(document, "", &mut |path, text| {
                let weight = self.weights.iter().find(|(field, _)| field == path).map_or(1.0, |(_, w)| *w);
                found.push((text, weight));
            });
            return found;
        }
        for (field, weight) in &self.weights {
            let parts: Vec<String> = field.split('.').map(str::to_owned).collect();
            for value in super::path_values(document, &parts) {
                match value {
                    Bson::String(text) => found.push((text.as_str(), *weight)),
                    Bson::Array(items) => {
                        found.extend(items.iter().filter_map(Bson::as_str).map(|text| (text, *weight)))
                    }
                    _ => {}
                }
            }
        }
        found
    }

    /// Each distinct term of a document with its score (see the module header).
    pub fn terms(&self, document: &Document) -> Result<Vec<(String, f64)>> {
        let language = self.language_of(document)?;
        let mut scores: HashMap<String, f64> = HashMap::new();
        for (text, weight) in self.strings(document) {
            let terms = language.terms(text);
            let mut occurrences: HashMap<&str, (f64, f64)> = HashMap::new();
            for term in &terms {
                let (frequency, count) = occurrences.entry(term).or_insert((0.0, 0.0));
                *frequency += 0.5f64.powf(*count);
                *count += 1.0;
            }
            for (term, (frequency, count)) in occurrences {
                let coefficient = 0.5 * count / terms.len() as f64 + 0.5;
                *scores.entry(term.to_owned()).or_default() += weight * frequency * coefficient;
            }
        }
        let mut terms: Vec<(String, f64)> = scores.into_iter().collect();
        terms.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(terms)
    }
}

/// Every string at any depth (arrays' elements included), with its dotted path (array
/// positions left out, as a text index's paths name fields).
fn collect_strings<'d>(document: &'d Document, prefix: &str, each: &mut impl FnMut(&str, &'d str)) {
    for (name, value) in document {
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        collect_value(value, &path, each);
    }
}

fn collect_value<'d>(value: &'d Bson, path: &str, each: &mut impl FnMut(&str, &'d str)) {
    match value {
        Bson::String(text) => each(path, text),
        Bson::Document(inner) => collect_strings(inner, path, each),
        Bson::Array(items) => items.iter().for_each(|item| collect_value(item, path, each)),
        _ => {}
    }
}

/// A `$text` query: `$search` read into terms, negated terms and phrases.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextQuery {
    /// Stemmed terms; a document matches if it has any.
    pub terms: Vec<String>,
    /// Stemmed terms a matching document must not have.
    pub negated: Vec<String>,
    /// Phrases a matching document must contain (folded), and ones it must not.
    pub phrases: Vec<String>,
    pub negated_phrases: Vec<String>,
    /// `$language`, if given (else the index's default).
    pub language: Option<Language>,
    /// `$caseSensitive` and `$diacriticSensitive`.
    pub sensitivity: Sensitivity,
    /// With a sensitivity, the terms and negated terms analyzed under it (`terms` and `negated`
    /// stay folded: they find candidates in the index, which folds both): a document matches
    /// only if its text, analyzed the same way, has one of `sensitive_terms` and none of
    /// `sensitive_negated`. Empty without a sensitivity.
    pub sensitive_terms: Vec<String>,
    pub sensitive_negated: Vec<String>,
}

impl TextQuery {
    /// Parses `{$search, $language, $caseSensitive, $diacriticSensitive}`.
    pub(crate) fn parse(spec: &Bson) -> Result<TextQuery> {
        let Bson::Document(spec) = spec else {
            return Err(Error::bad_value("$text expects an object"));
        };
        let mut search = None;
        let mut language = None;
        let mut sensitivity = Sensitivity::default();
        for (key, value) in spec {
            match (key.as_str(), value) {
                ("$search", Bson::String(text)) => search = Some(text.clone()),
                ("$language", Bson::String(name)) => language = Some(Language::parse(name)?),
                ("$caseSensitive", Bson::Boolean(on)) => sensitivity.case = *on,
                ("$diacriticSensitive", Bson::Boolean(on)) => sensitivity.diacritics = *on,
                ("$caseSensitive" | "$diacriticSensitive", _) => {
                    return Err(Error::bad_value(format!("{key} must be a boolean")));
                }
                _ => return Err(Error::bad_value(format!("bad $text field: {key}"))),
            }
        }
        let Some(search) = search else {
            return Err(Error::bad_value("$search required for $text"));
        };
        let mut query = TextQuery {
            terms: Vec::new(),
            negated: Vec::new(),
            phrases: Vec::new(),
            negated_phrases: Vec::new(),
            language,
            sensitivity,
            sensitive_terms: Vec::new(),
            sensitive_negated: Vec::new(),
        };
        query.read_search(&search);
        Ok(query)
    }

    /// Splits `$search`: `"..."` phrases, `-` before a word or phrase negates it. Words are
    /// kept raw here and analyzed against the index's language by [`TextQuery::analyzed`].
    fn read_search(&mut self, search: &str) {
        let mut rest = search;
        while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
            rest = &rest[start..];
            let negated = rest.starts_with('-');
            let body = if negated { &rest[1..] } else { rest };
            if let Some(after_quote) = body.strip_prefix('"') {
                let end = after_quote.find('"').unwrap_or(after_quote.len());
                let phrase = phrase_under(&after_quote[..end], self.sensitivity);
                if negated {
                    self.negated_phrases.push(phrase.clone())
                } else {
                    self.phrases.push(phrase.clone())
                }
                // A phrase's words are also terms (the index finds its candidates by them).
                if !negated {
                    self.terms.push(after_quote[..end].to_owned());
                }
                rest = after_quote.get(end + 1..).unwrap_or("");
            } else {
                let end = body.find(char::is_whitespace).unwrap_or(body.len());
                let word = body[..end].to_owned();
                if negated {
                    self.negated.push(word)
                } else {
                    self.terms.push(word)
                }
                rest = &body[end..];
            }
        }
    }

    /// The query with its words analyzed in `language`: stemmed, stop words dropped.
    pub(crate) fn analyzed(&self, language: Language) -> TextQuery {
        let analyze = |raw: &[String], sensitivity: Sensitivity| {
            let mut terms: Vec<String> = raw.iter().flat_map(|text| language.terms_with(text, sensitivity)).collect();
            terms.sort();
            terms.dedup();
            terms
        };
        let sensitive = |raw: &[String]| match self.sensitivity.any() {
            true => analyze(raw, self.sensitivity),
            false => Vec::new(),
        };
        TextQuery {
            terms: analyze(&self.terms, Sensitivity::default()),
            negated: analyze(&self.negated, Sensitivity::default()),
            phrases: self.phrases.clone(),
            negated_phrases: self.negated_phrases.clone(),
            language: Some(language),
            sensitivity: self.sensitivity,
            sensitive_terms: sensitive(&self.terms),
            sensitive_negated: sensitive(&self.negated),
        }
    }
}

/// A phrase as a query of this sensitivity compares it: its words folded as far as the
/// sensitivity allows, separated by single spaces.
pub(crate) fn phrase_under(text: &str, sensitivity: Sensitivity) -> String {
    raw_words(text).map(|word| sensitivity.fold(word)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn english() -> Language {
        Language::parse("en").unwrap_or_else(|e| panic!("{e}"))
    }

    /// Words are folded, stop words dropped, the rest stemmed.
    #[test]
    fn analysis_folds_drops_and_stems() {
        assert_eq!(english().terms("The Cafés are RUNNING, and running!"), vec!["cafe", "run", "run"]);
        let none = Language::parse("none").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(none.terms("The runners"), vec!["the", "runners"]);
        assert_eq!(Language::parse("klingon").err().map(|e| e.code()), Some(17262));
        assert_eq!(Language::parse("es").map(Language::name).ok(), Some("spanish"));
    }

    /// Scores: more occurrences and heavier fields score higher; terms are distinct.
    #[test]
    fn document_terms_and_scores() {
        let spec = TextSpec::from_spec(&doc! {"title": "text", "body": "text"}, &doc! {"weights": {"title": 10}})
            .unwrap_or_else(|e| panic!("{e}"));
        let terms =
            spec.terms(&doc! {"title": "coffee", "body": "tea and coffee, tea, tea"}).unwrap_or_else(|e| panic!("{e}"));
        let score = |term: &str| terms.iter().find(|(t, _)| t == term).map(|(_, s)| *s).unwrap_or(0.0);
        assert!(score("coffe") > score("tea") && score("tea") > 0.0, "{terms:?}");
        assert_eq!(terms.len(), 2);
        let french = spec.terms(&doc! {"title": "les chats", "language": "french"}).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(french.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), vec!["chat"]);
        assert_eq!(spec.normalized_fields().get_document("weights").ok(), Some(&doc! {"body": 1, "title": 10}));
    }

    /// `$search`: words, `-negations`, `"phrases"` and `-"negated phrases"`.
    #[test]
    fn search_strings() {
        let query = TextQuery::parse(&Bson::Document(doc! {"$search": "coffee -tea \"dark roast\" -\"decaf blend\""}))
            .unwrap_or_else(|e| panic!("{e}"))
            .analyzed(english());
        assert_eq!(query.terms, vec!["coffe", "dark", "roast"]);
        assert_eq!(query.negated, vec!["tea"]);
        assert_eq!(query.phrases, vec!["dark roast"]);
        assert_eq!(query.negated_phrases, vec!["decaf blend"]);
    }

    #[test]
    fn sensitive_analysis_keeps_case_or_diacritics_and_still_drops_stop_words() {
        let case = Sensitivity { case: true, diacritics: false };
        let marks = Sensitivity { case: false, diacritics: true };
        assert_eq!(Sensitivity::default().fold("Résumé"), "resume");
        assert_eq!(case.fold("Résumé"), "Resume");
        assert_eq!(marks.fold("Résumé"), "résumé");
        // One spelling whatever its encoding: e + combining acute is é.
        assert_eq!(marks.fold("re\u{301}sume\u{301}"), "résumé");
        assert_eq!(english().terms_with("The Runners", case), vec![english().terms_with("Runners", case)[0].clone()]);
        assert_ne!(english().terms_with("Runners", case), english().terms("Runners"));
        assert_eq!(phrase_under("  RESUME,  in!", case), "RESUME in");
        assert_eq!(phrase_under("  RESUME,  in!", Sensitivity::default()), "resume in");
    }
}
