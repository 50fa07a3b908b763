//! GitHub Copilot, the protocol parts: the Copilot token exchange
//! (`<ZI_GITHUB_API_URL>/copilot_internal/v2/token` with the GitHub token), the API base the
//! token names, enterprise domains, and the headers Copilot expects on every request. The
//! device flow that gets the GitHub token is [`super::login`]'s.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use zi_protocol::message::{AgentMessage, ContentBlock};

use super::endpoints::AuthEndpoints;
use super::entry::OAuthEntry;
use super::http::{AuthRequest, TokenError, client, headers, number_field, send_json, text_field};

/// The OAuth app of GitHub's Copilot editor plugins, which the device flow signs in to.
pub const CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
/// The identity Copilot's API expects from an editor plugin (one place, so a version bump is
/// one change).
pub const USER_AGENT: &str = "GitHubCopilotChat/0.35.0";
pub const EDITOR_VERSION: &str = "vscode/1.107.0";
pub const EDITOR_PLUGIN_VERSION: &str = "copilot-chat/0.35.0";
pub const INTEGRATION_ID: &str = "vscode-chat";
/// The API base of a Copilot token that names none.
pub const DEFAULT_API_BASE: &str = "https://api.individual.githubcopilot.com";

/// A Copilot token is stored as expiring this much before the server's `expires_at` (the shape
/// pi and Zi store, so files stay interchangeable).
const EXPIRY_MARGIN_MS: i64 = 5 * 60 * 1000;

/// `User-Agent`, `Editor-Version`, `Editor-Plugin-Version`, `Copilot-Integration-Id`.
pub fn identity_headers() -> [(&'static str, &'static str); 4] {
    [
        ("user-agent", USER_AGENT),
        ("editor-version", EDITOR_VERSION),
        ("editor-plugin-version", EDITOR_PLUGIN_VERSION),
        ("copilot-integration-id", INTEGRATION_ID),
    ]
}

/// Exchanges a GitHub token for a Copilot token; the entry keeps the GitHub token as `refresh`.
pub async fn exchange(
    endpoints: &AuthEndpoints,
    github_token: &str,
    enterprise: Option<&str>,
) -> Result<OAuthEntry, TokenError> {
    let url = format!(
        "{}/copilot_internal/v2/token",
        endpoints.github_api_url(enterprise)
    );
    let bearer = format!("Bearer {github_token}");
    let mut pairs = vec![("authorization", bearer.as_str())];
    pairs.extend(identity_headers());
    let request = client()?.get(url).headers(headers(&pairs));
    let answer: Value = send_json(AuthRequest {
        request,
        secrets: &[github_token],
    })
    .await?;
    let token = text_field(&answer, "token").ok_or(TokenError::Incomplete("token"))?;
    let expires_at =
        number_field(&answer, "expires_at").ok_or(TokenError::Incomplete("expires_at"))?;
    Ok(OAuthEntry {
        access: token,
        refresh: github_token.to_string(),
        expires: (expires_at * 1000.0) as i64 - EXPIRY_MARGIN_MS,
        enterprise: enterprise.map(str::to_string),
        ..OAuthEntry::default()
    })
}

/// A new Copilot token for a stored sign-in (the GitHub token does not change).
pub async fn refresh(
    endpoints: &AuthEndpoints,
    old: &OAuthEntry,
) -> Result<OAuthEntry, TokenError> {
    let mut entry = exchange(endpoints, &old.refresh, old.enterprise.as_deref()).await?;
    entry.extra = old.extra.clone();
    entry.account_id = old.account_id.clone();
    Ok(entry)
}

/// The API base of Copilot requests: `ZI_COPILOT_BASE_URL`; else the token's `proxy-ep` with
/// `proxy.` turned into `api.`; else `https://copilot-api.<enterprise domain>`; else the
/// individual plan's API.
pub fn api_base(endpoints: &AuthEndpoints, token: &str, enterprise: Option<&str>) -> String {
    if let Some(base) = &endpoints.copilot_base {
        return base.clone();
    }
    let proxy = token
        .split(';')
        .find_map(|field| field.strip_prefix("proxy-ep="))
        .filter(|host| is_host(host));
    match (proxy, enterprise) {
        (Some(host), _) => {
            let host = host
                .strip_prefix("proxy.")
                .map_or_else(|| host.to_string(), |rest| format!("api.{rest}"));
            format!("https://{host}")
        }
        (None, Some(domain)) => format!("https://copilot-api.{domain}"),
        (None, None) => DEFAULT_API_BASE.to_string(),
    }
}

