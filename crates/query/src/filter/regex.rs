//! Regular expressions in filters: `$regex`/`$options` and BSON regex values.
//!
//! MongoDB uses PCRE; Strata uses the `regex` crate, which has the same syntax for the common
//! subset but no look-around or backreferences: such patterns are a `BadValue` at parse time,
//! never a wrong answer. Options `i m s x` map to inline flags; `u` is accepted (Rust regexes
//! are Unicode already); any other option is an error, as in MongoDB.

use crate::error::{QueryError, Result};
use vocabulary::location;

/// A compiled filter regex and its source (for equality with stored regex values).
#[derive(Debug, Clone)]
pub struct FilterRegex {
    pub pattern: String,
    pub options: String,
    compiled: ::regex::Regex,
}

impl FilterRegex {
    pub fn new(pattern: &str, options: &str) -> Result<FilterRegex> {
        let mut flags = String::new();
        for option in options.chars() {
            match option {
                'i' | 'm' | 's' | 'x' => flags.push(option),
                'u' => {}
                other => {
                    return Err(crate::error::fail(
                        location::REGEX_INVALID_FLAG,
                        format!("invalid flag in regex options: {other}"),
                    ));
                }
            }
        }
        let source = if flags.is_empty() { pattern.to_string() } else { format!("(?{flags}){pattern}") };
        let compiled = ::regex::Regex::new(&source)
            .map_err(|e| QueryError::bad_value(format!("Regular expression is invalid: {e}")))?;
        Ok(FilterRegex { pattern: pattern.to_string(), options: options.to_string(), compiled })
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.compiled.is_match(text)
    }

    /// Whether a stored regex value is this regex (MongoDB matches those too).
    pub fn equals_value(&self, value: &bson::Regex) -> bool {
        value.pattern.as_str() == self.pattern && value.options.as_str() == self.options
    }
}
