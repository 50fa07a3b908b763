//! The parts of the state snapshot (docs/rpc.md#the-state-snapshot) that cost a walk over the
//! journal: `contextUsage` and `workPlan`. `session.get_state` is a hot, pipelined query, while
//! these change only when the journal grows or the model changes, so each is kept with the journal
//! position (and model) it was derived from and recomputed only when that moves on.

use std::sync::Arc;

use zi_ai::Model;
use zi_journal::memory::Journal;
use zi_protocol::state::{ContextUsage, WorkPlan};

use crate::context_usage::context_usage;

/// Where the journal stood: it only ever grows at its leaf, so length and leaf identify it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JournalMark {
    entries: usize,
    leaf: Option<String>,
}

impl JournalMark {
    fn matches(&self, journal: &Journal) -> bool {
        self.entries == journal.all_entries().count() && self.leaf.as_deref() == journal.leaf_id()
    }

    fn of(journal: &Journal) -> JournalMark {
        JournalMark {
            entries: journal.all_entries().count(),
            leaf: journal.leaf_id().map(str::to_string),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct SnapshotCache {
    /// The usage with the journal mark and the model it was computed for (the `Arc` is held,
    /// so pointer equality cannot be fooled by a reused allocation).
    usage: Option<(JournalMark, Option<Arc<Model>>, ContextUsage)>,
    plan: Option<(JournalMark, WorkPlan)>,
}

impl SnapshotCache {
    /// Context usage of the journal's context against `model`
    /// (docs/configuration.md#context-usage).
    pub(crate) fn context_usage(
        &mut self,
        journal: &Journal,
        model: Option<&Arc<Model>>,
    ) -> ContextUsage {
        if let Some((mark, cached_model, usage)) = &self.usage
            && mark.matches(journal)
            && same_model(cached_model.as_ref(), model)
        {
            return usage.clone();
        }
        let (messages, anchor) = journal.context_view();
        let usage = context_usage(model.map(|m| m.as_ref()), &messages, anchor);
        self.usage = Some((JournalMark::of(journal), model.cloned(), usage.clone()));
        usage
    }

    /// The latest work plan, or the empty plan.
    pub(crate) fn work_plan(&mut self, journal: &Journal) -> WorkPlan {
        if let Some((mark, plan)) = &self.plan
            && mark.matches(journal)
        {
            return plan.clone();
        }
        let plan = journal.latest_work_plan().cloned().unwrap_or_default();
        self.plan = Some((JournalMark::of(journal), plan.clone()));
        plan
    }
}

fn same_model(a: Option<&Arc<Model>>, b: Option<&Arc<Model>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}
