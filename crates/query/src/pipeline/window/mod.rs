//! `$setWindowFields`: each document gets fields computed over a window of its partition.
//!
//! `{$setWindowFields: {partitionBy?: <expr>, sortBy?: {...}, output: {<path>: {<$fn>: <args>,
//! window?: {...}}, ...}}}`. As MongoDB does, the stage is a sort then a pass: the documents are
//! sorted by their partition value (held in a hidden field, [`PARTITION_FIELD`]) and then by
//! `sortBy`, through `$sort`'s fold (so it spills under `allowDiskUse` like `$sort`); then one
//! partition at a time is held, each output function computed over it ([`function`], windows in
//! [`bounds`]), and its documents emitted with their new fields in sorted order. Without
//! `partitionBy` and `sortBy` the input order is kept and the whole input is one partition.
//!
//! Every function reads the documents as they came in, not the fields other outputs add.
//! Partition values compare under the command's collation; missing and null are one partition;
//! an array is refused. A partition is held whole, counted against the group memory limit
//! (MongoDB's `internalDocumentSourceSetWindowFieldsMaxMemoryBytes` is also 100 MiB), and so
//! is each function's results (a whole-partition `$push` gives every document the partition);
//! past it the stage fails with 5414201 rather than spilling.

mod bounds;
mod function;

use bson::{Bson, Document};
use vocabulary::location;

use super::{Context, DocumentStream, folded, set_path};
use crate::collation::{Collation, compare_values};
use crate::error::{ErrorCode, QueryError, idl};
use crate::expr::{Expr, Variables, approximate_document_bytes, bson_type_name, fail};
use crate::sort::SortSpec;
use function::{Function, Partition};

/// The hidden field holding a document's partition value while it is sorted.
const PARTITION_FIELD: &str = "__strata_setWindowFields_partition";

#[derive(Debug, Clone)]
pub struct SetWindowFields {
    partition_by: Option<Expr>,
    /// The sort the stage runs: the partition field, then `sortBy`.
    sort: Option<SortSpec>,
    /// The value of the single `sortBy` field, for range windows, ranks, `$linearFill`,
    /// `$derivative` and `$integral` (parsing refuses those with another `sortBy`).
    sort_key: Option<Expr>,
    outputs: Vec<(Vec<String>, Function)>,
}

impl SetWindowFields {
    pub fn parse(spec: &Bson) -> Result<SetWindowFields, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(
                ErrorCode::FailedToParse,
                format!("the $setWindowFields stage specification must be an object, found {}", bson_type_name(spec)),
            ));
        };
        let (mut partition_by, mut sort_by, mut output) = (None, None, None);
        for (key, value) in spec {
            match key.as_str() {
                "partitionBy" => partition_by = Some(Expr::parse(value)?),
                "sortBy" => match value {
                    Bson::Document(sort) => sort_by = Some(sort.clone()),
                    other => return Err(wrong_type("sortBy", other)),
                },
                "output" => match value {
                    Bson::Document(out) => output = Some(out),
                    other => return Err(wrong_type("output", other)),
                },
                other => {
                    return Err(idl::unknown_field(&format!("$setWindowFields.{other}")));
                }
            }
        }
        let output = output.ok_or_else(|| idl::missing_field("$setWindowFields.output"))?;
        let parsed_sort = sort_by.as_ref().map(|s| SortSpec::parse_stage(&Bson::Document(s.clone()))).transpose()?;
        let mut outputs = Vec::with_capacity(output.len());
        for (path, function) in output {
            outputs.push((crate::expr::parse_field_path(path)?, Function::parse(function, parsed_sort.as_ref())?));
        }
        let sort_key = match parsed_sort.as_ref().map(SortSpec::fields) {
            Some([(path, _)]) => Some(Expr::parse(&Bson::String(format!("${path}")))?),
            _ => None,
        };
        let mut order = Document::new();
        if partition_by.is_some() {
            order.insert(PARTITION_FIELD, 1);
        }
        for (path, direction) in sort_by.unwrap_or_default() {
            order.insert(path, direction);
        }
        let sort = if order.is_empty() { None } else { Some(SortSpec::parse_stage(&Bson::Document(order))?) };
        Ok(SetWindowFields { partition_by, sort, sort_key, outputs })
    }

    /// The stage over `input`: tag, sort, then one partition at a time.
    pub(super) fn stream<'a>(&self, input: DocumentStream<'a>, context: &Context<'a>) -> DocumentStream<'a> {
        let mut stream = input;
        if let Some(partition_by) = &self.partition_by {
            let (partition_by, vars) = (partition_by.clone(), context.vars.clone());
            stream = Box::new(stream.map(move |item| {
                let mut document = item?;
                let value = crate::expr::evaluate(&partition_by, &document, &vars)?;
                if let Bson::Array(_) = value {
                    return Err(fail(
                        ErrorCode::TypeMismatch,
                        "An expression used to partition cannot evaluate to value of type array",
                    ));
                }
                document.insert(PARTITION_FIELD, value);
                Ok(document)
            }));
        }
        if let Some(sort) = &self.sort {
            stream = folded(stream, Box::new(super::sort::fold(sort, context)));
        }
        Box::new(Windows {
            stage: self.clone(),
            input: stream,
            vars: context.vars.clone(),
            collation: context.collation.clone(),
            limit: context.limits.group_bytes,
            pending: None,
            ready: Vec::new().into_iter(),
            done: false,
        })
    }

    /// Computes every output over one partition and adds them to its documents.
    fn finish_partition(
        &self,
        mut documents: Vec<Document>,
        vars: &Variables,
        collation: Option<&Collation>,
        limit: usize,
    ) -> Result<Vec<Document>, QueryError> {
        let keys = match &self.sort_key {
            Some(key) => documents.iter().map(|d| crate::expr::evaluate(key, d, vars)).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let partition = Partition { documents: &documents, keys: &keys, vars, collation, limit };
        let mut columns = Vec::with_capacity(self.outputs.len());
        for (_, function) in &self.outputs {
            columns.push(function.compute(&partition)?);
        }
        for (i, document) in documents.iter_mut().enumerate() {
            for ((path, _), column) in self.outputs.iter().zip(&mut columns) {
                set_path(document, path, std::mem::take(&mut column[i]));
            }
        }
        Ok(documents)
    }
}

