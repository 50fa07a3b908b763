//! The ledger's state machine (docs/delegation.md#delivery): reserved → ready (pending, then
//! durable) → claimed → delivered, at most once per `{name, workCycle}`, within 32 entries.

use super::*;
use crate::limits::LEDGER_CAPACITY;

fn done(name: &str, cycle: u64) -> Completion {
    Completion::failure(name, cycle, "child_exited", None, 0)
}

/// A ledger holding `{name, cycle}` published (ready, pending).
fn ready(ledger: &mut Ledger, name: &str, cycle: u64) {
    assert!(ledger.reserve(name, cycle, None).is_ok());
    assert!(ledger.publish(done(name, cycle)));
}

fn state(ledger: &Ledger, name: &str, cycle: u64) -> Option<EntryState> {
    ledger.get(name, cycle).map(|e| e.state.clone())
}

fn delivery(ledger: &Ledger, name: &str, cycle: u64) -> Option<&'static str> {
    ledger.get(name, cycle).and_then(LedgerEntry::delivery_name)
}

#[test]
fn a_completion_is_delivered_once() {
    let mut ledger = Ledger::default();
    assert!(ledger.reserve("a", 1, None).is_ok());
    assert!(!ledger.publish(done("a", 2)));
    assert!(ledger.publish(done("a", 1)));
    assert!(!ledger.publish(done("a", 1)));
    ledger.mark_durable("a", 1);
    assert!(ledger.claim("a", 1, "call-1").is_some());
    assert!(ledger.claim("a", 1, "call-2").is_none());
    assert_eq!(ledger.release_all(), vec!["a".to_string()]);
    assert!(ledger.claim("a", 1, "call-3").is_some());
    assert!(ledger.deliver("a", 1));
    assert!(!ledger.deliver("a", 1));
    assert!(ledger.durable_ready().is_empty());
}

#[test]
fn a_full_ledger_evicts_delivered_entries_first() {
    let mut ledger = Ledger::default();
    for cycle in 1..=32 {
        assert!(ledger.reserve("a", cycle, None).is_ok());
    }
    assert_eq!(ledger.reserve("a", 33, None), Err(LedgerFull));
    assert!(ledger.publish(done("a", 1)));
    assert!(ledger.deliver("a", 1));
    assert!(ledger.reserve("a", 33, None).is_ok());
    assert!(ledger.get("a", 1).is_none());
}

#[test]
fn the_delivery_name_follows_every_state() {
    let mut ledger = Ledger::default();
    assert!(ledger.reserve("a", 1, Some("worker".into())).is_ok());
    assert_eq!(delivery(&ledger, "a", 1), None);
    assert!(ledger.publish(done("a", 1)));
    assert_eq!(delivery(&ledger, "a", 1), Some("pending"));
    ledger.mark_durable("a", 1);
    assert_eq!(delivery(&ledger, "a", 1), Some("durable"));
    assert!(ledger.claim("a", 1, "call-1").is_some());
    assert_eq!(delivery(&ledger, "a", 1), Some("claimed"));
    assert!(ledger.deliver("a", 1));
    assert_eq!(delivery(&ledger, "a", 1), Some("delivered"));
    assert_eq!(
        ledger.get("a", 1).and_then(|e| e.profile.as_deref()),
        Some("worker")
    );
}

#[test]
fn publishing_needs_a_reservation() {
    let mut ledger = Ledger::default();
    assert!(!ledger.publish(done("a", 1)), "no reservation");
    assert!(ledger.entries().is_empty());
    assert!(ledger.reserve("a", 1, None).is_ok());
    assert!(!ledger.publish(done("b", 1)), "another name");
    assert!(ledger.publish(done("a", 1)));
    let published = ledger.get("a", 1).and_then(|e| e.completion.clone());
    assert_eq!(published, Some(done("a", 1)));
}

#[test]
fn cancelling_a_reservation_leaves_published_entries() {
    let mut ledger = Ledger::default();
    assert!(ledger.reserve("a", 1, None).is_ok());
    ready(&mut ledger, "a", 2);
    ledger.cancel_reservation("a", 1);
    ledger.cancel_reservation("a", 2);
    assert!(ledger.get("a", 1).is_none());
    assert_eq!(
        state(&ledger, "a", 2),
        Some(EntryState::Ready(Durability::Pending))
    );
}

#[test]
fn durability_survives_claims_and_deliveries() {
    let mut ledger = Ledger::default();
    ready(&mut ledger, "claimed", 1);
    ready(&mut ledger, "delivered", 1);
    ready(&mut ledger, "ready", 1);
    assert!(ledger.reserve("reserved", 1, None).is_ok());
    assert!(ledger.claim("claimed", 1, "call-1").is_some());
    assert!(ledger.deliver("delivered", 1));
    assert_eq!(
        ledger.pending_durability(),
        [("claimed", 1), ("delivered", 1), ("ready", 1)].map(|(n, c)| (n.to_string(), c))
    );

    for name in ["claimed", "delivered", "ready", "reserved"] {
        ledger.mark_durable(name, 1);
    }
    assert!(ledger.pending_durability().is_empty());
    assert_eq!(
        state(&ledger, "claimed", 1),
        Some(EntryState::Claimed {
            claim: "call-1".into(),
            durability: Durability::Durable
        })
    );
    assert_eq!(
        state(&ledger, "delivered", 1),
        Some(EntryState::Delivered(Durability::Durable))
    );
    assert_eq!(state(&ledger, "reserved", 1), Some(EntryState::Reserved));
}

