//! Aggregation pipelines: parsed once ([`Pipeline::parse`]), then run over a stream of
//! documents ([`Pipeline::stream`], [`Pipeline::run`]).
//!
//! Streaming stages (`$match`, `$project`, `$addFields`, `$unwind`, `$limit`, `$skip`,
//! `$redact`, `$replaceRoot`, `$lookup`) pull one document at a time, so `$limit` stops the
//! scan early; blocking stages (`$group`, `$sort`, `$count`, `$bucket*`, `$facet`, `$sample`,
//! `$sortByCount`, output stages) collect their input first. The first error ends the stream.
//!
//! Everything outside the documents comes from a [`Context`]: the database name, the
//! [`CollectionSource`] for `$lookup`/`$unionWith`/`$out`/`$merge`, the [`Variables`]
//! (`$$NOW`, `let`), and a seeded random generator for `$sample` so tests are repeatable.
//! Invariant: `$out`/`$merge` only as the last stage, checked at parse time.

mod group;
mod lookup;
mod output;
mod project;
mod redact;
mod sort;
mod source;
mod stage;
mod unwind;
mod update;

use std::cell::RefCell;
use std::rc::Rc;

use bson::{Bson, Document};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

pub use group::GroupSpec;
pub use project::{AddFields, Projection};
pub use sort::{Direction, SortSpec};
pub use source::{CollectionSource, InMemorySource, Namespace};
pub use stage::Stage;
pub use update::{UpdatePipeline, apply_pipeline_update};

use crate::error::QueryError;
use crate::expr::{Expr, Scope, Variables, bson_type_name, fail};

/// A stream of documents between stages.
pub type DocumentStream<'a> = Box<dyn Iterator<Item = Result<Document, QueryError>> + 'a>;

/// What a pipeline run needs besides its input.
#[derive(Clone)]
pub struct Context<'a> {
    pub db: String,
    pub source: &'a dyn CollectionSource,
    pub vars: Variables,
    rng: Rc<RefCell<StdRng>>,
}

impl<'a> Context<'a> {
    /// A context with `$$NOW` = now and an entropy-seeded generator.
    pub fn new(db: impl Into<String>, source: &'a dyn CollectionSource) -> Context<'a> {
        Context { db: db.into(), source, vars: Variables::new(), rng: Rc::new(RefCell::new(StdRng::from_entropy())) }
    }

    /// Replaces the random generator with a seeded one (repeatable `$sample`).
    pub fn with_seed(mut self, seed: u64) -> Context<'a> {
        self.rng = Rc::new(RefCell::new(StdRng::seed_from_u64(seed)));
        self
    }

    /// The same context with other variables (sub-pipelines with `let`).
    pub fn with_vars(&self, vars: Variables) -> Context<'a> {
        Context { vars, ..self.clone() }
    }
}

/// `$match`: the filter, with a top-level `$expr` evaluated here so it sees the pipeline's
/// variables (`$lookup` `let`).
#[derive(Debug, Clone)]
pub struct MatchStage {
    filter: Option<crate::filter::Filter>,
    expr: Option<Expr>,
}

impl MatchStage {
    pub fn parse(spec: &Document) -> Result<MatchStage, QueryError> {
        let mut rest = spec.clone();
        let expr = match rest.remove("$expr") {
            Some(e) => Some(Expr::parse(&e)?),
            None => None,
        };
        let filter = if rest.is_empty() && expr.is_some() { None } else { Some(crate::filter::Filter::parse(&rest)?) };
        Ok(MatchStage { filter, expr })
    }

    pub fn matches(&self, document: &Document, vars: &Variables) -> Result<bool, QueryError> {
        if let Some(expr) = &self.expr
            && !crate::expr::evaluate_truthy(expr, document, vars)?
        {
            return Ok(false);
        }
        match &self.filter {
            Some(filter) => filter.matches(document),
            None => Ok(true),
        }
    }
}

/// A parsed pipeline.
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    stages: Vec<Stage>,
}

