//! Zi's MCP bounds (docs/mcp.md#bounds). Every violation is reported as a clear error; none
//! lets memory grow with what a server sends.

/// Configured servers, of any transport.
pub const MAX_SERVERS: usize = 16;
/// Configured stdio servers (each one is a child process).
pub const MAX_STDIO_SERVERS: usize = 4;
/// Servers connecting at the same moment.
pub const MAX_CONCURRENT_CONNECTS: usize = 4;
/// Tools one server may list.
pub const MAX_TOOLS_PER_SERVER: usize = 256;
/// Tools of all servers together.
pub const MAX_TOOLS_TOTAL: usize = 512;
/// MCP calls in flight at once (catalog and direct together).
pub const MAX_ACTIVE_CALLS: usize = 16;
/// Serialized arguments of one call.
pub const MAX_ARGUMENT_BYTES: usize = 256 * 1024;
/// A call's result as the model would see it (text and image data).
pub const MAX_RESULT_BYTES: usize = 256 * 1024;
/// One tool's input schema, serialized.
pub const MAX_SCHEMA_BYTES: usize = 32 * 1024;
/// How deep one tool's input schema may nest (`{}` is one level); deeper ones are refused.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// The input schemas of all servers' tools together.
pub const MAX_SCHEMA_TOTAL_BYTES: usize = 2 * 1024 * 1024;
/// One JSON-RPC message from a server: a stdio line, an SSE event or an HTTP body.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// The headers of one HTTP response: names, values and separators together.
pub const MAX_HTTP_HEADER_BYTES: usize = 64 * 1024;
/// One SSE event of an HTTP response, its lines together (so also each line): one message
/// plus room for its `data:` prefixes and `id`/`event` lines.
pub const MAX_SSE_EVENT_BYTES: usize = MAX_MESSAGE_BYTES + 64 * 1024;
/// Pages of `tools/list` followed for one listing (a server that pages forever is cut off).
pub const MAX_LIST_PAGES: usize = 64;
/// Longest description kept for a tool (longer ones are cut at a character boundary).
pub const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
