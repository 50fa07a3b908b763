//! A call's arguments as zi sends them (docs/mcp.md#bounds): absent, `null` or a JSON
//! object of at most [`MAX_ARGUMENT_BYTES`] serialized; anything else is an error result before
//! the server is asked.

use serde_json::Value;
use zi_agent::ToolOutput;

use crate::bounds::MAX_ARGUMENT_BYTES;

/// A call's arguments: absent, null or an object within [`MAX_ARGUMENT_BYTES`].
pub(crate) fn call_arguments(
    tool: &str,
    arguments: Option<Value>,
) -> Result<Option<serde_json::Map<String, Value>>, ToolOutput> {
    let arguments = match arguments {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => {
            return Err(ToolOutput::error(
                "MCP tool arguments must be a JSON object",
            ));
        }
    };
    let size = arguments
        .as_ref()
        .map_or(0, |a| serde_json::to_vec(a).map_or(usize::MAX, |b| b.len()));
    if size > MAX_ARGUMENT_BYTES {
        return Err(ToolOutput::error(format!(
            "The arguments for MCP tool {tool} are {size} bytes, over the {} KiB bound",
            MAX_ARGUMENT_BYTES / 1024
        )));
    }
    Ok(arguments)
}
