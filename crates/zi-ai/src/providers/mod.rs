//! One streaming client per wire API.

pub mod openai_completions;
