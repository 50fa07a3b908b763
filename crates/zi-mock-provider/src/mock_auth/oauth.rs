//! OpenAI's OAuth server as the mock plays it: the authorization page (PKCE S256 required, the
//! code bound to its challenge and redirect URI) and the token endpoint (code exchange with the
//! verifier checked, refresh with rotation: a used refresh token is dead).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;

use zi_os::sync::lock;

use super::{AuthRequest, Consent, Grant, OPENAI_CLIENT_ID, Shared, fake_jwt, find, json_response};

/// Why the authorization page refuses a request; the Display is its `error` field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorizeRefusal {
    /// Not zi's client id.
    #[error("unknown client_id")]
    ClientId,
    /// Not the authorization-code flow with PKCE S256.
    #[error("response_type=code and code_challenge_method=S256 are required")]
    Flow,
    /// A required parameter is missing.
    #[error("redirect_uri, state and code_challenge are required")]
    Missing,
}

/// The redirect the authorization page answers with, or why the request is refused.
pub(super) fn authorize(
    shared: &Shared,
    query: &[(String, String)],
) -> Result<String, AuthorizeRefusal> {
    let param = |name| find(query, name).unwrap_or("");
    if param("client_id") != OPENAI_CLIENT_ID {
        return Err(AuthorizeRefusal::ClientId);
    }
    if param("response_type") != "code" || param("code_challenge_method") != "S256" {
        return Err(AuthorizeRefusal::Flow);
    }
    let (redirect_uri, state, challenge) = (
        param("redirect_uri"),
        param("state"),
        param("code_challenge"),
    );
    if redirect_uri.is_empty() || state.is_empty() || challenge.is_empty() {
        return Err(AuthorizeRefusal::Missing);
    }
    let mut shared_state = lock(&shared.state);
    shared_state.issued += 1;
    let code = format!("code-mock-{}-secret", shared_state.issued);
    shared_state.grants.insert(
        code.clone(),
        Grant {
            challenge: challenge.to_string(),
            redirect_uri: redirect_uri.to_string(),
        },
    );
    let encode = |pairs: &[(&str, &str)]| {
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish()
    };
    let query = match shared_state.consent {
        Consent::Approve => encode(&[("code", &code), ("state", state)]),
        Consent::ForgeState => encode(&[("code", &code), ("state", "forged")]),
        Consent::Deny => encode(&[
            ("error", "access_denied"),
            ("error_description", "The user refused"),
            ("state", state),
        ]),
    };
    Ok(format!("{redirect_uri}?{query}"))
}

/// `POST /oauth/token`.
pub(super) async fn token(shared: &Shared, request: &AuthRequest) -> axum::response::Response {
    let delay = lock(&shared.state).token_delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut state = lock(&shared.state);
    if let Some((status, body)) = state.fail_next_token.take() {
        return json_response(status, body);
    }
    if let Some(status) = state.echo_next_token.take() {
        let description = format!("you sent {}", request.body);
        return json_response(
            status,
            json!({"error": "invalid_request", "error_description": description}),
        );
    }
    let invalid = |description: &str| {
        json_response(
            400,
            json!({"error": "invalid_grant", "error_description": description}),
        )
    };
    if request.field("client_id") != Some(OPENAI_CLIENT_ID) {
        return json_response(401, json!({"error": "invalid_client"}));
    }
    match request.field("grant_type") {
        Some("authorization_code") => {
            let code = request.field("code").unwrap_or("");
            let Some(grant) = state.grants.remove(code) else {
                return invalid("unknown or used code");
            };
            let verifier = request.field("code_verifier").unwrap_or("");
            let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
            if URL_SAFE_NO_PAD.encode(digest.as_ref()) != grant.challenge {
                return invalid("code_verifier does not match the challenge");
            }
            if request.field("redirect_uri") != Some(grant.redirect_uri.as_str()) {
                return invalid("redirect_uri differs from the authorization request");
            }
        }
        Some("refresh_token") => {
            let presented = request.field("refresh_token");
            if presented.is_none() || presented != state.refresh_token.as_deref() {
                return invalid("the refresh token is invalid or was already used");
            }
        }
        _ => return json_response(400, json!({"error": "unsupported_grant_type"})),
    }
    state.issued += 1;
    let n = state.issued;
    let access = fake_jwt(&state.account_id, n);
    let refresh = format!("rt-mock-{n}-refresh-secret");
    state.refresh_token = Some(refresh.clone());
    state.last_access = Some(access.clone());
    json_response(
        200,
        json!({
            "access_token": access,
            "refresh_token": refresh,
            "id_token": format!("idt-mock-{n}"),
            "expires_in": state.expires_in,
            "token_type": "Bearer",
        }),
    )
}
