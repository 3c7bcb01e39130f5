//! Reading a response body under a cap: a declared `Content-Length` over the cap is refused before
//! a byte is read, and a streamed body (chunked, or lying about its length) is cut off as soon as
//! it passes the cap, so a huge or never-ending body costs at most `cap` bytes of memory.

/// Why a body was not read whole.
#[derive(Debug)]
pub enum BodyError {
    /// The server declared a length over the cap.
    Declared {
        /// The declared `Content-Length`.
        length: u64,
        /// The cap.
        cap: usize,
    },
    /// The body passed the cap while streaming; reading stopped there.
    Exceeded {
        /// The cap.
        cap: usize,
    },
    /// The transfer failed (timeout, reset).
    Transfer(reqwest::Error),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Declared { length, cap } => write!(
                f,
                "response body too large: Content-Length {length} bytes is over the cap of {cap} bytes (not read)"
            ),
            BodyError::Exceeded { cap } => write!(
                f,
                "response body too large: stopped reading at the cap of {cap} bytes"
            ),
            BodyError::Transfer(e) => write!(
                f,
                "reading the response body failed: {}",
                super::client::describe(e)
            ),
        }
    }
}

impl std::error::Error for BodyError {}

/// Reads `resp`'s body, at most `cap` bytes.
pub async fn read_capped(resp: &mut reqwest::Response, cap: usize) -> Result<Vec<u8>, BodyError> {
    if let Some(length) = resp.content_length()
        && length > cap as u64
    {
        return Err(BodyError::Declared { length, cap });
    }
    let mut body = Vec::with_capacity(resp.content_length().map_or(0, |l| l as usize).min(cap));
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Transfer)? {
        if body.len() + chunk.len() > cap {
            return Err(BodyError::Exceeded { cap });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