impl Pipeline {
    pub fn parse(stages: &[Bson]) -> Result<Pipeline, QueryError> {
        let mut parsed = Vec::with_capacity(stages.len());
        for (i, stage) in stages.iter().enumerate() {
            let stage = stage::parse_stage(stage)?;
            if stage.is_output() && i + 1 != stages.len() {
                let name = if matches!(stage, Stage::Out(_)) { "$out" } else { "$merge" };
                return Err(fail(40601, format!("{name} can only be the final stage in the pipeline")));
            }
            parsed.push(stage);
        }
        Ok(Pipeline { stages: parsed })
    }

    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// Runs the pipeline to completion.
    pub fn run(&self, input: Vec<Document>, context: &Context<'_>) -> Result<Vec<Document>, QueryError> {
        self.stream(Box::new(input.into_iter().map(Ok)), context).collect()
    }

    /// Chains the stages over `input`; nothing runs until the result is pulled.
    pub fn stream<'a>(&'a self, input: DocumentStream<'a>, context: &'a Context<'a>) -> DocumentStream<'a> {
        let mut stream = input;
        for stage in &self.stages {
            stream = apply_stage(stage, stream, context);
        }
        stream
    }
}

fn map_each<'a>(
    input: DocumentStream<'a>,
    f: impl Fn(Document) -> Result<Document, QueryError> + 'a,
) -> DocumentStream<'a> {
    Box::new(input.map(move |item| item.and_then(&f)))
}

/// Collects the input, then hands the documents to `f` (blocking stages).
fn blocking<'a>(
    input: DocumentStream<'a>,
    f: impl FnOnce(Vec<Document>) -> Result<Vec<Document>, QueryError> + 'a,
) -> DocumentStream<'a> {
    let mut pending = Some((input, f));
    let mut output: Option<std::vec::IntoIter<Document>> = None;
    Box::new(std::iter::from_fn(move || {
        if let Some((input, f)) = pending.take() {
            match input.collect::<Result<Vec<_>, _>>().and_then(f) {
                Ok(documents) => output = Some(documents.into_iter()),
                Err(e) => return Some(Err(e)),
            }
        }
        output.as_mut()?.next().map(Ok)
    }))
}

fn apply_stage<'a>(stage: &'a Stage, input: DocumentStream<'a>, context: &'a Context<'a>) -> DocumentStream<'a> {
    let vars = &context.vars;
    match stage {
        Stage::Match(m) => Box::new(input.filter_map(move |item| match item {
            Ok(d) => match m.matches(&d, vars) {
                Ok(true) => Some(Ok(d)),
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            },
            Err(e) => Some(Err(e)),
        })),
        Stage::Project(p) => map_each(input, move |d| p.apply(&d, vars)),
        Stage::AddFields(a) => map_each(input, move |d| a.apply(&d, vars)),
        Stage::ReplaceRoot(e) => map_each(input, move |d| replace_root(e, &d, vars)),
        Stage::Redact(e) => Box::new(input.filter_map(move |item| match item {
            Ok(d) => redact::redact(e, d, vars).transpose(),
            Err(e) => Some(Err(e)),
        })),
        Stage::Limit(n) => Box::new(input.take(*n)),
        Stage::Skip(n) => Box::new(input.skip(*n)),
        Stage::Unwind(u) => Box::new(input.flat_map(move |item| -> Vec<Result<Document, QueryError>> {
            match item {
                Ok(d) => u.apply(d).into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            }
        })),
        Stage::Lookup(spec) => lookup_stream(spec, input, context),
        Stage::UnionWith(spec) => {
            let mut extra = Some(spec);
            Box::new(input.chain(std::iter::from_fn(move || extra.take().map(|s| s.documents(context))).flat_map(
                |result| -> Vec<Result<Document, QueryError>> {
                    match result {
                        Ok(documents) => documents.into_iter().map(Ok).collect(),
                        Err(e) => vec![Err(e)],
                    }
                },
            )))
        }
        _ => blocking(input, move |documents| run_blocking(stage, documents, context)),
    }
}

