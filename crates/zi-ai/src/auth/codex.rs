//! ChatGPT (Codex) sign-in, the protocol parts: PKCE (RFC 7636, S256), the authorization URL,
//! the form-encoded code exchange and refresh at `<ZI_OPENAI_AUTH_URL>/oauth/token`, and the
//! ChatGPT account id from the access token's claims. The interactive part (callback listener,
//! pasted address) is [`super::login`]'s.

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::Value;

use super::endpoints::AuthEndpoints;
use super::entry::OAuthEntry;
use super::http::{AuthRequest, TokenError, client, headers, number_field, send_json, text_field};

/// The OAuth client of OpenAI's Codex CLI, which ChatGPT sign-in is registered for.
pub const CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// What the sign-in asks for (`offline_access`: a refresh token).
pub const SCOPE: &str = "openid profile email offline_access";
/// The `originator` zi names itself as, in the authorization URL and on Codex requests.
pub const ORIGINATOR: &str = "zi";
/// The path of the local callback the redirect URI names.
pub const CALLBACK_PATH: &str = "/auth/callback";

/// The access token claim that holds the ChatGPT account.
const AUTH_CLAIM: &str = "https://api.openai.com/auth";

/// A PKCE verifier and its S256 challenge.
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl Pkce {
    /// A fresh verifier: 32 random bytes, base64url without padding (43 characters).
    pub fn generate() -> Result<Pkce, TokenError> {
        Ok(Pkce::from_verifier(
            URL_SAFE_NO_PAD.encode(random_bytes::<32>()?),
        ))
    }

    /// The challenge of a given verifier: base64url(SHA-256(verifier)) without padding.
    pub fn from_verifier(verifier: String) -> Pkce {
        let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
        Pkce {
            challenge: URL_SAFE_NO_PAD.encode(digest.as_ref()),
            verifier,
        }
    }
}

/// The `state` of one sign-in: 16 random bytes as 32 hex digits.
pub fn random_state() -> Result<String, TokenError> {
    Ok(random_bytes::<16>()?
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

fn random_bytes<const N: usize>() -> Result<[u8; N], TokenError> {
    let mut bytes = [0u8; N];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|e| TokenError::Random(e.to_string()))?;
    Ok(bytes)
}

/// `http://localhost:<port>/auth/callback`: the redirect URI OpenAI has registered for this
/// client names `localhost`; zi listens on 127.0.0.1.
pub fn redirect_uri(port: u16) -> String {
    format!("http://localhost:{port}{CALLBACK_PATH}")
}

/// The page the person signs in at.
pub fn authorize_url(
    endpoints: &AuthEndpoints,
    redirect_uri: &str,
    challenge: &str,
    state: &str,
) -> String {
    let base = format!("{}/oauth/authorize", endpoints.openai_auth);
    let query: String = form_query(&[
        ("response_type", "code"),
        ("client_id", CLIENT_ID),
        ("redirect_uri", redirect_uri),
        ("scope", SCOPE),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", state),
        ("id_token_add_organizations", "true"),
        ("codex_cli_simplified_flow", "true"),
        ("originator", ORIGINATOR),
    ]);
    format!("{base}?{query}")
}

/// `application/x-www-form-urlencoded` pairs.
fn form_query(pairs: &[(&str, &str)]) -> String {
    reqwest::Url::parse_with_params("http://query.invalid/", pairs)
        .ok()
        .and_then(|url| url.query().map(str::to_string))
        .unwrap_or_default()
}

/// Exchanges the authorization code for tokens.
pub async fn exchange_code(
    endpoints: &AuthEndpoints,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
) -> Result<OAuthEntry, TokenError> {
    let form = [
        ("grant_type", "authorization_code"),
        ("client_id", CLIENT_ID),
        ("code", code),
        ("code_verifier", verifier),
        ("redirect_uri", redirect_uri),
    ];
    let answer = token_request(endpoints, &form, &[code, verifier]).await?;
    let mut entry = entry_from(&answer, None)?;
    entry.account_id = Some(account_id(&entry.access).ok_or(TokenError::NoAccountId)?);
    Ok(entry)
}

/// A new access token for a stored sign-in. The answer's refresh token replaces the old one
/// (OpenAI rotates them); an answer without one keeps it. Unknown fields of the entry are kept.
pub async fn refresh(
    endpoints: &AuthEndpoints,
    old: &OAuthEntry,
) -> Result<OAuthEntry, TokenError> {
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", old.refresh.as_str()),
        ("client_id", CLIENT_ID),
    ];
    let answer = token_request(endpoints, &form, &[&old.refresh, &old.access]).await?;
    let mut entry = entry_from(&answer, Some(&old.refresh))?;
    entry.account_id = account_id(&entry.access).or_else(|| old.account_id.clone());
    entry.extra = old.extra.clone();
    Ok(entry)
}

