//! Images a client or an extension attaches to a message (issue 14, the `ImageContent` of
//! docs/rpc.md#images-manual-compaction-and-usage-statistics): the one definition of the accepted
//! MIME types, the size bound and the base64 rule, shared by `session.prompt` decoding and the
//! extension API.
//!
//! `data` is standard base64 (RFC 4648 section 4, the `+/` alphabet, `=` padding required, no line
//! breaks or other whitespace) and must decode to 1 through 5,242,880 bytes. The image itself
//! is not parsed: zi does not check that the bytes are an image of the declared type (the
//! provider does).

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::message::ContentBlock;

/// Largest decoded image (5 MiB).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;
/// Longest `data` of an image within [`MAX_IMAGE_BYTES`]: 4 characters per 3 bytes, padded.
pub const MAX_IMAGE_BASE64_BYTES: usize = MAX_IMAGE_BYTES.div_ceil(3) * 4;
/// Standard padded base64, non-empty (the schema's form of the rule; the decoder also refuses
/// non-zero trailing bits).
pub const BASE64_PATTERN: &str =
    "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$";
/// Most images one prompt carries.
pub const MAX_PROMPT_IMAGES: usize = 16;

/// The `type` of an image part: always `"image"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ImageType {
    /// The only value.
    #[default]
    Image,
}

/// The image formats zi accepts from clients and extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ImageMimeType {
    /// PNG.
    #[serde(rename = "image/png")]
    Png,
    /// JPEG.
    #[serde(rename = "image/jpeg")]
    Jpeg,
    /// GIF.
    #[serde(rename = "image/gif")]
    Gif,
    /// WebP.
    #[serde(rename = "image/webp")]
    Webp,
}

impl ImageMimeType {
    /// Every accepted type, in the order the error message lists them.
    pub const ALL: [ImageMimeType; 4] = [
        ImageMimeType::Png,
        ImageMimeType::Jpeg,
        ImageMimeType::Gif,
        ImageMimeType::Webp,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageMimeType::Png => "image/png",
            ImageMimeType::Jpeg => "image/jpeg",
            ImageMimeType::Gif => "image/gif",
            ImageMimeType::Webp => "image/webp",
        }
    }

    /// The type a file name extension conventionally means (`png`, `jpg`/`jpeg`, `gif`,
    /// `webp`, any case).
    pub fn from_extension(extension: &str) -> Option<Self> {
        match extension.to_ascii_lowercase().as_str() {
            "png" => Some(ImageMimeType::Png),
            "jpg" | "jpeg" => Some(ImageMimeType::Jpeg),
            "gif" => Some(ImageMimeType::Gif),
            "webp" => Some(ImageMimeType::Webp),
            _ => None,
        }
    }

    /// The type named by `mime_type` (exact, lowercase).
    pub fn parse(mime_type: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|known| known.as_str() == mime_type)
    }
}

/// Why an image's `{data, mimeType}` is refused. `Display` is the problem after the name of
/// the image (`Prompt images[0] ` + problem is the RPC message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// `mimeType` is not one of [`ImageMimeType::ALL`].
    #[error("mimeType must be image/png, image/jpeg, image/gif, or image/webp")]
    MimeType,
    /// `data` is empty or not standard padded base64.
    #[error("data must be non-empty standard base64")]
    Base64,
    /// `data` decodes to more than [`MAX_IMAGE_BYTES`].
    #[error("data must decode to at most 5242880 bytes")]
    TooLarge,
}

/// An image part, `{"type":"image","data":<base64>,"mimeType":…}`, whose data has passed
/// [`validate_image`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageContent {
    /// Always `"image"`.
    #[serde(rename = "type")]
    pub kind: ImageType,
    /// Standard padded base64 of 1 through 5,242,880 bytes.
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 4, max = MAX_IMAGE_BASE64_BYTES),
            regex(pattern = BASE64_PATTERN)
        )
    )]
    pub data: String,
    /// The image format.
    pub mime_type: ImageMimeType,
}

impl ImageContent {
    /// Validates `data` and `mime_type` ([`validate_image`]) into an image part.
    pub fn new(data: String, mime_type: &str) -> Result<Self, ImageError> {
        let mime_type = validate_image(&data, mime_type)?;
        Ok(ImageContent {
            kind: ImageType::Image,
            data,
            mime_type,
        })
    }

    /// Encodes raw image bytes (at most [`MAX_IMAGE_BYTES`]) as an image part.
    pub fn from_bytes(bytes: &[u8], mime_type: ImageMimeType) -> Result<Self, ImageError> {
        if bytes.is_empty() {
            return Err(ImageError::Base64);
        }
        if bytes.len() > MAX_IMAGE_BYTES {
            return Err(ImageError::TooLarge);
        }
        Ok(ImageContent {
            kind: ImageType::Image,
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
            mime_type,
        })
    }

