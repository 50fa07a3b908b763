//! Steering and follow-up queues (runtime-reference §5.5).

use std::collections::VecDeque;

use zi_protocol::state::{QueueMode, QueuedDelivery, QueuedInput, QueuedInputs};

/// At most this many queued inputs across both queues.
pub const MAX_QUEUED_INPUTS: usize = 32;
/// At most this many bytes across both queues.
pub const MAX_QUEUED_BYTES: u64 = 8 * 1024 * 1024;

/// The queues are at their bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull;

#[derive(Debug, Default)]
pub struct InputQueues {
    steering: VecDeque<QueuedInput>,
    follow_up: VecDeque<QueuedInput>,
    next_id: u64,
}

impl InputQueues {
    fn total_bytes(&self) -> u64 {
        self.steering
            .iter()
            .chain(&self.follow_up)
            .map(|i| i.bytes)
            .sum()
    }

    pub fn len(&self) -> usize {
        self.steering.len() + self.follow_up.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds an input, or refuses it when either bound would be exceeded.
    pub fn push(&mut self, delivery: QueuedDelivery, text: String) -> Result<(), QueueFull> {
        let bytes = text.len() as u64;
        if self.len() + 1 > MAX_QUEUED_INPUTS || self.total_bytes() + bytes > MAX_QUEUED_BYTES {
            return Err(QueueFull);
        }
        self.next_id += 1;
        let input = QueuedInput {
            id: self.next_id,
            delivery,
            text,
            images: Vec::new(),
            bytes,
        };
        match delivery {
            QueuedDelivery::Steer => self.steering.push_back(input),
            QueuedDelivery::FollowUp => self.follow_up.push_back(input),
        }
        Ok(())
    }

    /// Takes inputs from one queue according to its mode.
    pub fn take(&mut self, delivery: QueuedDelivery, mode: QueueMode) -> Vec<QueuedInput> {
        let queue = match delivery {
            QueuedDelivery::Steer => &mut self.steering,
            QueuedDelivery::FollowUp => &mut self.follow_up,
        };
        match mode {
            QueueMode::All => queue.drain(..).collect(),
            QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
        }
    }

    pub fn has(&self, delivery: QueuedDelivery) -> bool {
        match delivery {
            QueuedDelivery::Steer => !self.steering.is_empty(),
            QueuedDelivery::FollowUp => !self.follow_up.is_empty(),
        }
    }

    pub fn clear(&mut self) {
        self.steering.clear();
        self.follow_up.clear();
    }

    pub fn snapshot(&self) -> QueuedInputs {
        QueuedInputs {
            steering: self.steering.iter().cloned().collect(),
            follow_up: self.follow_up.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_count_and_bytes() {
        let mut queues = InputQueues::default();
        for i in 0..MAX_QUEUED_INPUTS {
            let delivery = if i % 2 == 0 {
                QueuedDelivery::Steer
            } else {
                QueuedDelivery::FollowUp
            };
            assert!(queues.push(delivery, "x".into()).is_ok());
        }
        assert!(queues.push(QueuedDelivery::Steer, "x".into()).is_err());
        let mut big = InputQueues::default();
        assert!(
            big.push(QueuedDelivery::Steer, "y".repeat(MAX_QUEUED_BYTES as usize))
                .is_ok()
        );
        assert!(big.push(QueuedDelivery::FollowUp, "z".into()).is_err());
    }

    #[test]
    fn modes_take_one_or_all() {
        let mut queues = InputQueues::default();
        for text in ["a", "b", "c"] {
            assert!(queues.push(QueuedDelivery::FollowUp, text.into()).is_ok());
        }
        assert_eq!(
            queues
                .take(QueuedDelivery::FollowUp, QueueMode::OneAtATime)
                .len(),
            1
        );
        assert_eq!(
            queues.take(QueuedDelivery::FollowUp, QueueMode::All).len(),
            2
        );
        assert!(queues.is_empty());
    }
}
