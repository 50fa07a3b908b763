//! MCP `tools/call` results as zi tool results: text and images as content blocks, resource
//! links and embedded resources as text, structured content as JSON text when nothing else
//! describes it (and always in `details.structuredContent`); `isError` becomes an error result.

use rmcp::model::{CallToolResult, RawContent, ResourceContents};
use serde_json::{Value, json};
use zi_agent::ToolOutput;
use zi_os::redact::Redactor;
use zi_protocol::message::ContentBlock;

use crate::bounds::MAX_RESULT_BYTES;

/// Maps a result; a projection over [`MAX_RESULT_BYTES`] is an error result instead.
pub(crate) fn map_result(
    server: &str,
    tool: &str,
    result: CallToolResult,
    redactor: &Redactor,
) -> ToolOutput {
    let mut content = Vec::new();
    for item in result.content {
        content.push(match item.raw {
            RawContent::Text(text) => ContentBlock::text(text.text),
            RawContent::Image(image) => ContentBlock::Image {
                data: image.data,
                mime_type: image.mime_type,
            },
            RawContent::Audio(audio) => ContentBlock::text(format!(
                "[audio ({}, {} base64 bytes) is not shown]",
                audio.mime_type,
                audio.data.len()
            )),
            RawContent::ResourceLink(link) => {
                let mut text = format!("Resource link: {} <{}>", link.name, link.uri);
                if let Some(mime) = link.mime_type {
                    text.push_str(&format!(" ({mime})"));
                }
                if let Some(description) = link.description {
                    text.push_str(&format!(": {description}"));
                }
                ContentBlock::text(text)
            }
            RawContent::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    ContentBlock::text(format!("Resource <{uri}>:\n{text}"))
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => ContentBlock::text(format!(
                    "[resource <{uri}> ({}, {} base64 bytes) is not shown]",
                    mime_type.as_deref().unwrap_or("binary"),
                    blob.len()
                )),
            },
        });
    }
    let structured = result.structured_content;
    if content.is_empty()
        && let Some(value) = &structured
    {
        content.push(ContentBlock::text(value.to_string()));
    }
    // Server text passes the redactor too: a server may echo a header or variable it was given.
    let content: Vec<ContentBlock> = content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text { text, .. } => ContentBlock::text(redactor.scrub(text)),
            other => other,
        })
        .collect();
    let bytes: usize = content.iter().map(projected_bytes).sum::<usize>()
        + structured
            .as_ref()
            .map_or(0, |v| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len()));
    if bytes > MAX_RESULT_BYTES {
        return ToolOutput::error(format!(
            "The result of MCP tool {tool} on server {server} is {bytes} bytes, over the {} KiB bound",
            MAX_RESULT_BYTES / 1024
        ));
    }
    let mut details = json!({"server": server, "tool": tool});
    if let Some(value) = structured {
        let scrubbed = redactor.scrub(value.to_string());
        details["structuredContent"] =
            serde_json::from_str(&scrubbed).unwrap_or(Value::String(scrubbed));
    }
    let is_error = result.is_error == Some(true);
    let mut content = content;
    if content.is_empty() {
        // The model must see something: say plainly that the tool returned nothing.
        content.push(ContentBlock::text(if is_error {
            "The MCP tool failed without a message"
        } else {
            "The MCP tool returned no content"
        }));
    }
    ToolOutput {
        content,
        details: Some(details),
        is_error,
    }
}

fn projected_bytes(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text { text, .. } => text.len(),
        ContentBlock::Image { data, .. } => data.len(),
        _ => 0,
    }
}
