//! Insert rates of one series: an interval every `interval_docs` documents (its own rate and
//! the cumulative rate), the rate over the first 10% of the documents and the *exit velocity*,
//! the rate over the last 10%.
//!
//! Time spent between inserts on other things (bio's find queries) is excluded with `exclude`,
//! so rates count insert time only.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Interval {
    /// 1-based.
    pub number: usize,
    /// Documents inserted by the end of this interval.
    pub docs: u64,
    pub elapsed_seconds: f64,
    pub interval_docs: u64,
    pub interval_seconds: f64,
    /// docs/s within this interval.
    pub rate: f64,
    /// docs/s from the start of the series.
    pub cumulative_rate: f64,
}

/// What a finished series measured.
#[derive(Debug, Clone)]
pub struct Rates {
    pub docs: u64,
    pub seconds: f64,
    pub rate: f64,
    pub first_tenth_rate: f64,
    pub exit_velocity: f64,
    pub intervals: Vec<Interval>,
}

pub struct Recorder {
    total: u64,
    interval_docs: u64,
    started: Instant,
    excluded: Duration,
    docs: u64,
    last_mark: (u64, f64),
    /// Documents and time at the end of the previous `add`.
    previous: (u64, f64),
    first_tenth: Option<(u64, f64)>,
    last_tenth_start: Option<(u64, f64)>,
    intervals: Vec<Interval>,
}

impl Recorder {
    pub fn new(total: u64, interval_docs: u64) -> Recorder {
        assert!(total > 0 && interval_docs > 0, "a series inserts something, in intervals of at least one document");
        Recorder {
            total,
            interval_docs,
            started: Instant::now(),
            excluded: Duration::ZERO,
            docs: 0,
            last_mark: (0, 0.0),
            previous: (0, 0.0),
            first_tenth: None,
            last_tenth_start: None,
            intervals: Vec::new(),
        }
    }

    /// Seconds of insert time so far.
    fn elapsed(&self) -> f64 {
        self.started.elapsed().saturating_sub(self.excluded).as_secs_f64()
    }

    /// Takes `duration` out of the insert time (work done between inserts).
    pub fn exclude(&mut self, duration: Duration) {
        self.excluded += duration;
    }

    pub fn docs(&self) -> u64 {
        self.docs
    }

    /// Counts `inserted` more documents; returns the interval this completed, if any.
    pub fn add(&mut self, inserted: u64) -> Option<Interval> {
        let before = self.docs;
        self.docs += inserted;
        let now = self.elapsed();
        // The last 10% starts where the call that crosses 90% starts: its documents belong to it.
        if self.last_tenth_start.is_none() && self.docs * 10 > self.total * 9 {
            self.last_tenth_start = Some(self.previous);
        }
        self.previous = (self.docs, now);
        if self.first_tenth.is_none() && self.docs * 10 >= self.total {
            self.first_tenth = Some((self.docs, now));
        }
        let crossed = before / self.interval_docs != self.docs / self.interval_docs;
        if !crossed && self.docs < self.total {
            return None;
        }
        if self.docs == self.last_mark.0 {
            return None;
        }
        let interval_docs = self.docs - self.last_mark.0;
        let interval_seconds = now - self.last_mark.1;
        let interval = Interval {
            number: self.intervals.len() + 1,
            docs: self.docs,
            elapsed_seconds: now,
            interval_docs,
            interval_seconds,
            rate: per_second(interval_docs, interval_seconds),
            cumulative_rate: per_second(self.docs, now),
        };
        self.last_mark = (self.docs, now);
        self.intervals.push(interval.clone());
        Some(interval)
    }

    pub fn finish(self) -> Rates {
        let seconds = self.elapsed();
        let (first_docs, first_seconds) = self.first_tenth.unwrap_or((self.docs, seconds));
        let (exit_start_docs, exit_start_seconds) = self.last_tenth_start.unwrap_or((0, 0.0));
        Rates {
            docs: self.docs,
            seconds,
            rate: per_second(self.docs, seconds),
            first_tenth_rate: per_second(first_docs, first_seconds),
            exit_velocity: per_second(self.docs - exit_start_docs, seconds - exit_start_seconds),
            intervals: self.intervals,
        }
    }
}

fn per_second(docs: u64, seconds: f64) -> f64 {
    if seconds > 0.0 { docs as f64 / seconds } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::Recorder;

    /// Goal: intervals fall on the interval boundaries and the last one ends the series;
    /// method: add in steps of 3 up to 20 with intervals of 5.
    #[test]
    fn intervals_and_marks() {
        let mut recorder = Recorder::new(20, 5);
        let mut completed = Vec::new();
        for step in [3, 3, 3, 3, 3, 3, 2] {
            std::thread::sleep(std::time::Duration::from_millis(1));
            if let Some(interval) = recorder.add(step) {
                completed.push(interval.docs);
            }
        }
        assert_eq!(completed, vec![6, 12, 15, 20]);
        let rates = recorder.finish();
        assert_eq!(rates.docs, 20);
        assert_eq!(rates.intervals.iter().map(|interval| interval.interval_docs).sum::<u64>(), 20);
        assert!(rates.rate > 0.0 && rates.exit_velocity > 0.0 && rates.first_tenth_rate > 0.0);
    }
}
