//! A `session/prompt`'s content blocks as zi input (docs/acp.md#prompt-turns), and the
//! slash commands a prompt may start with.

use agent_client_protocol_schema::v1::{ContentBlock, EmbeddedResourceResource};
use base64::Engine as _;
use zi_protocol::image::{ImageContent, MAX_PROMPT_IMAGES};

use crate::jsonrpc::RpcError;

/// The text and images of one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub text: String,
    pub images: Vec<ImageContent>,
}

/// Converts the blocks: text joined by blank lines; a resource link as a Markdown link (zi
/// does not fetch it; a file under the session's roots is readable with `read`); an embedded
/// text resource inside `<context uri="…">`; an image (or an image blob resource) as an image;
/// other blobs named, not included. Audio is refused: zi advertises no audio input.
pub fn convert(blocks: &[ContentBlock]) -> Result<Input, RpcError> {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => {
                parts.push(format!("[{}]({})", link.name, link.uri));
            }
            ContentBlock::Image(image) => {
                images.push(image_of(index, &image.data, &image.mime_type)?);
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(text) => parts.push(format!(
                    "<context uri=\"{}\">\n{}\n</context>",
                    text.uri, text.text
                )),
                EmbeddedResourceResource::BlobResourceContents(blob) => {
                    let mime = blob.mime_type.as_deref().unwrap_or_default();
                    if mime.starts_with("image/") {
                        images.push(image_of(index, &blob.blob, mime)?);
                    } else {
                        let bytes = base64::engine::general_purpose::STANDARD
                            .decode(&blob.blob)
                            .map_or(0, |b| b.len());
                        parts.push(format!(
                            "[binary resource {}, {bytes} bytes, not included]",
                            blob.uri
                        ));
                    }
                }
                _ => {
                    return Err(RpcError::invalid_params(format!(
                        "prompt[{index}]: unsupported resource"
                    )));
                }
            },
            ContentBlock::Audio(_) => {
                return Err(RpcError::invalid_params(format!(
                    "prompt[{index}]: audio is not supported"
                )));
            }
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "prompt[{index}]: unsupported content block"
                )));
            }
        }
    }
    if images.len() > MAX_PROMPT_IMAGES {
        return Err(RpcError::invalid_params(format!(
            "prompt: at most {MAX_PROMPT_IMAGES} images"
        )));
    }
    Ok(Input {
        text: parts.join("\n\n"),
        images,
    })
}

fn image_of(index: usize, data: &str, mime_type: &str) -> Result<ImageContent, RpcError> {
    ImageContent::new(data.to_string(), mime_type)
        .map_err(|error| RpcError::invalid_params(format!("prompt[{index}]: image {error}")))
}

/// A prompt that names a command: `/name args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slash<'a> {
    pub name: &'a str,
    pub arguments: &'a str,
}

/// The command a prompt's text starts with, if any.
pub fn slash(text: &str) -> Option<Slash<'_>> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, arguments) = match rest.find(char::is_whitespace) {
        Some(at) => (&rest[..at], rest[at..].trim()),
        None => (rest, ""),
    };
    (!name.is_empty()).then_some(Slash { name, arguments })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::v1::{
        BlobResourceContents, EmbeddedResource, ImageContent as AcpImage, ResourceLink,
        TextContent, TextResourceContents,
    };

    #[test]
    fn blocks_become_text_and_images() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("Fix this")),
            ContentBlock::ResourceLink(ResourceLink::new("main.rs", "file:///p/src/main.rs")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}",
                    "file:///p/src/lib.rs",
                )),
            )),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::BlobResourceContents(
                    BlobResourceContents::new("AAEC", "file:///p/a.bin")
                        .mime_type("application/octet-stream".to_string()),
                ),
            )),
            ContentBlock::Image(AcpImage::new("iVBORw0KGgpmYWtl", "image/png")),
        ];
        let input = convert(&blocks).unwrap();
        assert_eq!(
            input.text,
            "Fix this\n\n[main.rs](file:///p/src/main.rs)\n\n<context uri=\"file:///p/src/lib.rs\">\nfn main() {}\n</context>\n\n[binary resource file:///p/a.bin, 3 bytes, not included]"
        );
        assert_eq!(input.images.len(), 1);
    }

    #[test]
    fn bad_images_and_audio_are_invalid_params() {
        let bad = vec![ContentBlock::Image(AcpImage::new("!!", "image/png"))];
        let error = convert(&bad).unwrap_err();
        assert_eq!(error.code, crate::jsonrpc::INVALID_PARAMS);
        assert!(
            error.message.starts_with("prompt[0]: image "),
            "{}",
            error.message
        );
        let audio = vec![ContentBlock::Audio(
            agent_client_protocol_schema::v1::AudioContent::new("AAAA", "audio/wav"),
        )];
        assert_eq!(
            convert(&audio).unwrap_err().message,
            "prompt[0]: audio is not supported"
        );
    }

    #[test]
    fn slash_commands_are_recognised() {
        assert_eq!(
            slash("/compact keep names"),
            Some(Slash {
                name: "compact",
                arguments: "keep names"
            })
        );
        assert_eq!(
            slash("  /hello"),
            Some(Slash {
                name: "hello",
                arguments: ""
            })
        );
        assert_eq!(slash("no command"), None);
        assert_eq!(slash("/"), None);
    }
}
