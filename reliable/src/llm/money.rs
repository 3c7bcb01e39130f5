//! Money limits: the answers that say a budget, a spend limit or the credits are used up.
//!
//! Retrying one cannot succeed before the limit resets (or someone raises it), and every retry is a
//! round trip the provider may count; a client should stop and open its
//! [`SpendBreaker`](reliable_core::spend::SpendBreaker) until the reset. The rules, per provider,
//! are in the [module table](super); [`money_limit`] applies them.

use std::time::{Duration, SystemTime};

use super::calendar;
use crate::http::HeaderSignals;

/// The fields of a JSON error body that the rules read. Every provider here nests them under
/// `error` (`{"error": {"type": ..., "code": ..., "details": {"error_code": ...}}}`); a body that
/// is not JSON reads as empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorBody {
    /// `error.type`.
    pub kind: Option<String>,
    /// `error.code`, as text (OpenRouter sends a number).
    pub code: Option<String>,
    /// `error.details.error_code` (Anthropic).
    pub detail_code: Option<String>,
    /// `error.metadata.limit_source` (OpenRouter).
    pub limit_source: Option<String>,
    /// `error.message`.
    pub message: Option<String>,
}

impl ErrorBody {
    /// Reads the fields from `body`; anything missing or malformed is `None`.
    pub fn parse(body: &str) -> Self {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
            return ErrorBody::default();
        };
        let e = &v["error"];
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        ErrorBody {
            kind: text(&e["type"]),
            code: text(&e["code"]),
            detail_code: text(&e["details"]["error_code"]),
            limit_source: text(&e["metadata"]["limit_source"]),
            message: text(&e["message"]),
        }
    }

    /// Whether `error.type` is `kind`.
    pub fn is_type(&self, kind: &str) -> bool {
        self.kind.as_deref() == Some(kind)
    }

    fn type_or_code(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.kind.as_deref().is_some_and(&pred) || self.code.as_deref().is_some_and(&pred)
    }
}

/// OpenAI's billing codes (`error.type` or `error.code`) that never clear by waiting a moment.
fn openai_money(s: &str) -> bool {
    matches!(
        s,
        "insufficient_quota" | "credit_balance_exhausted" | "organization_usage_limit_exceeded"
    ) || s.ends_with("_spend_limit_exceeded")
}

/// OpenRouter's in-flight budget is full (recent paid requests still settling): a 402 that its
/// documentation calls transient, sent with a `Retry-After`.
pub fn is_in_flight_budget(status: u16, signals: &HeaderSignals, body: &ErrorBody) -> bool {
    status == 402
        && body.limit_source.as_deref() == Some("openrouter_in_flight_budget")
        && signals.retry_after.is_some()
}

/// If the answer is a money limit: `Some(reset)`, where `reset` is how long until it lifts when
/// known (the server's `Retry-After`, or Anthropic's monthly reset); `None` if it is not one.
pub fn money_limit(
    status: u16,
    signals: &HeaderSignals,
    body: &ErrorBody,
    now: SystemTime,
) -> Option<Option<Duration>> {
    let server = signals.retry_after;
    // Anthropic: the usage tier's monthly cap, lifted at 00:00 UTC on the 1st of the next month.
    if status == 429 && body.detail_code.as_deref() == Some("enforced_spend_limit_reached") {
        return Some(server.or_else(|| calendar::until_next_month(now)));
    }
    // Anthropic: a spend limit the organization or workspace set.
    if status == 400
        && body.is_type("invalid_request_error")
        && body
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("You have reached your specified"))
    {
        return Some(server);
    }
    if is_in_flight_budget(status, signals, body) {
        return None;
    }
    let money = status == 402 // Anthropic billing_error, OpenRouter credits or key limit
        || status == 412 // Portkey: budget exhausted
        || body.type_or_code(openai_money)
        || body.type_or_code(|s| s == "budget_exceeded"); // LiteLLM
    (money && status >= 400).then_some(server)
}