fn wrong_type(field: &str, value: &Bson) -> QueryError {
    idl::wrong_type(&format!("$setWindowFields.{field}"), value, "object")
}

/// The pass over sorted documents, one partition at a time.
struct Windows<'a> {
    stage: SetWindowFields,
    input: DocumentStream<'a>,
    vars: Variables,
    collation: Option<Collation>,
    limit: usize,
    /// The first document of the next partition, read while ending the previous one.
    pending: Option<Document>,
    ready: std::vec::IntoIter<Document>,
    done: bool,
}

impl Windows<'_> {
    /// Reads the next partition whole, the hidden partition field taken off each document (so
    /// no function sees it); `None` at the end of the input.
    fn next_partition(&mut self) -> Result<Option<Vec<Document>>, QueryError> {
        let Some(first) = self.pending.take().map(Ok).or_else(|| self.input.next()) else { return Ok(None) };
        let mut first = first?;
        let key = first.remove(PARTITION_FIELD).unwrap_or(Bson::Null);
        let mut bytes = approximate_document_bytes(&first);
        let mut documents = vec![first];
        while let Some(item) = self.input.next() {
            let mut document = item?;
            let same =
                compare_values(&key, document.get(PARTITION_FIELD).unwrap_or(&Bson::Null), self.collation.as_ref())
                    .is_eq();
            if !same {
                self.pending = Some(document);
                break;
            }
            document.remove(PARTITION_FIELD);
            bytes += approximate_document_bytes(&document);
            self.check_memory(bytes)?;
            documents.push(document);
        }
        Ok(Some(documents))
    }

    fn check_memory(&self, bytes: usize) -> Result<(), QueryError> {
        if bytes <= self.limit { Ok(()) } else { Err(memory_exceeded(bytes, self.limit)) }
    }
}

/// MongoDB's error for a window stage past its memory limit.
fn memory_exceeded(bytes: usize, limit: usize) -> QueryError {
    fail(
        location::SET_WINDOW_FIELDS_MEMORY_LIMIT,
        format!(
            "Exceeded memory limit in DocumentSourceSetWindowFields, used {bytes} bytes but max allowed is {limit} bytes"
        ),
    )
}

impl Iterator for Windows<'_> {
    type Item = Result<Document, QueryError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(document) = self.ready.next() {
                return Some(Ok(document));
            }
            if self.done {
                return None;
            }
            let finished = self.next_partition().and_then(|partition| match partition {
                Some(documents) => {
                    self.stage.finish_partition(documents, &self.vars, self.collation.as_ref(), self.limit).map(Some)
                }
                None => Ok(None),
            });
            match finished {
                Ok(Some(documents)) => self.ready = documents.into_iter(),
                Ok(None) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
