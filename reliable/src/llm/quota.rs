//! Proactive rate-limit headers: how much of each limit is left, read from every response (a
//! success too), so a client slows down before the provider answers 429.
//!
//! | provider | headers | reset |
//! |---|---|---|
//! | Anthropic | `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}` | an RFC 3339 timestamp |
//! | OpenAI | `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` | a duration such as `6m0s`, `1s`, `20ms` |
//! | IETF draft (08 and later) | `RateLimit: "p";r=50;t=30` with `RateLimit-Policy: "p";q=100;w=60` | `t`: seconds |
//! | IETF draft (06) | `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` | seconds |
//!
//! A quota needs its remaining count and its reset; one without either is skipped (the client
//! cannot tell when it refills). IETF quotas are in requests unless the policy names another unit
//! (`qu`), in which case they are skipped.

use std::time::{Duration, SystemTime};

use reliable_core::Instant;
use reliable_core::provider::{QuotaKind, QuotaUpdate};

use super::calendar::parse_rfc3339;
use crate::http::Headers;

/// One rate limit a response reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// Which limit.
    pub kind: QuotaKind,
    /// The limit per window, when reported.
    pub limit: Option<u64>,
    /// What is left.
    pub remaining: u64,
    /// How long until it refills, from the response.
    pub reset_after: Duration,
}

impl Quota {
    /// The core's form on the caller's clock, for
    /// [`SpendBreaker::observe`](reliable_core::spend::SpendBreaker::observe).
    pub fn update(&self, now: Instant) -> QuotaUpdate {
        QuotaUpdate {
            kind: self.kind,
            limit: self.limit,
            remaining: self.remaining,
            reset: now + reliable_core::Duration::from(self.reset_after),
        }
    }
}

/// Every quota the headers report (Anthropic's, OpenAI's and the IETF draft's), in that order.
pub fn quotas(headers: &(impl Headers + ?Sized), now: SystemTime) -> Vec<Quota> {
    let mut out = Vec::new();
    let count = |name: &str| {
        headers
            .header(name)
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    for (kind, name) in [
        (QuotaKind::Requests, "requests"),
        (QuotaKind::Tokens, "tokens"),
        (QuotaKind::InputTokens, "input-tokens"),
        (QuotaKind::OutputTokens, "output-tokens"),
    ] {
        let reset = headers
            .header(&format!("anthropic-ratelimit-{name}-reset"))
            .and_then(parse_rfc3339)
            .map(|at| at.duration_since(now).unwrap_or(Duration::ZERO));
        if let (Some(remaining), Some(reset_after)) = (
            count(&format!("anthropic-ratelimit-{name}-remaining")),
            reset,
        ) {
            out.push(Quota {
                kind,
                limit: count(&format!("anthropic-ratelimit-{name}-limit")),
                remaining,
                reset_after,
            });
        }
    }
    for (kind, name) in [
        (QuotaKind::Requests, "requests"),
        (QuotaKind::Tokens, "tokens"),
    ] {
        let reset = headers
            .header(&format!("x-ratelimit-reset-{name}"))
            .and_then(|v| v.trim().parse::<reliable_core::Duration>().ok());
        if let (Some(remaining), Some(reset)) =
            (count(&format!("x-ratelimit-remaining-{name}")), reset)
        {
            out.push(Quota {
                kind,
                limit: count(&format!("x-ratelimit-limit-{name}")),
                remaining,
                reset_after: reset.into(),
            });
        }
    }
    out.extend(ietf(headers));
    out
}

/// The IETF draft's fields: the structured form (`RateLimit` + `RateLimit-Policy`, drafts 08 and
/// later; the first item of `RateLimit` and the policy of the same name) or draft 06's three
/// fields.
fn ietf(headers: &(impl Headers + ?Sized)) -> Option<Quota> {
    let secs = |v: &str| v.trim().parse::<u64>().ok().map(Duration::from_secs);
    if let Some(value) = headers.header("ratelimit") {
        let item = value.split(',').next()?;
        let (name, params) = item_params(item);
        let r = param(&params, "r")?.parse().ok()?;
        let t = secs(param(&params, "t")?)?;
        let mut limit = None;
        if let Some(policies) = headers.header("ratelimit-policy") {
            for p in policies.split(',') {
                let (pname, pparams) = item_params(p);
                if pname == name {
                    if param(&pparams, "qu").is_some_and(|u| u.trim_matches('"') != "requests") {
                        return None;
                    }
                    limit = param(&pparams, "q").and_then(|q| q.parse().ok());
                }
            }
        }
        return Some(Quota {
            kind: QuotaKind::Requests,
            limit,
            remaining: r,
            reset_after: t,
        });
    }
    let remaining = headers.header("ratelimit-remaining")?.trim().parse().ok()?;
    Some(Quota {
        kind: QuotaKind::Requests,
        limit: headers
            .header("ratelimit-limit")
            .and_then(|v| v.trim().parse().ok()),
        remaining,
        reset_after: secs(headers.header("ratelimit-reset")?)?,
    })
}

/// A structured-field list item `"name";k=v;k2=v2` as its name and parameters.
fn item_params(item: &str) -> (&str, Vec<(&str, &str)>) {
    let mut parts = item.split(';');
    let name = parts.next().unwrap_or_default().trim().trim_matches('"');
    let params = parts
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    (name, params)
}

fn param<'a>(params: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}
