//! [`FallbackLayer`]: when the wrapped service fails, ask another one, and say which one answered.
//!
//! The primary's answer is a failure when it is an error or a response its [`Policy`] classifies
//! as failed; then the backup gets a copy of the request ([`Policy::clone_request`]; a request
//! that cannot be copied gets no fallback). The answer is stamped with the name of the path that
//! served it ([`Stamp`]), unless a fallback further inside already stamped it: with nested
//! fallbacks, the innermost name is the most precise.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::classify::Policy;
use super::error::BoxError;
use super::retry::RetryFuture;

/// The name of the path that served a response, in an HTTP response's extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedBy(pub Arc<str>);

/// A response that can carry the name of the path that served it.
pub trait Stamp {
    /// Records `path` unless a path is already recorded.
    fn stamp(&mut self, path: &Arc<str>);
}

impl<B> Stamp for http::Response<B> {
    fn stamp(&mut self, path: &Arc<str>) {
        if self.extensions().get::<ServedBy>().is_none() {
            self.extensions_mut().insert(ServedBy(path.clone()));
        }
    }
}

/// Wraps a service with a fallback to `backup`.
#[derive(Clone)]
pub struct FallbackLayer<B, P> {
    backup: B,
    policy: P,
    names: (Arc<str>, Arc<str>),
}

impl<B, P> fmt::Debug for FallbackLayer<B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackLayer")
            .field("primary", &self.names.0)
            .field("backup", &self.names.1)
            .finish_non_exhaustive()
    }
}

impl<B, P> FallbackLayer<B, P> {
    /// Falls back to `backup`; answers are stamped `primary` and `backup`.
    pub fn new(backup: B, policy: P) -> Self {
        FallbackLayer {
            backup,
            policy,
            names: ("primary".into(), "backup".into()),
        }
    }

    /// Names the two paths in [`ServedBy`] stamps, e.g. `"breaker(retry(primary))"` and
    /// `"retry(backup)"`.
    pub fn names(mut self, primary: &str, backup: &str) -> Self {
        self.names = (primary.into(), backup.into());
        self
    }
}

impl<S, B: Clone, P: Clone> Layer<S> for FallbackLayer<B, P> {
    type Service = FallbackService<S, B, P>;

    fn layer(&self, primary: S) -> Self::Service {
        FallbackService {
            primary,
            backup: self.backup.clone(),
            policy: self.policy.clone(),
            names: self.names.clone(),
        }
    }
}

/// The response future of [`FallbackService`].
pub type FallbackFuture<Res> = RetryFuture<Res>;

/// A service with a fallback (see the [`tower` module docs](crate::tower)).
#[derive(Clone)]
pub struct FallbackService<S, B, P> {
    primary: S,
    backup: B,
    policy: P,
    names: (Arc<str>, Arc<str>),
}

impl<S, B, P> fmt::Debug for FallbackService<S, B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackService")
            .field("primary", &self.names.0)
            .field("backup", &self.names.1)
            .finish_non_exhaustive()
    }
}

impl<S, B, P, Req> Service<Req> for FallbackService<S, B, P>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    S::Response: Stamp + Send + 'static,
    B: Service<Req, Response = S::Response> + Clone + Send + 'static,
    B::Error: Into<BoxError>,
    B::Future: Send,
    Req: Send + 'static,
    P: Policy<Req, S::Response>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = FallbackFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.primary.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let clone = self.primary.clone();
        let mut primary = std::mem::replace(&mut self.primary, clone);
        let mut backup = self.backup.clone();
        let policy = self.policy.clone();
        let names = self.names.clone();
        Box::pin(async move {
            let copy = policy.clone_request(&req);
            let first = primary.call(req).await.map_err(Into::into);
            let failed = match &first {
                Ok(res) => policy.ok(res).is_some(),
                Err(_) => true,
            };
            match (failed, copy) {
                (true, Some(copy)) => {
                    std::future::poll_fn(|cx| backup.poll_ready(cx))
                        .await
                        .map_err(Into::into)?;
                    let mut res = backup.call(copy).await.map_err(Into::into)?;
                    res.stamp(&names.1);
                    Ok(res)
                }
                _ => first.map(|mut res| {
                    res.stamp(&names.0);
                    res
                }),
            }
        })
    }
}