    /// Bytes an image counts against the queue bounds: its MIME type plus its base64 data.
    pub fn queued_bytes(&self) -> u64 {
        (self.mime_type.as_str().len() + self.data.len()) as u64
    }
}

impl From<ImageContent> for ContentBlock {
    fn from(image: ImageContent) -> Self {
        ContentBlock::Image {
            data: image.data,
            mime_type: image.mime_type.as_str().to_string(),
        }
    }
}

/// Checks an image's MIME type, then that its data is non-empty standard padded base64, then
/// its decoded size; returns the parsed MIME type.
pub fn validate_image(data: &str, mime_type: &str) -> Result<ImageMimeType, ImageError> {
    let mime_type = ImageMimeType::parse(mime_type).ok_or(ImageError::MimeType)?;
    if data.is_empty() {
        return Err(ImageError::Base64);
    }
    // The exact decoded length follows from the padded length, so an oversized image is
    // refused before anything is decoded; decoding into a bounded buffer checks the alphabet
    // and the padding without keeping the bytes.
    if !data.len().is_multiple_of(4) {
        return Err(ImageError::Base64);
    }
    let decoded_len = base64::decoded_len_estimate(data.len());
    let padding = data.bytes().rev().take_while(|&byte| byte == b'=').count();
    if decoded_len.saturating_sub(padding.min(2)) > MAX_IMAGE_BYTES {
        // Still refuse a non-base64 value as such rather than as too large.
        return Err(if is_base64_alphabet(data) {
            ImageError::TooLarge
        } else {
            ImageError::Base64
        });
    }
    let mut buffer = vec![0u8; decoded_len];
    base64::engine::general_purpose::STANDARD
        .decode_slice(data, &mut buffer)
        .map_err(|_| ImageError::Base64)?;
    Ok(mime_type)
}

/// Whether every byte is in the standard alphabet or padding (a cheap pre-check only).
fn is_base64_alphabet(data: &str) -> bool {
    data.bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'='))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn accepts_the_four_types_and_padded_base64() {
        for mime in ["image/png", "image/jpeg", "image/gif", "image/webp"] {
            assert_eq!(
                validate_image(&encode(b"abc"), mime).map(ImageMimeType::as_str),
                Ok(mime)
            );
        }
        assert!(validate_image(&encode(b"ab"), "image/png").is_ok());
        assert!(validate_image(&encode(b"a"), "image/png").is_ok());
    }

    #[test]
    fn refuses_other_types_before_the_data() {
        for mime in ["image/svg+xml", "IMAGE/PNG", "image/jpg", ""] {
            assert_eq!(validate_image("!", mime), Err(ImageError::MimeType));
        }
    }

    #[test]
    fn refuses_bad_base64() {
        for data in [
            "", "QUJ", "QUJD\n", "QU=D", "QUJD====", "QUJ-", "Q UJ", "QUJ=",
        ] {
            // "QUJ=" has non-zero trailing bits: not canonical, refused like Node's strict
            // decoders do.
            assert_eq!(
                validate_image(data, "image/png"),
                Err(ImageError::Base64),
                "{data:?}"
            );
        }
    }

    #[test]
    fn bounds_the_decoded_size_exactly() {
        let at_bound = encode(&vec![7u8; MAX_IMAGE_BYTES]);
        assert!(validate_image(&at_bound, "image/gif").is_ok());
        let over = encode(&vec![7u8; MAX_IMAGE_BYTES + 1]);
        assert_eq!(
            validate_image(&over, "image/gif"),
            Err(ImageError::TooLarge)
        );
        let garbage = "*".repeat(over.len());
        assert_eq!(
            validate_image(&garbage, "image/gif"),
            Err(ImageError::Base64)
        );
    }

    #[test]
    fn image_content_is_the_wire_part() {
        let image =
            ImageContent::new("QUJD".into(), "image/webp").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            serde_json::to_string(&image).unwrap_or_default(),
            r#"{"type":"image","data":"QUJD","mimeType":"image/webp"}"#
        );
        assert_eq!(image.queued_bytes(), 14);
        assert_eq!(
            ImageContent::from_bytes(b"ABC", ImageMimeType::Webp).as_ref(),
            Ok(&image)
        );
        assert_eq!(
            ImageMimeType::from_extension("JPG"),
            Some(ImageMimeType::Jpeg)
        );
        assert_eq!(
            ContentBlock::from(image),
            ContentBlock::Image {
                data: "QUJD".into(),
                mime_type: "image/webp".into()
            }
        );
    }
}
