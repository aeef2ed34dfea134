//! explain in MongoDB's shape: `queryPlanner.winningPlan` as a tree of stages (COLLSCAN, IXSCAN
//! with indexBounds, OR, FETCH, SORT, SKIP, LIMIT, PROJECTION_DEFAULT, and PROJECTION_COVERED
//! over a bare IXSCAN for a covered find; TEXT_MATCH for `$text`) and, for the
//! executionStats verbosities, the counts of a full run (nReturned, totalKeysExamined,
//! totalDocsExamined, executionTimeMillis). The plan is the one a find would use; there are
//! never rejected plans because the planner does not race candidates.

use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document, doc};

use crate::context::Context;
use crate::error::Result;
use crate::read::find::FindRequest;
use crate::read::planner::{Access, IndexScan, Plan};
use crate::read::scan::ExecutionCounters;

/// How much explain runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    QueryPlanner,
    ExecutionStats,
    AllPlansExecution,
}

impl Context {
    pub(crate) fn explain(
        self: &Arc<Context>,
        db: &str,
        name: &str,
        request: &FindRequest,
        verbosity: Verbosity,
    ) -> Result<Document> {
        let counters = Arc::new(ExecutionCounters::default());
        let started = Instant::now();
        // Near and text queries run whole when their cursor is made: the planner's view must not
        // run them (the slow-query log and the profiler explain every find they report).
        let near = query::filter::Filter::parse(&request.filter).ok().and_then(|f| crate::read::geo::near_of(&f));
        // Their errors (no geo or text index) still come from the find.
        let text = self.text_plan(db, name, request)?;
        let planned_only = verbosity == Verbosity::QueryPlanner
            && match (&near, self.catalog.collection(db, name)) {
                (Some((path, near)), Some(collection)) => crate::read::geo::near_index(&collection, path, near).is_ok(),
                (Some(_), None) => false,
                (None, _) => text.is_some(),
            };
        let (cursor, plan) = match planned_only {
            true => (crate::read::find::Cursor::from_documents(Vec::new()), None),
            false => self.find_with_counters(db, name, request, Arc::clone(&counters))?,
        };
        let winning = match (&plan, text, &near) {
            (Some(plan), _, _) => winning_plan(plan, request),
            (None, Some(text), _) => text,
            (None, None, Some((_, near))) => {
                doc! { "stage": if near.spherical { "GEO_NEAR_2DSPHERE" } else { "GEO_NEAR_2D" } }
            }
            (None, None, None) => doc! { "stage": "EOF" },
        };
        let mut explain = doc! {
            "explainVersion": "1",
            "queryPlanner": {
                "namespace": format!("{db}.{name}"),
                "indexFilterSet": false,
                "parsedQuery": request.filter.clone(),
                "winningPlan": winning.clone(),
                "rejectedPlans": [],
            },
        };
        if verbosity != Verbosity::QueryPlanner {
            for item in cursor {
                item?;
            }
            let millis = started.elapsed().as_millis() as i64;
            explain.insert(
                "executionStats",
                doc! {
                    "executionSuccess": true,
                    "nReturned": ExecutionCounters::get(&counters.returned) as i64,
                    "executionTimeMillis": millis,
                    "totalKeysExamined": ExecutionCounters::get(&counters.keys_examined) as i64,
                    "totalDocsExamined": ExecutionCounters::get(&counters.docs_examined) as i64,
                    "executionStages": winning,
                },
            );
            if verbosity == Verbosity::AllPlansExecution
                && let Ok(stats) = explain.get_document_mut("executionStats")
            {
                // Each rejected plan's trial run; there are none (one plan is chosen by score).
                stats.insert("allPlansExecution", Vec::<Bson>::new());
            }
        }
        Ok(explain)
    }
}

fn winning_plan(plan: &Plan, request: &FindRequest) -> Document {
    let filter = Bson::Document(request.filter.clone());
    let mut stage = match &plan.access {
        Access::CollectionScan { backward } => doc! {
            "stage": "COLLSCAN",
            "filter": filter,
            "direction": if *backward { "backward" } else { "forward" },
        },
        Access::IndexScan(scan) if plan.covered => index_scan(scan),
        Access::IndexScan(scan) => doc! { "stage": "FETCH", "filter": filter, "inputStage": index_scan(scan) },
        Access::Or(scans) if plan.covered => doc! {
            "stage": "OR",
            "inputStages": scans.iter().map(|s| Bson::Document(index_scan(s))).collect::<Vec<_>>(),
        },
        Access::Or(scans) => doc! {
            "stage": "FETCH",
            "filter": filter,
            "inputStage": { "stage": "OR", "inputStages": scans.iter().map(|s| Bson::Document(index_scan(s))).collect::<Vec<_>>() },
        },
    };
    if let (Some(sort), false) = (&request.sort, plan.sorted) {
        stage = doc! { "stage": "SORT", "sortPattern": sort.clone(), "memLimit": 104_857_600i64, "type": "simple", "inputStage": stage };
    }
    if request.skip > 0 {
        stage = doc! { "stage": "SKIP", "skipAmount": request.skip as i64, "inputStage": stage };
    }
    if let Some(limit) = request.limit.filter(|l| *l > 0) {
        stage = doc! { "stage": "LIMIT", "limitAmount": limit as i64, "inputStage": stage };
    }
    if let Some(projection) = request.projection.as_ref().filter(|p| !p.is_empty()) {
        let kind = if plan.covered { "PROJECTION_COVERED" } else { "PROJECTION_DEFAULT" };
        stage = doc! { "stage": kind, "transformBy": projection.clone(), "inputStage": stage };
    }
    stage
}

fn index_scan(scan: &IndexScan) -> Document {
    doc! {
        "stage": "IXSCAN",
        "keyPattern": scan.key_pattern.clone(),
        "indexName": scan.name.clone(),
        "isMultiKey": scan.multikey,
        "isUnique": scan.unique,
        "isSparse": scan.sparse,
        "isPartial": scan.partial,
        "indexVersion": 2,
        "direction": if scan.backward { "backward" } else { "forward" },
        "indexBounds": scan.bounds.describe(),
    }
}
