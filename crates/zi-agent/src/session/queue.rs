//! Steering and follow-up queues (docs/architecture.md#the-run).
//!
//! Both queues hold user inputs and extension (custom) messages. Custom messages count against
//! the bounds but are not listed in `queuedInputs`, and an interruption discards them while
//! user input stays queued.

use std::collections::VecDeque;

use zi_protocol::image::ImageContent;
use zi_protocol::state::{QueueMode, QueuedDelivery, QueuedInput, QueuedInputs};

use crate::session::custom::CustomMessageInput;

/// At most this many queued inputs across both queues.
pub const MAX_QUEUED_INPUTS: usize = 32;
/// At most this many bytes across both queues.
pub const MAX_QUEUED_BYTES: u64 = 8 * 1024 * 1024;

/// The queues are at their bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull;

/// One queued input.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueItem {
    User(QueuedInput),
    Custom {
        message: CustomMessageInput,
        bytes: u64,
    },
}

impl QueueItem {
    fn bytes(&self) -> u64 {
        match self {
            QueueItem::User(input) => input.bytes,
            QueueItem::Custom { bytes, .. } => *bytes,
        }
    }
}

#[derive(Debug, Default)]
pub struct InputQueues {
    steering: VecDeque<QueueItem>,
    follow_up: VecDeque<QueueItem>,
    next_id: u64,
}

impl InputQueues {
    fn total_bytes(&self) -> u64 {
        self.steering
            .iter()
            .chain(&self.follow_up)
            .map(QueueItem::bytes)
            .sum()
    }

    pub fn len(&self) -> usize {
        self.steering.len() + self.follow_up.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn queue_mut(&mut self, delivery: QueuedDelivery) -> &mut VecDeque<QueueItem> {
        match delivery {
            QueuedDelivery::Steer => &mut self.steering,
            QueuedDelivery::FollowUp => &mut self.follow_up,
        }
    }

    fn admit(&mut self, item: QueueItem, delivery: QueuedDelivery) -> Result<(), QueueFull> {
        if self.len() + 1 > MAX_QUEUED_INPUTS
            || self.total_bytes() + item.bytes() > MAX_QUEUED_BYTES
        {
            return Err(QueueFull);
        }
        self.queue_mut(delivery).push_back(item);
        Ok(())
    }

    /// Adds a user input, or refuses it when either bound would be exceeded. Its bytes are
    /// the text plus each image's MIME type and base64 data.
    pub fn push(
        &mut self,
        delivery: QueuedDelivery,
        text: String,
        images: Vec<ImageContent>,
    ) -> Result<(), QueueFull> {
        let bytes = text.len() as u64 + images.iter().map(ImageContent::queued_bytes).sum::<u64>();
        let input = QueuedInput {
            id: self.next_id + 1,
            delivery,
            text,
            images,
            bytes,
        };
        self.admit(QueueItem::User(input), delivery)?;
        self.next_id += 1;
        Ok(())
    }

    /// Adds a custom message.
    pub fn push_custom(
        &mut self,
        delivery: QueuedDelivery,
        message: CustomMessageInput,
    ) -> Result<(), QueueFull> {
        let bytes = message.content_bytes();
        self.admit(QueueItem::Custom { message, bytes }, delivery)
    }

    /// Takes items from one queue according to its mode.
    pub fn take(&mut self, delivery: QueuedDelivery, mode: QueueMode) -> Vec<QueueItem> {
        let queue = self.queue_mut(delivery);
        match mode {
            QueueMode::All => queue.drain(..).collect(),
            QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
        }
    }

    /// Takes the first item of a queue when it is user input.
    pub fn pop_front_user(&mut self, delivery: QueuedDelivery) -> Option<QueuedInput> {
        let queue = self.queue_mut(delivery);
        match queue.front() {
            Some(QueueItem::User(_)) => match queue.pop_front() {
                Some(QueueItem::User(input)) => Some(input),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn has(&self, delivery: QueuedDelivery) -> bool {
        match delivery {
            QueuedDelivery::Steer => !self.steering.is_empty(),
            QueuedDelivery::FollowUp => !self.follow_up.is_empty(),
        }
    }

    /// Whether any user input is queued.
    #[cfg(test)]
    pub fn has_user_input(&self) -> bool {
        self.steering
            .iter()
            .chain(&self.follow_up)
            .any(|item| matches!(item, QueueItem::User(_)))
    }

    pub fn clear(&mut self) {
        self.steering.clear();
        self.follow_up.clear();
    }

    /// Drops queued custom messages (interruption); returns whether any were dropped.
    pub fn clear_custom(&mut self) -> bool {
        let before = self.len();
        self.steering.retain(|i| matches!(i, QueueItem::User(_)));
        self.follow_up.retain(|i| matches!(i, QueueItem::User(_)));
        before != self.len()
    }

    /// The user inputs, as listed in `queuedInputs` and `queue_update`.
    pub fn snapshot(&self) -> QueuedInputs {
        let users = |queue: &VecDeque<QueueItem>| {
            queue
                .iter()
                .filter_map(|item| match item {
                    QueueItem::User(input) => Some(input.clone()),
                    QueueItem::Custom { .. } => None,
                })
                .collect()
        };
        QueuedInputs {
            steering: users(&self.steering),
            follow_up: users(&self.follow_up),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zi_protocol::message::MessageContent;

    #[test]
    fn bounds_count_and_bytes() {
        let mut queues = InputQueues::default();
        for i in 0..MAX_QUEUED_INPUTS {
            let delivery = if i % 2 == 0 {
                QueuedDelivery::Steer
            } else {
                QueuedDelivery::FollowUp
            };
            assert!(queues.push(delivery, "x".into(), Vec::new()).is_ok());
        }
        assert!(
            queues
                .push(QueuedDelivery::Steer, "x".into(), Vec::new())
                .is_err()
        );
        let mut big = InputQueues::default();
        assert!(
            big.push(
                QueuedDelivery::Steer,
                "y".repeat(MAX_QUEUED_BYTES as usize),
                Vec::new()
            )
            .is_ok()
        );
        assert!(
            big.push(QueuedDelivery::FollowUp, "z".into(), Vec::new())
                .is_err()
        );
    }

    #[test]
    fn modes_take_one_or_all() {
        let mut queues = InputQueues::default();
        for text in ["a", "b", "c"] {
            assert!(
                queues
                    .push(QueuedDelivery::FollowUp, text.into(), Vec::new())
                    .is_ok()
            );
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

    #[test]
    fn custom_messages_count_but_are_not_listed() {
        let mut queues = InputQueues::default();
        let message = CustomMessageInput {
            custom_type: "example.note".into(),
            content: MessageContent::Text("hidden".into()),
            display: false,
            details: None,
        };
        assert!(queues.push_custom(QueuedDelivery::Steer, message).is_ok());
        assert!(
            queues
                .push(QueuedDelivery::Steer, "user".into(), Vec::new())
                .is_ok()
        );
        assert_eq!(queues.len(), 2);
        assert_eq!(queues.snapshot().steering.len(), 1);
        assert!(queues.clear_custom());
        assert_eq!(queues.len(), 1);
        assert!(queues.has_user_input());
    }
}