fn run_blocking(stage: &Stage, documents: Vec<Document>, context: &Context<'_>) -> Result<Vec<Document>, QueryError> {
    let vars = &context.vars;
    match stage {
        Stage::Group(g) => g.run(documents, vars),
        Stage::Sort(s) => Ok(s.sort(documents)),
        Stage::Count(name) => Ok(count(name, documents.len())),
        Stage::SortByCount(g, s) => Ok(s.sort(g.run(documents, vars)?)),
        Stage::Bucket(b) => b.run(documents, vars),
        Stage::BucketAuto(b) => b.run(documents, vars),
        Stage::Facet(facets) => facet(facets, documents, context),
        Stage::Sample(n) => Ok(sample(*n, documents, context)),
        Stage::Out(namespace) => {
            context.source.replace_contents(&output::resolve(namespace, &context.db), documents)?;
            Ok(Vec::new())
        }
        Stage::Merge(spec) => {
            spec.write(documents, context)?;
            Ok(Vec::new())
        }
        Stage::Documents(expr) => documents_stage(expr, documents, vars),
        _ => Err(fail(40324, "stage is not a blocking stage")),
    }
}

fn lookup_stream<'a>(spec: &'a lookup::LookupSpec, input: DocumentStream<'a>, context: &'a Context<'a>) -> DocumentStream<'a> {
    // The foreign collection is scanned once, when the first input document arrives.
    let mut foreign: Option<Vec<Document>> = None;
    Box::new(input.map(move |item| {
        let document = item?;
        if foreign.is_none() {
            let scanned = match spec.from(&context.db) {
                Some(namespace) => context.source.scan(&namespace)?,
                None => Vec::new(),
            };
            foreign = Some(scanned);
        }
        spec.apply(document, foreign.as_deref().unwrap_or_default(), context)
    }))
}

/// `$replaceRoot`/`$replaceWith`: the expression's value must be a document.
pub fn replace_root(expr: &Expr, document: &Document, vars: &Variables) -> Result<Document, QueryError> {
    match Scope::new(document, vars).eval(expr)? {
        Some(Bson::Document(d)) => Ok(d),
        other => {
            let shown = other.as_ref().map_or_else(|| "MISSING".to_string(), |v| v.to_string());
            let type_name = other.as_ref().map_or("missing", bson_type_name);
            Err(fail(40228, format!("'newRoot' expression must evaluate to an object, but resulting value was: {shown}. Type of resulting value: '{type_name}'. Input document: {document}")))
        }
    }
}

fn count(name: &str, n: usize) -> Vec<Document> {
    if n == 0 {
        return Vec::new();
    }
    let mut out = Document::new();
    out.insert(name.to_string(), crate::expr::number::long_or_int(n as i64));
    vec![out]
}

fn facet(facets: &[(String, Pipeline)], documents: Vec<Document>, context: &Context<'_>) -> Result<Vec<Document>, QueryError> {
    let mut out = Document::new();
    for (name, pipeline) in facets {
        let results = pipeline.run(documents.clone(), context)?;
        out.insert(name.clone(), Bson::Array(results.into_iter().map(Bson::Document).collect()));
    }
    Ok(vec![out])
}

fn sample(n: usize, mut documents: Vec<Document>, context: &Context<'_>) -> Vec<Document> {
    let mut rng = context.rng.borrow_mut();
    let take = n.min(documents.len());
    let (chosen, _) = documents.partial_shuffle(&mut *rng, take);
    chosen.to_vec()
}

/// `$documents`: literal documents replace the (empty) input.
fn documents_stage(expr: &Expr, _input: Vec<Document>, vars: &Variables) -> Result<Vec<Document>, QueryError> {
    let empty = Document::new();
    match Scope::new(&empty, vars).eval(expr)? {
        Some(Bson::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Bson::Document(d) => Ok(d),
                other => Err(fail(40228, format!("$documents elements must be objects, found {}", bson_type_name(&other)))),
            })
            .collect(),
        _ => Err(fail(5858203, "an array is expected for $documents")),
    }
}
