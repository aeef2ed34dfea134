//! Aggregation pipelines: parsed once ([`Pipeline::parse`]), then run over a stream of
//! documents ([`Pipeline::stream`], [`Pipeline::run`]).
//!
//! Streaming stages (`$match`, `$project`, `$addFields`, `$unwind`, `$limit`, `$skip`,
//! `$redact`, `$replaceRoot`, `$lookup`, `$unionWith`) pull one document at a time, so `$limit`
//! stops the scan early. Blocking stages emit nothing until their input ends, but most consume
//! it document by document ([`Fold`]) and hold only their own state: `$group`,
//! `$sortByCount` and `$bucket` their groups, `$count` a number, `$sort` and `$bucketAuto` their
//! sorted records (`$bucketAuto` only the group-by value and accumulator arguments of each
//! document), `$setWindowFields` sorts like `$sort` then holds one partition at a time
//! ([`window`]; `$fill` is written as it, [`fill`]), `$densify` sorts then holds its input. `$group`, `$sort` and `$bucketAuto` count what they hold against
//! [`MemoryLimits`]: past the limit they spill to the context's [`SpillStore`]
//! (`allowDiskUse`) or fail with 292. `$facet`, `$sample`, `$documents`, `$out` and `$merge`
//! still collect their whole input first. The first error ends the stream.
//!
//! A stream owns clones of its stages and of its [`Context`], so it borrows neither the
//! [`Pipeline`] nor the caller's context: a collection layer can hand it out as a cursor.
//! Everything outside the documents comes from the context: the database name, the
//! [`CollectionSource`] for `$lookup`/`$unionWith`/`$out`/`$merge`, the [`Variables`]
//! (`$$NOW`, `let`), the memory limits and spill store, and a seeded random generator for
//! `$sample` so tests are repeatable.
//! Invariant: `$out`/`$merge` only as the last stage, checked at parse time.

mod add_fields;
mod bucket;
mod densify;
mod fill;
mod group;
mod groups;
mod lookup;
mod output;
mod redact;
mod sort;
mod source;
mod spill;
mod stage;
mod unwind;
pub use unwind::set_path;
mod update;
mod window;

use std::sync::{Arc, Mutex};
use vocabulary::location;

use bson::{Bson, Document};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

pub use add_fields::AddFields;
pub use group::GroupSpec;
pub use source::{CollectionSource, InMemorySource, Namespace};
pub use spill::{InMemorySpill, SpillRun, SpillStore, SpilledRecords};
pub use stage::Stage;
pub use update::{UpdatePipeline, apply_pipeline_update};

use crate::error::QueryError;
use crate::expr::{Expr, Scope, Variables, bson_type_name, fail};

/// A stream of documents between stages (`Send`, so a cursor can carry it between threads).
pub type DocumentStream<'a> = Box<dyn Iterator<Item = Result<Document, QueryError>> + Send + 'a>;

/// How much a blocking stage may hold before it spills (`allowDiskUse`) or fails with 292.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// `$sort` (MongoDB's `internalQueryMaxBlockingSortMemoryUsageBytes`).
    pub sort_bytes: usize,
    /// `$group`, `$sortByCount`'s group, `$bucketAuto`
    /// (`internalDocumentSourceGroupMaxMemoryBytes`).
    pub group_bytes: usize,
}

impl Default for MemoryLimits {
    /// MongoDB's 100 MiB each.
    fn default() -> Self {
        MemoryLimits { sort_bytes: 100 * 1024 * 1024, group_bytes: 100 * 1024 * 1024 }
    }
}

