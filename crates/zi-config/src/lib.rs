//! What the operator configured and the policy evaluated from it: layered settings
//! ([`settings`]), project trust ([`trust`]), skills and prompt templates ([`resources`]),
//! subagent profiles ([`subagent_profiles`]) and the approval policy ([`approval`]: rules,
//! evaluation, paths).
//!
//! Pure reading and deciding: files are read through zi-os's bounded reads, and nothing here
//! knows the session. The session's approval broker (zi-agent) asks [`approval::Evaluator`];
//! the CLI reads settings, trust and resources at start-up.

pub mod approval;
pub mod resources;
pub mod settings;
pub mod subagent_profiles;
pub mod trust;
