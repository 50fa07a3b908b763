//! One streaming client per wire API.

pub mod common;
pub mod openai_completions;