/// A bare host name: letters, digits, dots and dashes (nothing that could change the URL).
fn is_host(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}

/// The GitHub Enterprise domain of `company.ghe.com` or `https://company.ghe.com/…`.
pub fn enterprise_domain(input: &str) -> Option<String> {
    let input = input.trim();
    if input.is_empty() {
        return None;
    }
    let with_scheme = if input.contains("://") {
        input.to_string()
    } else {
        format!("https://{input}")
    };
    let url = reqwest::Url::parse(&with_scheme).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    is_host(&host).then_some(host)
}

/// The headers of one Copilot model request besides the token: the editor identity,
/// `Openai-Intent`, `X-Initiator` (`user` when the person spoke last, `agent` after a tool result
/// or an assistant turn) and `Copilot-Vision-Request` when the context carries an image the
/// model will see.
pub fn request_headers(messages: &[AgentMessage], accepts_images: bool) -> HeaderMap {
    let mut map = HeaderMap::new();
    let initiator = match messages.last() {
        Some(AgentMessage::User(_)) => "user",
        _ => "agent",
    };
    let vision = accepts_images && messages.iter().any(carries_image);
    let mut pairs: Vec<(&str, &str)> = identity_headers().to_vec();
    pairs.push(("openai-intent", "conversation-edits"));
    pairs.push(("x-initiator", initiator));
    if vision {
        pairs.push(("copilot-vision-request", "true"));
    }
    for (name, value) in pairs {
        map.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    map
}

fn carries_image(message: &AgentMessage) -> bool {
    match message {
        AgentMessage::User(user) => user.content.has_images(),
        AgentMessage::Custom(custom) => custom.content.has_images(),
        AgentMessage::ToolResult(result) => result
            .content
            .iter()
            .any(|block| matches!(block, ContentBlock::Image { .. })),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_base_follows_the_token() {
        let endpoints = AuthEndpoints::default();
        let token = "tid=1;exp=2;proxy-ep=proxy.business.githubcopilot.com;sku=x:sig";
        assert_eq!(
            api_base(&endpoints, token, None),
            "https://api.business.githubcopilot.com"
        );
        assert_eq!(
            api_base(
                &endpoints,
                "tid=1;proxy-ep=evil.com/x@y",
                Some("co.ghe.com")
            ),
            "https://copilot-api.co.ghe.com"
        );
        assert_eq!(api_base(&endpoints, "tid=1", None), DEFAULT_API_BASE);
        let pinned = AuthEndpoints {
            copilot_base: Some("http://127.0.0.1:9/v1".into()),
            ..AuthEndpoints::default()
        };
        assert_eq!(api_base(&pinned, token, None), "http://127.0.0.1:9/v1");
    }

    #[test]
    fn enterprise_domains_are_normalised() {
        assert_eq!(
            enterprise_domain("https://Company.ghe.com/path").as_deref(),
            Some("company.ghe.com")
        );
        assert_eq!(
            enterprise_domain(" company.ghe.com ").as_deref(),
            Some("company.ghe.com")
        );
        assert_eq!(enterprise_domain(""), None);
        assert_eq!(enterprise_domain("https://"), None);
    }

    #[test]
    fn the_initiator_and_vision_follow_the_context() {
        use zi_protocol::message::{MessageContent, UserMessage};
        let user = |content| {
            AgentMessage::User(UserMessage {
                content,
                timestamp: 0,
            })
        };
        let text = user(MessageContent::Text("hi".into()));
        let image = user(MessageContent::Parts(vec![ContentBlock::Image {
            data: "AAAA".into(),
            mime_type: "image/png".into(),
        }]));
        let headers = request_headers(std::slice::from_ref(&text), true);
        assert_eq!(headers["x-initiator"], "user");
        assert!(!headers.contains_key("copilot-vision-request"));
        let assistant =
            AgentMessage::Assistant(crate::stream::empty_assistant(&crate::model::test_model()));
        let headers = request_headers(&[image.clone(), assistant], true);
        assert_eq!(headers["x-initiator"], "agent");
        assert_eq!(headers["copilot-vision-request"], "true");
        assert!(!request_headers(&[image], false).contains_key("copilot-vision-request"));
    }
}
