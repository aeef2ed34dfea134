//! `readConcern` for reads outside transactions (find, aggregate, distinct, count).
//!
//! `local` and `available` read the latest committed state. `majority` on the primary of a set
//! of several members reads a snapshot once a majority holds it (see `majority_view`);
//! elsewhere the latest state (a secondary applies only what the set committed). `snapshot`
//! (replica-set mode) reads one consistent snapshot: at `atClusterTime` when given, else now,
//! and the reply reports which (`atClusterTime`), so a snapshot session's next reads ask for
//! the same. A snapshot read's view is held for a minute after its last use so those later
//! reads find it; a cluster time the server holds no snapshot of (older than what it holds, or
//! between two held ones) is SnapshotTooOld. `afterClusterTime` (causal consistency) waits until this member
//! applied that cluster time (a secondary behind the primary), at most 30 s.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bson::{Bson, Document, Timestamp};
use docstore::ReadAt;
use parking_lot::Mutex;
use wire::ErrorCode;

use crate::command::Command;
use crate::error::CommandError;
use crate::state::Context;

/// How long a snapshot read's view stays available to `atClusterTime`.
const HOLD_FOR: Duration = Duration::from_secs(60);
/// At most this many views are held.
const MAX_HELD: usize = 256;

/// Snapshot reads' views, by cluster time.
#[derive(Default)]
pub struct HeldSnapshots {
    held: Mutex<VecDeque<(Timestamp, ReadAt, Instant)>>,
}

impl HeldSnapshots {
    fn hold(&self, ts: Timestamp, view: &ReadAt) {
        let mut held = self.held.lock();
        held.retain(|(_, _, at)| at.elapsed() < HOLD_FOR);
        if held.iter().any(|(existing, _, _)| *existing == ts) {
            return;
        }
        if held.len() >= MAX_HELD {
            held.pop_front();
        }
        held.push_back((ts, view.clone(), Instant::now()));
    }

    /// The view held at `ts`, held a minute longer from now (a snapshot session, or a member's
    /// initial sync, keeps reading at it).
    fn find(&self, ts: Timestamp) -> Option<ReadAt> {
        let mut held = self.held.lock();
        let (_, view, at) = held.iter_mut().find(|(existing, _, at)| *existing == ts && at.elapsed() < HOLD_FOR)?;
        *at = Instant::now();
        Some(view.clone())
    }
}

/// The commands that take readConcern `snapshot` outside a transaction.
const SNAPSHOT_READS: &[&str] = &["find", "aggregate", "distinct"];

/// Refuses readConcern `snapshot` outside a transaction on a command that cannot read at one
/// point in time, and `linearizable` on a pipeline that writes, as mongod does.
pub fn check_supported(command: &Command) -> Result<(), CommandError> {
    if crate::transactions::is_transactional(command) {
        return Ok(());
    }
    let Some(concern) = command.optional_document("readConcern")? else { return Ok(()) };
    if level(concern)? == "snapshot" && !SNAPSHOT_READS.contains(&command.name.as_str()) {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!("Command {} does not support {{ readConcern: {{ level: \"snapshot\" }} }}", command.name),
        ));
    }
    if level(concern)? == "linearizable" && command.name == "aggregate" {
        let writes = crate::commands::aggregate::pipeline(command)?
            .into_iter()
            .find_map(|stage| ["$out", "$merge"].into_iter().find(|name| stage.contains_key(*name)));
        if let Some(stage) = writes {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!("{stage} cannot be used with a 'linearizable' read concern level"),
            ));
        }
    }
    Ok(())
}

/// Whether the command asks for `readConcern: {level: "linearizable"}` (outside a transaction).
pub fn is_linearizable(command: &Command) -> bool {
    !crate::transactions::is_transactional(command)
        && command.body.get_document("readConcern").ok().and_then(|c| c.get_str("level").ok()) == Some("linearizable")
}

