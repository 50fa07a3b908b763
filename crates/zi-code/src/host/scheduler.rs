//! Which queued call starts next: calls start in the order the cell made them; calls of
//! parallel-safe tools overlap up to [`MAX_PARALLEL`], and a sequential call runs alone (it
//! waits for the running ones, and the calls after it wait for it).

use std::collections::VecDeque;

use crate::limits::MAX_PARALLEL;

#[derive(Debug, Default)]
pub(super) struct Scheduler {
    queue: VecDeque<(u64, bool)>,
    running_parallel: usize,
    running_sequential: bool,
}

impl Scheduler {
    pub(super) fn push(&mut self, id: u64, parallel: bool) {
        self.queue.push_back((id, parallel));
    }

    /// The next call to start now, if any (call repeatedly until `None`).
    pub(super) fn next(&mut self) -> Option<u64> {
        let &(id, parallel) = self.queue.front()?;
        let can_start = if parallel {
            !self.running_sequential && self.running_parallel < MAX_PARALLEL
        } else {
            !self.running_sequential && self.running_parallel == 0
        };
        if !can_start {
            return None;
        }
        self.queue.pop_front();
        if parallel {
            self.running_parallel += 1;
        } else {
            self.running_sequential = true;
        }
        Some(id)
    }

    pub(super) fn finished(&mut self, parallel: bool) {
        if parallel {
            self.running_parallel = self.running_parallel.saturating_sub(1);
        } else {
            self.running_sequential = false;
        }
    }

    /// Calls still waiting to start.
    pub(super) fn drain(&mut self) -> Vec<u64> {
        self.queue.drain(..).map(|(id, _)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_calls_overlap_up_to_four_and_sequential_ones_run_alone() {
        let mut s = Scheduler::default();
        for id in 1..=5 {
            s.push(id, true);
        }
        s.push(6, false);
        s.push(7, true);
        let started: Vec<u64> = std::iter::from_fn(|| s.next()).collect();
        assert_eq!(started, [1, 2, 3, 4]);
        s.finished(true);
        assert_eq!(s.next(), Some(5));
        assert_eq!(s.next(), None);
        for _ in 0..4 {
            s.finished(true);
        }
        assert_eq!(s.next(), Some(6), "the sequential call once nothing runs");
        assert_eq!(s.next(), None, "the call after it waits");
        s.finished(false);
        assert_eq!(s.next(), Some(7));
    }
}
