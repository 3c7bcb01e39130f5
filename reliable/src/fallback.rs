//! [`Fallback`]: try providers in order until one answers, and say which one did.
//!
//! Each provider is a [`Reliable`] wrapping a function (its retries, breaker and timeouts apply)
//! or a plain function. The answer comes back as [`Served`], stamped with the path that served
//! it: the provider's [`label`](Reliable::label), such as `breaker(retry(primary))` or
//! `retry(backup)`, which is how logs and meters know whom to credit. The first provider that
//! succeeds wins; a provider refused by its breaker costs nothing (it is not called).
//!
//! ```
//! use reliable::{Fallback, Reliable};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let primary = Reliable::layered_exercise("primary").build()?;
//! let stack = Fallback::new()
//!     .then(&primary, |_prompt: &'static str| async { Err::<String, _>(std::io::Error::other("down")) })
//!     .then_fn("cache", |prompt| async move { Ok(format!("cached answer to {prompt}")) });
//! let reply = stack.call("hi").await?;
//! assert_eq!(&*reply.served_by, "cache");
//! assert_eq!(reply.value, "cached answer to hi");
//! # Ok(())
//! # }
//! ```

use crate::Reliable;
use crate::classify::{ByType, Classify};
use crate::error::Error;
use reliable_core::retry::GiveUpReason;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

type Answer<'a, T, E> = Pin<Box<dyn Future<Output = Result<T, Error<E>>> + Send + 'a>>;
type Call<'a, Req, T, E> = Arc<dyn Fn(Req) -> Answer<'a, T, E> + Send + Sync + 'a>;

/// Providers tried in order. `Req` is what each call is given (a prompt, a request); it is
/// cloned for each provider tried.
pub struct Fallback<'a, Req, T, E> {
    providers: Vec<(Arc<str>, Call<'a, Req, T, E>)>,
}

impl<Req, T, E> Clone for Fallback<'_, Req, T, E> {
    fn clone(&self) -> Self {
        Fallback {
            providers: self.providers.clone(),
        }
    }
}

impl<Req, T, E> fmt::Debug for Fallback<'_, Req, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<&str> = self.providers.iter().map(|(l, _)| &**l).collect();
        f.debug_struct("Fallback")
            .field("providers", &labels)
            .finish()
    }
}

/// An answer and the provider that gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served<T> {
    /// The answer.
    pub value: T,
    /// The label of the provider that served it, e.g. `breaker(retry(primary))`.
    pub served_by: Arc<str>,
}

/// Every provider failed: each one's label and error, in the order tried.
#[derive(Debug)]
pub struct AllFailed<E> {
    /// `(label, error)` per provider.
    pub errors: Vec<(Arc<str>, Error<E>)>,
}

impl<E: fmt::Display> fmt::Display for AllFailed<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("every provider failed")?;
        for (label, e) in &self.errors {
            write!(f, "; {label}: {e}")?;
        }
        Ok(())
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for AllFailed<E> {}

impl<Req, T, E> Default for Fallback<'_, Req, T, E> {
    fn default() -> Self {
        Fallback {
            providers: Vec::new(),
        }
    }
}

impl<'a, Req, T, E> Fallback<'a, Req, T, E>
where
    Req: Clone + Send + Sync + 'a,
    T: Send + 'a,
    E: Send + 'a,
{
    /// No providers yet.
    pub fn new() -> Self {
        Fallback::default()
    }

    /// Adds `f` behind `rel` (its retries, breaker and timeouts), labelled with `rel`'s label.
    /// `f` may borrow from its surroundings; the stack then lives no longer than what it borrows.
    ///
    /// ```
    /// use reliable::{Fallback, Reliable};
    /// use std::collections::HashMap;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backup = Reliable::builder("backup").build()?;
    /// let answers = HashMap::from([("hi", "hello")]); // borrowed, not moved or 'static
    /// let stack = Fallback::new().then(&backup, |prompt: &'static str| {
    ///     let found = answers.get(prompt).map(|a| a.to_string());
    ///     async move { found.ok_or(std::io::Error::from(std::io::ErrorKind::NotFound)) }
    /// });
    /// assert_eq!(stack.call("hi").await?.value, "hello");
    /// # Ok(())
    /// # }
    /// ```
    pub fn then<F, Fut>(mut self, rel: &Reliable, f: F) -> Self
    where
        ByType: Classify<E, T>,
        F: Fn(Req) -> Fut + Send + Sync + 'a,
        Fut: Future<Output = Result<T, E>> + Send + 'a,
    {
        let rel = rel.clone();
        let f = Arc::new(f);
        let label: Arc<str> = Arc::from(rel.label());
        let call: Call<'a, Req, T, E> = Arc::new(move |req: Req| {
            let (rel, f) = (rel.clone(), f.clone());
            Box::pin(async move { rel.call(|| f(req.clone())).await })
        });
        self.providers.push((label, call));
        self
    }

    /// Adds a plain function, called once, labelled `name`. Its error is reported as
    /// [`Error::GaveUp`] after one attempt.
    pub fn then_fn<F, Fut>(mut self, name: &str, f: F) -> Self
    where
        F: Fn(Req) -> Fut + Send + Sync + 'a,
        Fut: Future<Output = Result<T, E>> + Send + 'a,
    {
        let call: Call<'a, Req, T, E> = Arc::new(move |req: Req| {
            let fut = f(req);
            Box::pin(async move {
                fut.await.map_err(|last| Error::GaveUp {
                    reason: GiveUpReason::MaxAttempts,
                    last,
                    attempts: 1,
                })
            })
        });
        self.providers.push((Arc::from(name), call));
        self
    }

    /// The labels of the providers, in order.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.providers.iter().map(|(l, _)| &**l)
    }

    /// Tries each provider in order with a clone of `req`; the first answer wins.
    pub async fn call(&self, req: Req) -> Result<Served<T>, AllFailed<E>> {
        let mut errors = Vec::new();
        for (label, call) in &self.providers {
            match call(req.clone()).await {
                Ok(value) => {
                    return Ok(Served {
                        value,
                        served_by: label.clone(),
                    });
                }
                Err(e) => errors.push((label.clone(), e)),
            }
        }
        Err(AllFailed { errors })
    }
}