/// What a pipeline run needs besides its input.
#[derive(Clone)]
pub struct Context<'a> {
    pub db: String,
    pub source: Arc<dyn CollectionSource + Send + Sync + 'a>,
    pub vars: Variables,
    pub limits: MemoryLimits,
    /// Where blocking stages spill past their limits (`allowDiskUse: true`); `None`: they fail.
    pub spill: Option<Arc<dyn SpillStore>>,
    /// The command's collation: `$match`, `$sort`, `$group` and expressions' comparisons compare
    /// strings under it (`None`: binary). `vars` carries it too, for the expressions.
    pub collation: Option<crate::collation::Collation>,
    rng: Arc<Mutex<StdRng>>,
}

impl<'a> Context<'a> {
    /// A context over a borrowed source, with `$$NOW` = now, default limits, no spilling and
    /// an entropy-seeded generator.
    pub fn new<S: CollectionSource + Sync + ?Sized>(db: impl Into<String>, source: &'a S) -> Context<'a> {
        Context::shared(db, Arc::new(source))
    }

    /// A context that owns (a share of) its source, so streams made with it can outlive the
    /// caller (`Context<'static>` for a cursor).
    pub fn shared(db: impl Into<String>, source: Arc<dyn CollectionSource + Send + Sync + 'a>) -> Context<'a> {
        Context {
            db: db.into(),
            source,
            vars: Variables::new(),
            limits: MemoryLimits::default(),
            spill: None,
            collation: None,
            rng: Arc::new(Mutex::new(StdRng::from_entropy())),
        }
    }

    /// Replaces the random generator with a seeded one (repeatable `$sample`).
    pub fn with_seed(mut self, seed: u64) -> Context<'a> {
        self.rng = Arc::new(Mutex::new(StdRng::seed_from_u64(seed)));
        self
    }

    pub fn with_limits(mut self, limits: MemoryLimits) -> Context<'a> {
        self.limits = limits;
        self
    }

    /// `allowDiskUse: true`: blocking stages past their limits spill to `spill`.
    pub fn with_spill(mut self, spill: Arc<dyn SpillStore>) -> Context<'a> {
        self.spill = Some(spill);
        self
    }

    /// Strings compare under `collation` in `$match`, `$sort`, `$group`'s keys and the
    /// comparison operators of expressions (`$eq`, `$cmp`, `$in`, ...).
    pub fn with_collation(mut self, collation: Option<crate::collation::Collation>) -> Context<'a> {
        self.vars = self.vars.with_collation(collation.clone());
        self.collation = collation;
        self
    }

    /// The same context with other variables (sub-pipelines with `let`), under its collation.
    pub fn with_vars(&self, vars: Variables) -> Context<'a> {
        Context { vars: vars.with_collation(self.collation.clone()), ..self.clone() }
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

    /// The same stage comparing strings under `collation`.
    pub fn with_collation(mut self, collation: Option<crate::collation::Collation>) -> MatchStage {
        self.filter = self.filter.map(|filter| filter.with_collation(collation));
        self
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
                return Err(fail(
                    location::STAGE_ONLY_LAST,
                    format!("{name} can only be the final stage in the pipeline"),
                ));
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

    /// Chains the stages over `input`; nothing runs until the result is pulled. The stream
    /// holds clones of the stages and of `context`, not borrows.
    pub fn stream<'a>(&self, input: DocumentStream<'a>, context: &Context<'a>) -> DocumentStream<'a> {
        let mut stream = input;
        for stage in &self.stages {
            stream = apply_stage(stage, stream, context);
        }
        stream
    }
}

fn map_each<'a>(
    input: DocumentStream<'a>,
    f: impl Fn(Document) -> Result<Document, QueryError> + Send + 'a,
) -> DocumentStream<'a> {
    Box::new(input.map(move |item| item.and_then(&f)))
}

/// A blocking stage run document by document: it keeps only its own state (groups, a count,
/// sorted records) while its input streams past, then yields its results.
trait Fold: Send {
    fn add(&mut self, document: Document) -> Result<(), QueryError>;
    fn finish(self: Box<Self>) -> Result<DocumentStream<'static>, QueryError>;
}

