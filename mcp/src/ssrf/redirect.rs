//! The redirect policy: every hop is checked by the [`Guard`] like the first request, and at most
//! [`MAX_REDIRECTS`] are followed. A redirect to a host name is checked again by the resolver
//! when reqwest connects to it.

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
            Err(refusal) => attempt.error(refusal),
        }
    })
}
