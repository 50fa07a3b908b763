//! `send_subagent_message` (docs/delegation.md#tools): context that joins the running cycle or
//! waits, queued in the child, for its next one.

use serde_json::json;
use zi_rpc_client::Delivery;

use super::{live_process, unknown_live};
use crate::error::SubagentError;
use crate::evidence::{ControlOperation, settle};
use crate::limits::check_text;
use crate::supervisor::{Lifecycle, Snapshot, Supervisor};

impl Supervisor {
    /// `send_subagent_message`: a `follow_up` that joins the running cycle or waits, queued in
    /// the child, for its next one.
    pub async fn send(&self, name: &str, text: &str) -> Result<Snapshot, SubagentError> {
        let control = ControlOperation::start("message_delivery");
        let evidence =
            json!({"channel": "host_to_subagent", "target": name, "messageBytes": text.len()});
        let result = self.send_admitted(name, text).await;
        settle(
            control,
            &self.host(),
            evidence,
            result,
            |(_, cycle), evidence| {
                if let Some(cycle) = cycle {
                    evidence["targetWorkCycle"] = json!(cycle);
                }
            },
        )
        .map(|(snapshot, _)| snapshot)
    }

    async fn send_admitted(
        &self,
        name: &str,
        text: &str,
    ) -> Result<(Snapshot, Option<u64>), (SubagentError, &'static str)> {
        check_text(text, "message").map_err(|m| (m, "delivery_failed"))?;
        let handle = self.live_target(name).map_err(|m| (m, "target_not_live"))?;
        let _serial = handle.serial.lock().await;
        let process = live_process(&handle, name).map_err(|m| (m, "target_not_live"))?;
        let joined = {
            let mut state = self.lock();
            let child = state
                .child_mut(name)
                .ok_or_else(|| (unknown_live(name), "target_not_live"))?;
            if child.state.deadline_expired {
                return Err((
                    SubagentError::DeadlineExpired(name.to_string()),
                    "delivery_failed",
                ));
            }
            match child.state.lifecycle {
                Lifecycle::Running => {
                    child.state.admissions += 1;
                    child.state.in_flight += 1;
                    Some(child.state.cycle)
                }
                Lifecycle::Idle => None,
                other => {
                    return Err((
                        SubagentError::WrongState {
                            name: name.to_string(),
                            operation: "accept send",
                            lifecycle: other.as_str(),
                        },
                        "delivery_failed",
                    ));
                }
            }
        };
        let id = joined.map(|n| n.to_string());
        let result = process
            .prompt(Delivery::FollowUp, text, id.as_deref())
            .await;
        let mut state = self.lock();
        if let Some(child) = state.child_mut(name)
            && joined.is_some()
        {
            child.state.in_flight = child.state.in_flight.saturating_sub(1);
            if let Ok(admitted) = &result
                && let Some(revision) = admitted.completion_revision
            {
                child.state.revision = child.state.revision.max(revision);
            }
        }
        result.map_err(|e| (SubagentError::connection(name, e), "delivery_failed"))?;
        let snapshot = state
            .snapshot(name)
            .unwrap_or_else(|| Snapshot::unknown(name));
        drop(state);
        handle.wake.notify_waiters();
        Ok((snapshot, joined))
    }
}
