//! Rule syntax lives in zi-protocol (the decoder checks rules too); re-exported here.

pub use zi_protocol::approval_rule::*;
