//! The seam through which a delegation supervisor puts completions into the parent's context
//! (docs/delegation.md#delivery): hidden messages before each provider request, acknowledgement
//! once the delivering message is in the journal, and release of what a run claimed.
//!
//! The session calls every method without holding its lock, so an implementation may use the
//! [`crate::session::host::SessionHost`] (append entries, emit events) from inside them.

use zi_protocol::message::AgentMessage;

use crate::session::custom::CustomMessageInput;

/// A source of hidden context that the session commits into a run at provider-request
/// boundaries (Code Mode's program state), with acknowledgement so nothing is delivered twice.
pub trait ContextDelivery: Send + Sync {
    /// Hidden messages to commit before the next provider request of a run. What is returned
    /// is reserved for this delivery until [`ContextDelivery::committed`] acknowledges it or
    /// [`ContextDelivery::run_ended`] releases it.
    fn before_provider_request(&self) -> Vec<CustomMessageInput>;
    /// A message of the run (tool result, custom message) was appended to the journal.
    fn committed(&self, message: &AgentMessage);
    /// The run settled (or failed, or was cancelled): release whatever it claimed and did not
    /// deliver.
    fn run_ended(&self);
}
