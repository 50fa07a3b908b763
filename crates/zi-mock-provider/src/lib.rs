//! A scriptable mock LLM provider server that speaks the vendors' streaming formats over real
//! loopback HTTP. zi's tests and benchmarks drive zi against it, and the conformance kit runs it
//! as the provider of the server under test, so it is an ordinary library, not test-only code.
//! [`mock_auth`] plays the sign-in services of the subscription providers.

pub mod mock_auth;
pub mod mock_llm;
pub mod mock_vendors;
