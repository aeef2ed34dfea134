//! How far a replica set's secondaries are behind its primary while a workload writes, in time.
//!
//! Every `INTERVAL` the watch asks each secondary, then the primary, for its last applied
//! operation (`replSetGetStatus`'s `optimes.appliedOpTime`, over a direct connection) and keeps
//! the primary's answers with the time each was read. A secondary's lag is how long ago the
//! primary first stood past where that secondary stands now: zero when the secondary has applied
//! everything the primary had at the last reading. Operation timestamps count whole seconds, so
//! they cannot say this themselves; the readings can, to within one interval.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bson::{Timestamp, doc};
use mongodb::Client;

use crate::context::Context;

const INTERVAL: Duration = Duration::from_millis(100);
/// The primary's readings kept: a secondary further behind is reported as this far behind.
const HISTORY: Duration = Duration::from_secs(600);
/// After the writes: how long to wait for the secondaries to apply the last of them.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(300);

/// A running watch; `finish` stops it and returns what it saw.
pub struct LagWatch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<LagStats>,
}

#[derive(Default)]
pub struct LagStats {
    /// Each reading's lag of the furthest-behind secondary, in milliseconds.
    samples: Vec<u64>,
    /// Readings a member did not answer.
    failed: u64,
    /// From the end of the writes until every secondary had applied the last of them (`None`:
    /// not within `CATCH_UP_LIMIT`).
    catch_up: Option<Duration>,
}

impl LagWatch {
    /// Starts watching the set behind `client`; `None` when it is not a replica set with
    /// secondaries (or a member cannot be reached directly).
    pub async fn start(client: &Client) -> Option<LagWatch> {
        let status = client.database("admin").run_command(doc! {"replSetGetStatus": 1}).await.ok()?;
        let mut primary = None;
        let mut secondaries = Vec::new();
        for member in status.get_array("members").ok()?.iter().filter_map(|m| m.as_document()) {
            let (Ok(host), Ok(state)) = (member.get_str("name"), member.get_str("stateStr")) else { continue };
            let direct = Client::with_uri_str(format!("mongodb://{host}/?directConnection=true")).await.ok()?;
            match state {
                "PRIMARY" => primary = Some(direct),
                "SECONDARY" => secondaries.push(direct),
                _ => {}
            }
        }
        let primary = primary.filter(|_| !secondaries.is_empty())?;
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(watch(primary, secondaries, Arc::clone(&stop)));
        Some(LagWatch { stop, task })
    }

    /// Stops the readings once the writes are over, and waits until every secondary has
    /// applied the primary's last operation (the catch-up time is part of the stats).
    pub async fn finish(self) -> LagStats {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

async fn watch(primary: Client, secondaries: Vec<Client>, stop: Arc<AtomicBool>) -> LagStats {
    let mut stats = LagStats::default();
    let mut history: VecDeque<(Instant, Timestamp)> = VecDeque::new();
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(INTERVAL).await;
        let mut applied = Vec::with_capacity(secondaries.len());
        for secondary in &secondaries {
            applied.push(applied_op_time(secondary).await);
        }
        let now = Instant::now();
        let Some(newest) = applied_op_time(&primary).await else {
            stats.failed += 1;
            continue;
        };
        history.push_back((now, newest));
        while history.front().is_some_and(|(at, _)| now.duration_since(*at) > HISTORY) {
            history.pop_front();
        }
        let mut furthest = Duration::ZERO;
        for ts in applied {
            match ts {
                Some(ts) => furthest = furthest.max(behind(&history, ts, now)),
                None => stats.failed += 1,
            }
        }
        stats.samples.push(u64::try_from(furthest.as_millis()).unwrap_or(u64::MAX));
    }
    stats.catch_up = catch_up(&primary, &secondaries).await;
    stats
}

/// How long until every secondary has applied what the primary has now.
async fn catch_up(primary: &Client, secondaries: &[Client]) -> Option<Duration> {
    let started = Instant::now();
    let last = applied_op_time(primary).await?;
    while started.elapsed() < CATCH_UP_LIMIT {
        let mut behind = false;
        for secondary in secondaries {
            behind |= applied_op_time(secondary).await.is_none_or(|ts| ts < last);
        }
        if !behind {
            return Some(started.elapsed());
        }
        tokio::time::sleep(INTERVAL / 10).await;
    }
    None
}

/// How long ago the primary first stood past `ts`, from its readings (oldest first).
fn behind(history: &VecDeque<(Instant, Timestamp)>, ts: Timestamp, now: Instant) -> Duration {
    history.iter().find(|(_, primary)| *primary > ts).map_or(Duration::ZERO, |(at, _)| now.duration_since(*at))
}

async fn applied_op_time(member: &Client) -> Option<Timestamp> {
    let status = member.database("admin").run_command(doc! {"replSetGetStatus": 1}).await.ok()?;
    status.get_document("optimes").ok()?.get_document("appliedOpTime").ok()?.get_timestamp("ts").ok()
}

impl LagStats {
    /// Into the results as `secondary lag p50/p99/max` of `series`, and one line on the console.
    pub fn record(&self, context: &mut Context, series: &str) {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let (p50, p99) = (super::percentile(&sorted, 0.5), super::percentile(&sorted, 0.99));
        let max = sorted.last().copied().unwrap_or(0) as f64;
        context.measure(series, "secondary lag p50", p50, "ms");
        context.measure(series, "secondary lag p99", p99, "ms");
        context.measure(series, "secondary lag max", max, "ms");
        context.measure(series, "secondary lag readings", sorted.len() as f64, "readings");
        if let Some(catch_up) = self.catch_up {
            context.measure(series, "secondaries caught up after the writes", catch_up.as_secs_f64() * 1e3, "ms");
        }
        context.progress.println(&format!(
            "{series}: secondary lag (the furthest-behind secondary, read every {} ms): p50 {p50:.0} ms, p99 {p99:.0} ms, max {max:.0} ms over {} readings{}; {}",
            INTERVAL.as_millis(),
            sorted.len(),
            if self.failed > 0 { format!(", {} unanswered", self.failed) } else { String::new() },
            match self.catch_up {
                Some(catch_up) => format!("caught up {:.0} ms after the last write", catch_up.as_secs_f64() * 1e3),
                None => format!("not caught up {} s after the last write", CATCH_UP_LIMIT.as_secs()),
            }
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    #[test]
    fn a_secondary_is_as_far_behind_as_the_first_reading_past_it() {
        let start = Instant::now();
        let history: VecDeque<_> = [
            (start, ts(1, 5)),
            (start + Duration::from_millis(100), ts(1, 9)),
            (start + Duration::from_millis(200), ts(2, 1)),
        ]
        .into();
        let now = start + Duration::from_millis(250);
        assert_eq!(behind(&history, ts(2, 1), now), Duration::ZERO, "caught up");
        assert_eq!(behind(&history, ts(1, 9), now), Duration::from_millis(50));
        assert_eq!(behind(&history, ts(1, 6), now), Duration::from_millis(150));
        assert_eq!(behind(&history, ts(1, 1), now), Duration::from_millis(250), "behind every reading");
    }
}
