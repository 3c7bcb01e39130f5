//! The redirect policy: every hop is checked by the [`Guard`] like the first request, and at most
//! [`MAX_REDIRECTS`] are followed. A redirect to a host name is checked again by the resolver
//! when reqwest connects to it.
//!
//! reqwest never even asks the policy about a redirect it cannot follow (a `Location` that is
//! not a URL, or one out of http(s), such as `file:///etc/passwd`): it hands back the 3xx itself.
//! [`unfollowed`] turns that into a refusal with its reason, so the caller never mistakes it for
//! an answer.

use std::sync::Arc;

use reqwest::redirect::Policy;

use super::guard::{Guard, Refusal};

/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 3;

/// A reqwest redirect policy that re-checks every hop and stops after `max` redirects.
pub fn policy(guard: Arc<Guard>, max: usize) -> Policy {
    Policy::custom(move |attempt| {
        // `previous` holds the URLs already requested: the original and earlier hops.
        if attempt.previous().len() > max {
            return attempt.error(Refusal::TooManyRedirects(max));
        }
        match guard.check_url(attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(why) => {
                let to = attempt.url().clone();
                attempt.error(refused_redirect(&to, why))
            }
        }
    })
}

fn refused_redirect(to: &url::Url, why: Refusal) -> Refusal {
    Refusal::Redirect {
        to: crate::echo::quoted(&crate::redact::url_without_credentials(to)),
        why: Box::new(why),
    }
}

/// Why the redirect answer `status` from `from` was not followed, if it is one: the guard's
/// refusal of its `location`, or the reason reqwest could not follow it.
pub fn unfollowed(
    guard: &Guard,
    from: &url::Url,
    status: u16,
    location: Option<&str>,
) -> Option<String> {
    if !matches!(status, 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let Some(location) = location else {
        return Some(format!(
            "redirect not followed: the {status} answer has no Location"
        ));
    };
    let to = match from.join(location) {
        Ok(to) => to,
        Err(e) => {
            return Some(format!(
                "refused: redirect to {} not followed: not a valid URL ({e})",
                crate::echo::quoted(location)
            ));
        }
    };
    Some(match guard.check_url(&to) {
        Err(why) => refused_redirect(&to, why).to_string(),
        Ok(()) => format!(
            "redirect to {} not followed: the HTTP client cannot follow it",
            crate::echo::quoted(&crate::redact::url_without_credentials(&to))
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfollowed_redirects_say_why() {
        let g = Guard::default();
        let from: url::Url = "https://example.com/a".parse().unwrap();
        let file = unfollowed(&g, &from, 302, Some("file:///etc/passwd")).unwrap();
        assert!(
            file.starts_with(
                "refused: redirect to \"file:///etc/passwd\" not followed: scheme \"file\""
            ),
            "{file}"
        );
        let bad = unfollowed(&g, &from, 301, Some("http://[::1")).unwrap();
        assert!(bad.contains("not a valid URL"), "{bad}");
        let creds = unfollowed(&g, &from, 307, Some("https://u:pw@example.org/")).unwrap();
        assert!(
            !creds.contains("pw") && creds.contains("credentials"),
            "{creds}"
        );
        assert_eq!(unfollowed(&g, &from, 200, Some("/x")), None);
        assert_eq!(unfollowed(&g, &from, 304, None), None);
    }
}
