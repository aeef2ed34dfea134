//! What the consensus thread publishes for the rest of the server: this member's role and
//! term, the primary, the majority commit point, how far each member has replicated; and the
//! waits of write concerns (`w: "majority"`, `w: N`) on it.
//!
//! Times are oplog timestamps in their u64 form (`ts.time << 32 | ts.increment`).

use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// A member's state, as `rs.status()` numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum State {
    /// Not yet part of an initiated set (or starting).
    #[default]
    Startup,
    Primary,
    Secondary,
    /// Its data diverged from the set's history (see `consensus`); it serves no reads.
    Recovering,
    /// Copying the set's data from another member (`initial_sync`); it serves no reads.
    Startup2,
}

impl State {
    pub fn number(self) -> i32 {
        match self {
            State::Startup => 0,
            State::Primary => 1,
            State::Secondary => 2,
            State::Recovering => 3,
            State::Startup2 => 5,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            State::Startup => "STARTUP",
            State::Primary => "PRIMARY",
            State::Secondary => "SECONDARY",
            State::Recovering => "RECOVERING",
            State::Startup2 => "STARTUP2",
        }
    }
}

/// How far one member has replicated, as the primary sees it.
#[derive(Debug, Clone, Default)]
pub struct MemberProgress {
    pub raft_id: u64,
    /// The newest oplog entry known to be on that member.
    pub matched_ts: u64,
    /// Heard from within the last election timeout.
    pub active: bool,
}

/// The published state.
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub state: State,
    pub term: u64,
    /// The primary's consensus id, if one is known.
    pub leader: Option<u64>,
    /// Primary and caught up with every entry committed before its term: writes are accepted.
    pub writable: bool,
    /// The newest entry a majority of the voting members holds (the majority commit point).
    pub majority_ts: u64,
    /// The newest entry applied here.
    pub applied_ts: u64,
    pub members: Vec<MemberProgress>,
    /// Why this member stopped applying, if it did.
    pub diverged: Option<String>,
    /// When this member last won an election (wall clock, milliseconds).
    pub elected_at_ms: Option<i64>,
    /// Elections this member started and won.
    pub elections_won: u64,
}

/// What a write concern waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    Majority,
    Members(usize),
    /// A mode of `settings.getLastErrorModes`: every rule met.
    Tags(Vec<TagRule>),
}

/// One tag of a write concern mode: the members holding the write have at least `count`
/// different values of it; `values` are the tagged members' (consensus id, value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagRule {
    pub count: usize,
    pub values: Vec<(u64, String)>,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    Done,
    TimedOut,
    /// This member stopped being primary while the write waited.
    SteppedDown,
}

#[derive(Default)]
pub struct Progress {
    published: Mutex<Published>,
    /// Woken when what write concerns wait for moves: the majority point, another member's
    /// progress, the role or the term. (Not at every turn of the consensus thread: with many
    /// writers waiting, waking them all for nothing costs more than the writes.)
    replicated: Condvar,
    /// Woken when this member applies more, or its role changes (`afterClusterTime` reads).
    applied: Condvar,
}

/// What the waits of one kind look at, to tell whether a change concerns them.
#[derive(PartialEq)]
struct Watched {
    replicated: (State, u64, u64, Vec<u64>),
    applied: (State, u64, u64),
}

impl Watched {
    fn of(published: &Published, me: Option<u64>) -> Watched {
        // This member's own progress (its oplog, on the primary) moves with every local write,
        // which is written before its writer waits: it never ends a wait.
        let others = published.members.iter().filter(|m| Some(m.raft_id) != me).map(|m| m.matched_ts).collect();
        Watched {
            replicated: (published.state, published.term, published.majority_ts, others),
            applied: (published.state, published.term, published.applied_ts),
        }
    }
}

impl Progress {
    /// Changes the published state and wakes the waiters it concerns.
    pub fn publish(&self, change: impl FnOnce(&mut Published)) {
        let mut published = self.published.lock();
        let me = published.leader.filter(|_| published.state == State::Primary);
        let before = Watched::of(&published, me);
        change(&mut published);
        let after = Watched::of(&published, me);
        drop(published);
        if after.replicated != before.replicated {
            self.replicated.notify_all();
        }
        if after.applied != before.applied {
            self.applied.notify_all();
        }
    }

    pub fn get(&self) -> Published {
        self.published.lock().clone()
    }

    /// Waits until the entry at `ts` is where `want` asks, or `deadline`.
    pub fn wait(&self, ts: u64, want: &Want, deadline: Option<Instant>) -> Waited {
        let mut published = self.published.lock();
        let term = published.term;
        loop {
            if reached(&published, ts, want) {
                return Waited::Done;
            }
            if published.state != State::Primary || published.term != term {
                return Waited::SteppedDown;
            }
            match deadline {
                Some(deadline) => {
                    if self.replicated.wait_until(&mut published, deadline).timed_out()
                        && !reached(&published, ts, want)
                    {
                        return Waited::TimedOut;
                    }
                }
                None => self.replicated.wait(&mut published),
            }
        }
    }

    /// Waits until this member has applied the entry at `ts`, or `deadline`; says whether it
    /// has.
    pub fn wait_applied(&self, ts: u64, deadline: Instant) -> bool {
        let mut published = self.published.lock();
        while published.applied_ts < ts {
            if self.applied.wait_until(&mut published, deadline).timed_out() {
                return published.applied_ts >= ts;
            }
        }
        true
    }
}

fn reached(published: &Published, ts: u64, want: &Want) -> bool {
    let holds = |id: u64| published.members.iter().any(|m| m.raft_id == id && m.matched_ts >= ts);
    match want {
        Want::Majority => published.majority_ts >= ts,
        Want::Members(n) => published.members.iter().filter(|m| m.matched_ts >= ts).count() >= *n,
        Want::Tags(rules) => rules.iter().all(|rule| {
            let values: std::collections::HashSet<&str> =
                rule.values.iter().filter(|(id, _)| holds(*id)).map(|(_, value)| value.as_str()).collect();
            values.len() >= rule.count
        }),
    }
}
