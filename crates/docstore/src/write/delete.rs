//! Deletes: the documents a filter matches (one or all), each removed with its index entries.
//!
//! Under the collection's write lock, the matching documents are read from a fresh snapshot
//! through the planner (so indexes serve the filter) and removed in groups of up to
//! [`DELETE_GROUP`] per engine transaction: each document still goes with all its entries.

use std::sync::Arc;

use bson::{Document, RawDocumentBuf};

use crate::context::Context;
use crate::error::Result;
use crate::index::id_key;
use crate::read::find::FindRequest;
use crate::read::planner::Hint;
use crate::retry::Retry;
use crate::write::{Writer, document_id};

/// Documents removed per engine transaction.
pub(crate) const DELETE_GROUP: usize = 1000;

/// One delete statement.
#[derive(Debug, Clone, Default)]
pub struct DeleteRequest {
    pub filter: Document,
    /// `limit: 1`: at most one document.
    pub just_one: bool,
    pub hint: Option<Hint>,
    /// The statement's variables (`let`, `$$NOW`) for `$expr`.
    pub variables: Arc<query::expr::Variables>,
    /// The statement's collation (`None`: the collection's default).
    pub collation: Option<query::collation::Collation>,
}

impl Context {
    /// Removes a capped collection's oldest documents until it is within its limits (after an
    /// insert, under the collection's write lock), in groups of
    /// [`DELETE_GROUP`].
    pub(crate) fn trim_capped(&self, locked: &mut crate::catalog::Locked) -> Result<()> {
        let (Some(capped), Some(natural)) = (locked.collection.capped, locked.collection.natural.as_ref()) else {
            return Ok(());
        };
        let (mut count, mut bytes) = self.catalog.counters(&self.engine, &locked.collection)?;
        if !capped.exceeded(count, bytes) {
            return Ok(());
        }
        let snapshot = self.engine.snapshot();
        let mut oldest = Vec::new();
        for entry in natural.ids(&snapshot, None, false) {
            if !capped.exceeded(count, bytes) {
                break;
            }
            let (_, id) = entry?;
            let Some(document) = snapshot.get(locked.collection.tree, &id)? else { continue };
            count -= 1;
            bytes -= document.len() as i64;
            oldest.push(crate::read::scan::raw(document)?);
        }
        let mut writer = crate::write::Writer::plain(storage::Durability::Periodic);
        while !oldest.is_empty() {
            let rest = oldest.split_off(oldest.len().min(DELETE_GROUP));
            self.remove_group(locked, std::mem::replace(&mut oldest, rest), &mut writer, None)?;
        }
        Ok(())
    }

    /// Deletes what the filter matches; returns how many documents went.
    pub(crate) fn delete(
        self: &Arc<Context>,
        db: &str,
        name: &str,
        request: &DeleteRequest,
        writer: &mut Writer<'_>,
    ) -> Result<u64> {
        // Only a single-document delete is retryable.
        self.catalog.refuse_view(db, name)?;
        let retry = writer.retry.filter(|_| request.just_one && !writer.in_transaction());
        let filter = query::filter::Filter::parse(&*crate::read::text::without_text(&request.filter)?)?
            .with_variables(Arc::clone(&request.variables));
        let Some(mut locked) = self.catalog.lock(db, name) else {
            if let Some(retry) = retry {
                self.record_alone(retry, retry.stmt_id(0), &bson::doc! {"n": 0}, writer.durability)?;
            }
            return Ok(0);
        };
        let filter = filter.with_collation(locked.collection.collation_for(request.collation.as_ref()));
        let find = FindRequest {
            filter: request.filter.clone(),
            limit: request.just_one.then_some(1),
            hint: request.hint.clone(),
            read_at: writer.read_at(),
            variables: Arc::clone(&request.variables),
            collation: request.collation.clone(),
            ..FindRequest::default()
        };
        let mut deleted = 0;
        let mut group: Vec<RawDocumentBuf> = Vec::new();
        for found in self.matching(db, name, &find, writer)? {
            let Some(document) = self.current(&mut locked, &filter, found, writer)? else { continue };
            group.push(document);
            if group.len() >= DELETE_GROUP {
                deleted += self.remove_group(&mut locked, std::mem::take(&mut group), writer, None)?;
            }
        }
        deleted += self.remove_group(&mut locked, group, writer, retry)?;
        Ok(deleted)
    }

    pub(crate) fn remove_group(
        &self,
        locked: &mut crate::catalog::Locked,
        group: Vec<RawDocumentBuf>,
        writer: &mut Writer<'_>,
        retry: Option<&Retry>,
    ) -> Result<u64> {
        if group.is_empty() {
            if let Some(retry) = retry {
                self.record_alone(retry, retry.stmt_id(0), &bson::doc! {"n": 0}, writer.durability)?;
            }
            return Ok(0);
        }
        let durability = writer.durability;
        let mut write = writer.write(self, &locked.collection);
        for document in &group {
            let id = document_id(document)?.unwrap_or(bson::Bson::Null);
            write.remove(&id_key(&id), document)?;
        }
        if let Some(retry) = retry {
            write.record(retry, retry.stmt_id(0), bson::doc! {"n": group.len() as i64})?;
        }
        let raws: Vec<&bson::RawDocument> = group.iter().map(|d| d.as_ref()).collect();
        locked.collection = write.commit(durability, &raws)?;
        Ok(group.len() as u64)
    }
}
