//! What the consensus thread publishes for the rest of the server: this member's role and
//! term, the primary, the majority commit point, how far each member has replicated; and the
//! waits of write concerns (`w: "majority"`, `w: N`) on it.
//!
//! Times are oplog timestamps in their u64 form (`ts.time << 32 | ts.increment`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    inner: Mutex<Inner>,
    /// `Published::writable`, readable without the lock (every write command asks).
    writable: AtomicBool,
    /// Woken when this member applies more, or its role changes (`afterClusterTime` reads).
    applied: Condvar,
    /// Called when the majority commit point moves (change streams read up to it).
    majority_listeners: parking_lot::RwLock<Vec<Box<dyn Fn() + Send + Sync>>>,
}

#[derive(Default)]
struct Inner {
    published: Published,
    /// The write concerns waiting, each woken on its own when what it waits for is reached
    /// (or the role or term changes): with many writers waiting, waking them all at each move
    /// of the majority point cost more than the writes.
    waiters: Vec<Waiter>,
    next_waiter: u64,
}

struct Waiter {
    id: u64,
    ts: u64,
    want: Want,
    wake: Arc<Condvar>,
}

/// What a change of the published state means for those waiting.
#[derive(PartialEq)]
struct Watched {
    role: (State, u64),
    applied: u64,
    majority: u64,
}

impl Watched {
    fn of(published: &Published) -> Watched {
        Watched {
            role: (published.state, published.term),
            applied: published.applied_ts,
            majority: published.majority_ts,
        }
    }
}

impl Progress {
    /// Changes the published state and wakes the waiters it concerns.
    pub fn publish(&self, change: impl FnOnce(&mut Published)) {
        let mut inner = self.inner.lock();
        let before = Watched::of(&inner.published);
        change(&mut inner.published);
        let after = Watched::of(&inner.published);
        self.writable.store(inner.published.writable, Ordering::Release);
        let role_changed = after.role != before.role;
        for waiter in &inner.waiters {
            if role_changed || reached(&inner.published, waiter.ts, &waiter.want) {
                waiter.wake.notify_one();
            }
        }
        drop(inner);
        if after.role != before.role || after.applied != before.applied {
            self.applied.notify_all();
        }
        if after.majority != before.majority || role_changed {
            for listener in self.majority_listeners.read().iter() {
                listener();
            }
        }
    }

    /// Registers a callback run (on the consensus thread) each time the majority commit point
    /// moves or the role changes.
    pub fn on_majority_moved(&self, listener: Box<dyn Fn() + Send + Sync>) {
        self.majority_listeners.write().push(listener);
    }

    pub fn get(&self) -> Published {
        self.inner.lock().published.clone()
    }

    /// Reads part of the published state (without copying the rest).
    pub fn read<T>(&self, part: impl FnOnce(&Published) -> T) -> T {
        part(&self.inner.lock().published)
    }

    /// Primary and caught up: writes are accepted.
    pub fn writable(&self) -> bool {
        self.writable.load(Ordering::Acquire)
    }

    /// Waits until the entry at `ts` is where `want` asks, or `deadline`.
    pub fn wait(&self, ts: u64, want: &Want, deadline: Option<Instant>) -> Waited {
        let mut inner = self.inner.lock();
        let term = inner.published.term;
        let mut registered: Option<(u64, Arc<Condvar>)> = None;
        let waited = loop {
            let published = &inner.published;
            if reached(published, ts, want) {
                break Waited::Done;
            }
            if published.state != State::Primary || published.term != term {
                break Waited::SteppedDown;
            }
            let wake = match &registered {
                Some((_, wake)) => Arc::clone(wake),
                None => {
                    let wake = Arc::new(Condvar::new());
                    inner.next_waiter += 1;
                    let id = inner.next_waiter;
                    inner.waiters.push(Waiter { id, ts, want: want.clone(), wake: Arc::clone(&wake) });
                    registered = Some((id, Arc::clone(&wake)));
                    wake
                }
            };
            match deadline {
                Some(deadline) => {
                    if wake.wait_until(&mut inner, deadline).timed_out() && !reached(&inner.published, ts, want) {
                        break Waited::TimedOut;
                    }
                }
                None => wake.wait(&mut inner),
            }
        };
        if let Some((id, _)) = registered {
            inner.waiters.retain(|waiter| waiter.id != id);
        }
        waited
    }

    /// Waits until this member has applied the entry at `ts`, or `deadline`; says whether it
    /// has.
    pub fn wait_applied(&self, ts: u64, deadline: Instant) -> bool {
        let mut inner = self.inner.lock();
        while inner.published.applied_ts < ts {
            if self.applied.wait_until(&mut inner, deadline).timed_out() {
                return inner.published.applied_ts >= ts;
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
