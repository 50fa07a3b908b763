//! Where an HTTP server's redirects may lead (docs/mcp.md#redirects): the configured headers
//! (`headers`, `headerEnvironment`) are secrets meant for the configured server only, and
//! reqwest strips nothing but `Authorization`, `Cookie` and `Proxy-Authorization` when a
//! redirect changes host. So zi follows a redirect only within the configured URL's origin
//! (scheme, host and port) and fails the request on any other.

use reqwest::Url;
use reqwest::redirect::{Attempt, Policy};

/// As reqwest's default policy: a loop of more redirects than this is an error.
const MAX_REDIRECTS: usize = 10;

/// Why a redirect was not followed; its text is what the model and the log read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RedirectRefused {
    #[error(
        "the server redirected to another origin ({0}); zi follows redirects only within the \
         configured server's origin, so its headers reach no other server"
    )]
    OtherOrigin(String),
    #[error("the server redirected more than {MAX_REDIRECTS} times")]
    TooMany,
}

/// The redirect policy of the client of `configured`.
pub(crate) fn same_origin_only(configured: &Url) -> Policy {
    let origin = configured.origin();
    Policy::custom(move |attempt: Attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(RedirectRefused::TooMany);
        }
        if attempt.url().origin() == origin {
            attempt.follow()
        } else {
            let target = attempt.url().as_str().to_owned();
            attempt.error(RedirectRefused::OtherOrigin(target))
        }
    })
}
