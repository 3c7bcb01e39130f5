//! Keeping credentials out of everything `reliable_http_call` echoes back to the agent (and so
//! into its context, logs and transcripts): the values of `Authorization`, `Proxy-Authorization`
//! and `Cookie` sent, `Set-Cookie` received. (A URL with a user or password is refused before
//! anything is sent: the HTTP client would turn it into a Basic header.)
//!
//! Header values are replaced by `[redacted]`; the secrets sent, and every form derived from them
//! (a Basic credential's base64, its decoded `user:password`, the user and the password alone),
//! are also scrubbed from any text echoed (a response body or header that reflects the request's
//! headers, an error message).
//!
//! ```
//! use reliable_mcp::redact::Secrets;
//!
//! let mut s = Secrets::default();
//! s.add_header("Authorization", "Bearer sk-live-123456");
//! assert_eq!(s.scrub("echo: Bearer sk-live-123456"), "echo: [redacted]");
//! assert_eq!(s.scrub("token sk-live-123456"), "token [redacted]");
//!
//! s.add_header("Authorization", "Basic YWxpY2U6cHctU0VDUkVU"); // alice:pw-SECRET
//! assert_eq!(s.scrub("YWxpY2U6cHctU0VDUkVU alice:pw-SECRET"), "[redacted] [redacted]");
//! ```

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Whether a header's value is a credential that must never be echoed.
pub fn is_sensitive(name: &str) -> bool {
    [
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
    ]
    .iter()
    .any(|s| name.eq_ignore_ascii_case(s))
}

/// The secrets of one request, to scrub from echoed text.
#[derive(Clone, Debug, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// Remembers the secret parts of a sensitive header's value (the whole value, the credential
    /// after an auth scheme, each cookie's value); other headers are ignored.
    pub fn add_header(&mut self, name: &str, value: &str) {
        if !is_sensitive(name) {
            return;
        }
        self.add(value);
        if let Some((scheme, credential)) = value.trim().split_once(' ') {
            self.add(credential);
            if scheme.eq_ignore_ascii_case("basic") {
                self.add_basic(credential.trim());
            }
        }
        if name.eq_ignore_ascii_case("cookie") {
            for pair in value.split(';') {
                if let Some((_, v)) = pair.split_once('=') {
                    self.add(v);
                }
            }
        }
    }

    /// Remembers the decoded forms of a Basic credential: `user:password`, and each part.
    fn add_basic(&mut self, credential: &str) {
        use base64::Engine as _;
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(credential) else {
            return;
        };
        let decoded = String::from_utf8_lossy(&bytes).into_owned();
        self.add(&decoded);
        if let Some((user, password)) = decoded.split_once(':') {
            self.add(user);
            self.add(password);
        }
    }

    /// Remembers a secret (too-short ones are skipped: scrubbing "a" would garble the text).
    pub fn add(&mut self, secret: &str) {
        let s = secret.trim();
        if s.len() >= 4 && !self.values.iter().any(|v| v == s) {
            self.values.push(s.to_string());
            // Longest first, so a secret containing another is replaced whole.
            self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        }
    }

    /// `text` with every remembered secret replaced.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), REDACTED);
            }
        }
        out
    }
}

/// `url` without its user name and password, for echoing.
pub fn url_without_credentials(url: &url::Url) -> String {
    let mut u = url.clone();
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_username("");
        let _ = u.set_password(None);
    }
    u.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_headers_in_any_case() {
        for n in [
            "Authorization",
            "authorization",
            "COOKIE",
            "Set-Cookie",
            "Proxy-Authorization",
        ] {
            assert!(is_sensitive(n), "{n}");
        }
        assert!(!is_sensitive("Content-Type"));
    }

    #[test]
    fn cookies_and_credentials_are_scrubbed() {
        let mut s = Secrets::default();
        s.add_header("Cookie", "session=abcdef123; theme=dark-mode");
        s.add_header("Content-Type", "application/json-secret");
        let out = s.scrub("Cookie: session=abcdef123; theme=dark-mode and abcdef123 alone, application/json-secret");
        assert!(!out.contains("abcdef123"), "{out}");
        assert!(
            out.contains("application/json-secret"),
            "other headers are not secrets"
        );
    }

    #[test]
    fn a_basic_credential_is_scrubbed_encoded_and_decoded() {
        let mut s = Secrets::default();
        // base64("token-0123456789:")
        s.add_header("authorization", "basic dG9rZW4tMDEyMzQ1Njc4OTo=");
        let out = s.scrub("dG9rZW4tMDEyMzQ1Njc4OTo= token-0123456789: token-0123456789");
        assert_eq!(out, "[redacted] [redacted] [redacted]");
        s.add_header("Authorization", "Basic %%%not-base64");
        assert_eq!(s.scrub("%%%not-base64"), "[redacted]");
    }

    #[test]
    fn url_credentials_are_dropped() {
        let u: url::Url = "https://user:pw@example.com/x?q=1".parse().unwrap();
        assert_eq!(url_without_credentials(&u), "https://example.com/x?q=1");
    }
}