/// Feeds the whole input to `fold` when the first result is pulled, then yields its results.
fn folded<'a>(input: DocumentStream<'a>, fold: Box<dyn Fold + 'a>) -> DocumentStream<'a> {
    let mut pending = Some((input, fold));
    let mut output: Option<DocumentStream<'static>> = None;
    Box::new(std::iter::from_fn(move || {
        if let Some((input, fold)) = pending.take() {
            match fold_all(input, fold) {
                Ok(results) => output = Some(results),
                Err(e) => return Some(Err(e)),
            }
        }
        output.as_mut()?.next()
    }))
}

fn fold_all(input: DocumentStream<'_>, mut fold: Box<dyn Fold + '_>) -> Result<DocumentStream<'static>, QueryError> {
    for item in input {
        fold.add(item?)?;
    }
    fold.finish()
}

/// The stages that still need their whole input at once.
struct Collect<F> {
    documents: Vec<Document>,
    then: F,
}

impl<F: FnOnce(Vec<Document>) -> Result<Vec<Document>, QueryError> + Send> Fold for Collect<F> {
    fn add(&mut self, document: Document) -> Result<(), QueryError> {
        self.documents.push(document);
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<DocumentStream<'static>, QueryError> {
        let Collect { documents, then } = *self;
        Ok(Box::new(then(documents)?.into_iter().map(Ok)))
    }
}

/// `$count`: only the number.
struct Count {
    name: String,
    n: usize,
}

impl Fold for Count {
    fn add(&mut self, _document: Document) -> Result<(), QueryError> {
        self.n += 1;
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<DocumentStream<'static>, QueryError> {
        Ok(Box::new(count(&self.name, self.n).into_iter().map(Ok)))
    }
}

fn apply_stage<'a>(stage: &Stage, input: DocumentStream<'a>, context: &Context<'a>) -> DocumentStream<'a> {
    let vars = context.vars.clone();
    match stage {
        Stage::Match(m) => {
            let m = m.clone().with_collation(context.collation.clone());
            Box::new(input.filter_map(move |item| match item {
                Ok(d) => match m.matches(&d, &vars) {
                    Ok(true) => Some(Ok(d)),
                    Ok(false) => None,
                    Err(e) => Some(Err(e)),
                },
                Err(e) => Some(Err(e)),
            }))
        }
        Stage::Project(p) => {
            let p = p.clone();
            map_each(input, move |d| {
                let mut projected = p.apply_with(&d, None, &vars)?;
                // The text score is metadata, which MongoDB keeps through any projection.
                if let Some(score) = d.get(crate::meta::TEXT_SCORE_FIELD) {
                    projected.insert(crate::meta::TEXT_SCORE_FIELD, score.clone());
                }
                Ok(projected)
            })
        }
        Stage::AddFields(a) => {
            let a = a.clone();
            map_each(input, move |d| a.apply(&d, &vars))
        }
        Stage::ReplaceRoot(e) => {
            let e = e.clone();
            map_each(input, move |d| replace_root(&e, &d, &vars))
        }
        Stage::Redact(e) => {
            let e = e.clone();
            Box::new(input.filter_map(move |item| match item {
                Ok(d) => redact::redact(&e, d, &vars).transpose(),
                Err(e) => Some(Err(e)),
            }))
        }
        Stage::Limit(n) => Box::new(input.take(*n)),
        Stage::Skip(n) => Box::new(input.skip(*n)),
        Stage::Unwind(u) => {
            let u = u.clone();
            Box::new(input.flat_map(move |item| -> Vec<Result<Document, QueryError>> {
                match item {
                    Ok(d) => u.apply(d).into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                }
            }))
        }
        Stage::Lookup(spec) => lookup_stream(spec.as_ref().clone(), input, context.clone()),
        Stage::UnionWith(spec) => {
            let (spec, context) = (spec.clone(), context.clone());
            let extra = std::iter::once_with(move || spec.documents(&context));
            Box::new(input.chain(extra.flat_map(|result| -> Vec<Result<Document, QueryError>> {
                match result {
                    Ok(documents) => documents.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                }
            })))
        }
        Stage::SetWindowFields(spec) => spec.stream(input, context),
        Stage::Densify(spec) => spec.stream(input, context),
        Stage::Fill(spec) => spec.stream(input, context),
        _ => blocking_stage(stage, input, context),
    }
}