/// The view a read reads and, for a snapshot read, the cluster time to report.
pub fn read_view(context: &Context, command: &Command) -> Result<(Option<ReadAt>, Option<Timestamp>), CommandError> {
    if let Some(view) = crate::transactions::read_at(context) {
        return Ok((Some(view), None));
    }
    let Some(concern) = command.optional_document("readConcern")? else { return Ok((None, None)) };
    if let (Some(set), Some(Bson::Timestamp(after))) = (&context.shared.replication, concern.get("afterClusterTime")) {
        // Causal consistency: this member must have applied what the client saw.
        if !set.wait_applied(*after, Instant::now() + AFTER_CLUSTER_TIME_WAIT) {
            return Err(CommandError::new(
                ErrorCode::ExceededTimeLimit,
                format!("this member has not applied cluster time {after} yet"),
            ));
        }
    }
    match level(concern)? {
        "snapshot" => {
            let (view, ts) = snapshot(context, concern)?;
            Ok((Some(view), Some(ts)))
        }
        "majority" => Ok((majority_view(context)?, None)),
        _ => Ok((None, None)),
    }
}

/// How long a read waits for this member to apply its `afterClusterTime`.
const AFTER_CLUSTER_TIME_WAIT: Duration = Duration::from_secs(30);

/// readConcern `majority` on the primary of a set of several members: a snapshot of now, read
/// once a majority holds everything in it (so nothing read can be rolled back). A secondary
/// applies only what the set committed, and a set of one is its own majority: they read their
/// latest state.
fn majority_view(context: &Context) -> Result<Option<ReadAt>, CommandError> {
    let Some(set) = &context.shared.replication else { return Ok(None) };
    if !set.is_writable() || set.set_config().is_none_or(|config| config.members.len() < 2) {
        return Ok(None);
    }
    let Some((view, ts)) = context.shared.store.snapshot_now() else { return Ok(None) };
    set.wait_majority(ts, Instant::now() + AFTER_CLUSTER_TIME_WAIT)?;
    Ok(Some(view))
}

fn level(concern: &Document) -> Result<&str, CommandError> {
    match concern.get("level") {
        None => Ok("local"),
        Some(Bson::String(level)) => match level.as_str() {
            "local" | "majority" | "available" | "linearizable" | "snapshot" => Ok(level.as_str()),
            other => {
                Err(CommandError::new(ErrorCode::FailedToParse, format!("'{other}' is not a valid readConcern level")))
            }
        },
        Some(other) => Err(crate::command::mismatch("readConcern.level", "string", other)),
    }
}

/// A snapshot read's view: at `atClusterTime`, or now (then held for later reads at it).
pub fn snapshot(context: &Context, concern: &Document) -> Result<(ReadAt, Timestamp), CommandError> {
    let store = &context.shared.store;
    let Some((now, now_ts)) = store.snapshot_now() else {
        return Err(CommandError::new(
            ErrorCode::NotAReplicaSet,
            "readConcern level snapshot is only supported on a replica set (strata serve --replSet)",
        ));
    };
    let held = &context.shared.held_snapshots;
    let Some(asked) = concern.get("atClusterTime") else {
        held.hold(now_ts, &now);
        return Ok((now, now_ts));
    };
    let Bson::Timestamp(asked) = asked else {
        return Err(crate::command::mismatch("atClusterTime", "timestamp", asked));
    };
    if (asked.time, asked.increment) == (now_ts.time, now_ts.increment) {
        held.hold(now_ts, &now);
        return Ok((now, now_ts));
    }
    if (asked.time, asked.increment) > (now_ts.time, now_ts.increment) {
        return Err(CommandError::new(
            ErrorCode::SnapshotUnavailable,
            format!("atClusterTime {asked} is later than the latest write ({now_ts})"),
        ));
    }
    match held.find(*asked) {
        Some(view) => Ok((view, *asked)),
        None => Err(CommandError::new(
            ErrorCode::SnapshotTooOld,
            format!(
                "Read timestamp {asked} is older than the oldest available timestamp (snapshots are held for 60 s)"
            ),
        )),
    }
}
