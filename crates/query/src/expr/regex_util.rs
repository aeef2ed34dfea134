//! Regex operators `$regexMatch $regexFind $regexFindAll`, and the translation of MongoDB
//! regex options (`i m s x`) to the `regex` crate.
//!
//! MongoDB uses PCRE; the `regex` crate has no backreferences or lookaround, so such patterns
//! are rejected as invalid (code 51111) rather than matched differently. Compiled regexes are
//! cached per thread (bounded), so a pattern repeated for every document compiles once.

use std::cell::RefCell;
use std::collections::HashMap;
use vocabulary::location;

use bson::{Bson, Document};
use regex::Regex;

use super::parse::{NamedArgCodes, named_args};
use super::value::{EvalResult, Value, display, fail, type_name};
use super::{Call, Expr, Func, OpDef};
use crate::error::QueryError;

const CACHE_LIMIT: usize = 256;

thread_local! {
    static CACHE: RefCell<HashMap<(String, String), Regex>> = RefCell::new(HashMap::new());
}

pub fn lookup(name: &str) -> Option<OpDef> {
    match name {
        "$regexMatch" => Some(OpDef::Custom("$regexMatch", parse_regex)),
        "$regexFind" => Some(OpDef::Custom("$regexFind", parse_regex)),
        "$regexFindAll" => Some(OpDef::Custom("$regexFindAll", parse_regex)),
        _ => None,
    }
}

const CODES: NamedArgCodes = NamedArgCodes {
    not_object: location::REGEX_ARGUMENT_NOT_OBJECT,
    unknown: location::REGEX_UNKNOWN_ARGUMENT,
    missing: location::REGEX_MISSING_ARGUMENT,
};

fn parse_regex(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let args = named_args(name, arg, &["input", "regex", "options"], &["input", "regex"], CODES)?;
    let func: Func = match name {
        "$regexMatch" => regex_match,
        "$regexFind" => regex_find,
        _ => regex_find_all,
    };
    Ok(Expr::Call(Call { name, func, args }))
}

/// Compiles a MongoDB pattern with MongoDB option letters.
pub fn compile(pattern: &str, options: &str, op: &str) -> Result<Regex, QueryError> {
    let key = (pattern.to_string(), options.to_string());
    if let Some(found) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(found);
    }
    let mut flags = String::new();
    for option in options.chars() {
        match option {
            'i' | 'm' | 's' | 'x' => flags.push(option),
            'u' => {}
            other => {
                return Err(fail(location::REGEX_INVALID_FLAG, format!("{op} invalid flag in regex options: {other}")));
            }
        }
    }
    let full = if flags.is_empty() { pattern.to_string() } else { format!("(?{flags}){pattern}") };
    let compiled =
        Regex::new(&full).map_err(|e| fail(location::REGEX_INVALID, format!("Invalid Regex in {op}: {e}")))?;
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, compiled.clone());
    });
    Ok(compiled)
}

/// Input text and compiled regex, or `None` when input or regex is null/missing.
fn prepare(args: &[Value], op: &str) -> Result<Option<(String, Regex)>, QueryError> {
    let input = match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => None,
        Some(Bson::String(s)) => Some(s.clone()),
        other => {
            return Err(fail(
                location::REGEX_INPUT_NOT_STRING,
                format!("{op} needs 'input' to be of type string, found: {}", type_name(other)),
            ));
        }
    };
    let options = match &args[2] {
        None | Some(Bson::Null) => None,
        Some(Bson::String(s)) => Some(s.clone()),
        other => {
            return Err(fail(
                location::REGEX_OPTIONS_NOT_STRING,
                format!("{op} needs 'options' to be of type string, found: {}", display(other)),
            ));
        }
    };
    let (pattern, regex_options) = match &args[1] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(None),
        Some(Bson::String(s)) => (s.clone(), String::new()),
        Some(Bson::RegularExpression(r)) => (r.pattern.as_str().to_string(), r.options.as_str().to_string()),
        other => {
            return Err(fail(
                location::REGEX_REGEX_NOT_STRING_OR_REGEX,
                format!("{op} needs 'regex' to be of type string or regex, found: {}", type_name(other)),
            ));
        }
    };
    if !regex_options.is_empty() && options.is_some() {
        return Err(fail(
            location::REGEX_OPTIONS_IN_BOTH_FIELDS,
            format!("{op} found regex option(s) specified in both 'regex' and 'option' fields"),
        ));
    }
    let Some(input) = input else { return Ok(None) };
    let compiled = compile(&pattern, options.as_deref().unwrap_or(&regex_options), op)?;
    Ok(Some((input, compiled)))
}

fn regex_match(args: &[Value]) -> EvalResult {
    let found = prepare(args, "$regexMatch")?.is_some_and(|(input, re)| re.is_match(&input));
    Ok(Some(Bson::Boolean(found)))
}

fn regex_find(args: &[Value]) -> EvalResult {
    let Some((input, re)) = prepare(args, "$regexFind")? else { return Ok(Some(Bson::Null)) };
    Ok(Some(all_matches(&input, &re, 1).into_iter().next().map_or(Bson::Null, Bson::Document)))
}

fn regex_find_all(args: &[Value]) -> EvalResult {
    let Some((input, re)) = prepare(args, "$regexFindAll")? else { return Ok(Some(Bson::Array(Vec::new()))) };
    let found = all_matches(&input, &re, usize::MAX).into_iter().map(Bson::Document).collect();
    Ok(Some(Bson::Array(found)))
}

/// `{match, idx, captures}` documents; `idx` counts code points, unmatched groups are null.
fn all_matches(input: &str, re: &Regex, limit: usize) -> Vec<Document> {
    let mut out = Vec::new();
    for caps in re.captures_iter(input).take(limit) {
        let Some(whole) = caps.get(0) else { continue };
        let captures: Vec<Bson> =
            caps.iter().skip(1).map(|g| g.map_or(Bson::Null, |m| Bson::String(m.as_str().to_string()))).collect();
        let idx = input.get(..whole.start()).map_or(0, |prefix| prefix.chars().count());
        let mut doc = Document::new();
        doc.insert("match", whole.as_str());
        doc.insert("idx", crate::number::long_or_int(idx as i64));
        doc.insert("captures", captures);
        out.push(doc);
    }
    out
}