fn blocking_stage<'a>(stage: &Stage, input: DocumentStream<'a>, context: &Context<'a>) -> DocumentStream<'a> {
    match stage {
        Stage::Group(g) => folded(input, Box::new(g.fold(context))),
        Stage::SortByCount(g, s) => folded(folded(input, Box::new(g.fold(context))), Box::new(sort::fold(s, context))),
        Stage::Sort(s) => folded(input, Box::new(sort::fold(s, context))),
        Stage::Count(name) => folded(input, Box::new(Count { name: name.clone(), n: 0 })),
        Stage::Bucket(b) => folded(input, Box::new(b.fold(context.vars.clone()))),
        Stage::BucketAuto(b) => folded(input, Box::new(b.fold(context))),
        _ => {
            let (stage, context) = (stage.clone(), context.clone());
            let then = move |documents| run_blocking(&stage, documents, &context);
            folded(input, Box::new(Collect { documents: Vec::new(), then }))
        }
    }
}

fn run_blocking(stage: &Stage, documents: Vec<Document>, context: &Context<'_>) -> Result<Vec<Document>, QueryError> {
    let vars = &context.vars;
    match stage {
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
        _ => Err(fail(location::UNRECOGNIZED_PIPELINE_STAGE, "stage is not a blocking stage")),
    }
}

fn lookup_stream<'a>(spec: lookup::LookupSpec, input: DocumentStream<'a>, context: Context<'a>) -> DocumentStream<'a> {
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
        spec.apply(document, foreign.as_deref().unwrap_or_default(), &context)
    }))
}

/// `$replaceRoot`/`$replaceWith`: the expression's value must be a document.
pub fn replace_root(expr: &Expr, document: &Document, vars: &Variables) -> Result<Document, QueryError> {
    match Scope::new(document, vars).eval(expr)? {
        Some(Bson::Document(d)) => Ok(d),
        other => {
            let shown = other.as_ref().map_or_else(|| "MISSING".to_string(), |v| v.to_string());
            let type_name = other.as_ref().map_or("missing", bson_type_name);
            Err(fail(
                location::NEW_ROOT_NOT_OBJECT,
                format!(
                    "'newRoot' expression must evaluate to an object, but resulting value was: {shown}. Type of resulting value: '{type_name}'. Input document: {document}"
                ),
            ))
        }
    }
}

fn count(name: &str, n: usize) -> Vec<Document> {
    if n == 0 {
        return Vec::new();
    }
    let mut out = Document::new();
    out.insert(name.to_string(), crate::number::long_or_int(n as i64));
    vec![out]
}

fn facet(
    facets: &[(String, Pipeline)],
    documents: Vec<Document>,
    context: &Context<'_>,
) -> Result<Vec<Document>, QueryError> {
    let mut out = Document::new();
    for (name, pipeline) in facets {
        let results = pipeline.run(documents.clone(), context)?;
        out.insert(name.clone(), Bson::Array(results.into_iter().map(Bson::Document).collect()));
    }
    Ok(vec![out])
}

fn sample(n: usize, mut documents: Vec<Document>, context: &Context<'_>) -> Vec<Document> {
    let mut rng = match context.rng.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
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
                other => Err(fail(
                    location::NEW_ROOT_NOT_OBJECT,
                    format!("$documents elements must be objects, found {}", bson_type_name(&other)),
                )),
            })
            .collect(),
        _ => Err(fail(location::DOCUMENTS_NOT_ARRAY, "an array is expected for $documents")),
    }
}
