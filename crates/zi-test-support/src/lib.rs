//! Test support for zi: a scriptable mock LLM HTTP server speaking real provider SSE, and helpers
//! that spawn the real `zi` binary against it and speak the protocol through a typed client.

pub mod mock_llm;
pub mod mock_vendors;
pub mod zi_process;
