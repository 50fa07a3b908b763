//! Operating-system plumbing shared by zi's crates. Every `unsafe` that concerns processes lives
//! here, each with its SAFETY comment, so the rest of the workspace starts and ends child
//! processes through safe functions.

pub mod process;
