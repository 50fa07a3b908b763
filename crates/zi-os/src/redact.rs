//! Removing configuration from error texts before they reach frames, journals and stderr (a
//! provider's `errorMessage`, an MCP server's errors, results and status): the endpoint, and
//! every configured secret a server might echo back — the request's key (literal or `!command`
//! output), header values (literal, from the environment or `!command`), and the password of a
//! base URL's userinfo (as written, percent-decoded, and as the Basic credentials sent for it).

use base64::Engine as _;

const HIDDEN_ENDPOINT: &str = "<provider endpoint>";
const HIDDEN_SECRET: &str = "<secret>";
const HIDDEN_KEY: &str = "<api key>";

/// Shorter values are not treated as secrets: replacing every `1` or `on` in an error text
/// would destroy it, and such values protect nothing.
const MIN_SECRET_BYTES: usize = 4;

/// What to remove from the error texts of one request.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    base_url: String,
    /// Each secret with the placeholder that replaces it.
    secrets: Vec<(String, &'static str)>,
}

impl Redactor {
    /// Knows the endpoint and the secrets inside it (userinfo).
    pub fn for_base_url(base_url: &str) -> Redactor {
        let base_url = base_url.trim_end_matches('/').to_string();
        let mut redactor = Redactor {
            base_url,
            secrets: Vec::new(),
        };
        if let Some((user, password)) = userinfo(&redactor.base_url) {
            let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                percent_decode(user),
                percent_decode(password)
            ));
            let decoded = percent_decode(password);
            redactor.hide(password.to_string());
            redactor.hide(decoded);
            redactor.hide(basic);
        }
        redactor
    }

    /// Adds a secret (ignored when shorter than 4 bytes).
    pub fn hide(&mut self, secret: impl Into<String>) {
        self.add(secret.into(), HIDDEN_SECRET);
    }

    /// Adds the request's API key, shown as `<api key>`.
    pub fn hide_key(&mut self, key: impl Into<String>) {
        self.add(key.into(), HIDDEN_KEY);
    }

    fn add(&mut self, secret: String, placeholder: &'static str) {
        if secret.len() >= MIN_SECRET_BYTES && !self.secrets.iter().any(|(s, _)| *s == secret) {
            self.secrets.push((secret, placeholder));
        }
    }

    /// `text` without the endpoint, its origin or any secret.
    pub fn scrub(&self, text: String) -> String {
        let mut text = scrub_endpoint(text, &self.base_url);
        // Longest first, so a secret containing another is removed whole.
        let mut secrets: Vec<&(String, &str)> = self.secrets.iter().collect();
        secrets.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        for (secret, placeholder) in secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), placeholder);
            }
        }
        text
    }
}

/// Replaces every occurrence of the endpoint (and of its origin) in an error text.
fn scrub_endpoint(text: String, base_url: &str) -> String {
    if base_url.is_empty() {
        return text;
    }
    let mut text = text.replace(base_url, HIDDEN_ENDPOINT);
    let origin = base_url
        .split_once("://")
        .map(|(scheme, rest)| format!("{scheme}://{}", rest.split('/').next().unwrap_or("")));
    if let Some(origin) = origin.filter(|o| !o.ends_with("://")) {
        text = text.replace(&origin, HIDDEN_ENDPOINT);
    }
    text
}

/// `(user, password)` of `scheme://user:password@host…`, as written.
fn userinfo(url: &str) -> Option<(&str, &str)> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let (info, _) = authority.rsplit_once('@')?;
    info.split_once(':')
}

/// Decodes `%XX` escapes; anything malformed stays as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_scrubbed_from_error_texts() {
        let text =
            "error for url (http://10.0.0.1:8080/v1/chat/completions) at http://10.0.0.1:8080"
                .to_string();
        assert_eq!(
            Redactor::for_base_url("http://10.0.0.1:8080/v1").scrub(text),
            "error for url (<provider endpoint>/chat/completions) at <provider endpoint>"
        );
    }

    #[test]
    fn userinfo_passwords_and_secrets_are_scrubbed() {
        let mut redactor = Redactor::for_base_url("http://bob:p%40ss-word@10.0.0.1:8080/v1");
        redactor.hide("hdr-secret-1");
        redactor.hide("on");
        let basic = base64::engine::general_purpose::STANDARD.encode("bob:p@ss-word");
        let text = format!(
            "bad password p%40ss-word (p@ss-word), Basic {basic}, header hdr-secret-1, flag on"
        );
        assert_eq!(
            redactor.scrub(text),
            "bad password <secret> (<secret>), Basic <secret>, header <secret>, flag on"
        );
    }
}