async fn token_request(
    endpoints: &AuthEndpoints,
    form: &[(&str, &str)],
    secrets: &[&str],
) -> Result<Value, TokenError> {
    let url = format!("{}/oauth/token", endpoints.openai_auth);
    let request = client()?.post(url).headers(headers(&[])).form(form);
    Ok(send_json(AuthRequest { request, secrets }).await?)
}

/// The stored entry of a token answer: `access_token` and a numeric `expires_in` are required.
fn entry_from(answer: &Value, old_refresh: Option<&str>) -> Result<OAuthEntry, TokenError> {
    let access =
        text_field(answer, "access_token").ok_or(TokenError::Incomplete("access_token"))?;
    let expires_in =
        number_field(answer, "expires_in").ok_or(TokenError::Incomplete("expires_in"))?;
    let refresh = text_field(answer, "refresh_token")
        .or_else(|| old_refresh.map(str::to_string))
        .ok_or(TokenError::Incomplete("refresh_token"))?;
    Ok(OAuthEntry {
        access,
        refresh,
        expires: super::now_millis().saturating_add((expires_in * 1000.0) as i64),
        ..OAuthEntry::default()
    })
}

/// The ChatGPT account id in an access token (a JWT): the payload's
/// `["https://api.openai.com/auth"]["chatgpt_account_id"]`.
pub fn account_id(access_token: &str) -> Option<String> {
    let payload = access_token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .or_else(|_| URL_SAFE.decode(payload))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims
        .get(AUTH_CLAIM)?
        .get("chatgpt_account_id")?
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_matches_rfc_7636_appendix_b() {
        let pkce = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into());
        assert_eq!(
            pkce.challenge,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let fresh = Pkce::generate().unwrap();
        assert_eq!(fresh.verifier.len(), 43);
        let state = random_state().unwrap();
        assert_eq!(state.len(), 32);
        assert!(state.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn the_account_id_comes_from_the_claims() {
        let payload = URL_SAFE_NO_PAD
            .encode(serde_json::json!({AUTH_CLAIM: {"chatgpt_account_id": "acct-1"}}).to_string());
        assert_eq!(
            account_id(&format!("h.{payload}.s")).as_deref(),
            Some("acct-1")
        );
        let padded =
            URL_SAFE.encode(r#"{"https://api.openai.com/auth":{"chatgpt_account_id":"a"}}"#);
        assert_eq!(account_id(&format!("h.{padded}.s")).as_deref(), Some("a"));
        assert_eq!(account_id("not-a-jwt"), None);
        let empty = URL_SAFE_NO_PAD.encode(r#"{"https://api.openai.com/auth":{}}"#);
        assert_eq!(account_id(&format!("h.{empty}.s")), None);
    }

    #[test]
    fn the_authorization_url_carries_every_parameter() {
        let url = authorize_url(&AuthEndpoints::default(), &redirect_uri(1455), "chal", "st");
        assert_eq!(
            url,
            "https://auth.openai.com/oauth/authorize?response_type=code&client_id=app_EMoamEEZ73f0CkXaXp7hrann&redirect_uri=http%3A%2F%2Flocalhost%3A1455%2Fauth%2Fcallback&scope=openid+profile+email+offline_access&code_challenge=chal&code_challenge_method=S256&state=st&id_token_add_organizations=true&codex_cli_simplified_flow=true&originator=zi"
        );
    }

    #[test]
    fn token_answers_need_access_and_expiry() {
        let answer = serde_json::json!({"access_token": "a", "expires_in": 10});
        assert_eq!(
            entry_from(&answer, None).unwrap_err(),
            TokenError::Incomplete("refresh_token")
        );
        let entry = entry_from(&answer, Some("old")).unwrap();
        assert_eq!(entry.refresh, "old");
        assert!(entry.expires > crate::auth::now_millis());
        assert_eq!(
            entry_from(&serde_json::json!({"access_token": "a"}), Some("r")).unwrap_err(),
            TokenError::Incomplete("expires_in")
        );
    }
}