#[test]
fn a_released_claim_is_ready_again_with_its_durability() {
    let mut ledger = Ledger::default();
    ready(&mut ledger, "a", 1);
    ready(&mut ledger, "b", 1);
    ledger.mark_durable("b", 1);
    assert!(ledger.claim("a", 1, "call-1").is_some());
    assert!(ledger.claim("b", 1, "call-1").is_some());
    assert_eq!(ledger.release_all(), vec!["a".to_string(), "b".to_string()]);
    assert_eq!(
        state(&ledger, "a", 1),
        Some(EntryState::Ready(Durability::Pending))
    );
    assert_eq!(
        state(&ledger, "b", 1),
        Some(EntryState::Ready(Durability::Durable))
    );
    assert!(ledger.release_all().is_empty(), "nothing claimed any more");
}

#[test]
fn only_ready_or_claimed_entries_are_delivered() {
    let mut ledger = Ledger::default();
    assert!(ledger.reserve("a", 1, None).is_ok());
    assert!(!ledger.deliver("a", 1), "reserved");
    assert!(!ledger.deliver("a", 9), "unknown");
    assert!(ledger.claim("a", 1, "call-1").is_none(), "reserved");
    assert!(ledger.publish(done("a", 1)));
    assert!(ledger.deliver("a", 1), "ready, unclaimed (hidden delivery)");
    assert_eq!(
        state(&ledger, "a", 1),
        Some(EntryState::Delivered(Durability::Pending))
    );
    assert!(ledger.claim("a", 1, "call-2").is_none(), "delivered");
}

#[test]
fn the_oldest_ready_entry_is_offered_first() {
    let mut ledger = Ledger::default();
    ready(&mut ledger, "a", 1);
    ready(&mut ledger, "a", 2);
    ready(&mut ledger, "a", 3);
    ready(&mut ledger, "b", 1);
    assert_eq!(ledger.oldest_ready("a").map(|e| e.work_cycle), Some(1));
    assert!(ledger.claim("a", 1, "call-1").is_some());
    assert_eq!(ledger.oldest_ready("a").map(|e| e.work_cycle), Some(2));
    assert!(ledger.deliver("a", 2));
    assert_eq!(ledger.oldest_ready("a").map(|e| e.work_cycle), Some(3));
    assert!(ledger.oldest_ready("c").is_none());
}

#[test]
fn a_snapshot_shows_the_oldest_durable_entry_else_the_latest() {
    let mut ledger = Ledger::default();
    assert!(ledger.reserve("a", 1, None).is_ok());
    assert!(ledger.shown("a").is_none(), "reservations are not shown");
    assert!(ledger.publish(done("a", 1)));
    ready(&mut ledger, "a", 2);
    assert!(ledger.reserve("a", 3, None).is_ok());
    assert_eq!(
        ledger.shown("a").map(|e| e.work_cycle),
        Some(2),
        "latest non-reserved"
    );
    ledger.mark_durable("a", 2);
    ledger.mark_durable("a", 1);
    assert_eq!(
        ledger.shown("a").map(|e| e.work_cycle),
        Some(1),
        "oldest durable"
    );
    assert!(ledger.deliver("a", 1));
    assert_eq!(ledger.shown("a").map(|e| e.work_cycle), Some(2));
}

#[test]
fn durable_ready_lists_only_unclaimed_durable_entries_oldest_first() {
    let mut ledger = Ledger::default();
    for (name, cycle) in [("b", 1), ("a", 1), ("a", 2), ("c", 1), ("d", 1)] {
        ready(&mut ledger, name, cycle);
    }
    for (name, cycle) in [("a", 2), ("b", 1), ("a", 1), ("c", 1)] {
        ledger.mark_durable(name, cycle);
    }
    assert!(ledger.claim("c", 1, "call-1").is_some());
    assert_eq!(
        ledger.durable_ready(),
        [("b", 1), ("a", 1), ("a", 2)].map(|(n, c)| (n.to_string(), c)),
        "d is pending, c claimed"
    );
}

#[test]
fn a_full_ledger_of_undelivered_completions_refuses_and_evicts_the_oldest_delivered() {
    let mut ledger = Ledger::default();
    for cycle in 1..=LEDGER_CAPACITY as u64 {
        ready(&mut ledger, "a", cycle);
    }
    assert!(ledger.claim("a", 1, "call-1").is_some());
    ledger.mark_durable("a", 2);
    assert_eq!(
        ledger.reserve("b", 1, None),
        Err(LedgerFull),
        "nothing delivered"
    );
    assert_eq!(ledger.entries().len(), LEDGER_CAPACITY);
    assert_eq!(
        LedgerFull.to_string(),
        "Subagent completion capacity exceeded: undelivered completions fill the mailbox"
    );

    assert!(ledger.deliver("a", 7));
    assert!(ledger.deliver("a", 5));
    assert!(ledger.reserve("b", 1, None).is_ok());
    assert!(ledger.get("a", 5).is_none(), "the oldest delivered went");
    assert!(ledger.get("a", 7).is_some());
    assert!(ledger.reserve("b", 2, None).is_ok());
    assert!(ledger.get("a", 7).is_none());
    assert_eq!(ledger.reserve("b", 3, None), Err(LedgerFull));
}
