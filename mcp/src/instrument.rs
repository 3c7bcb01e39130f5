//! [`Instrument`]: what the server adds to every `Reliable` it builds (the named breakers' and
//! those `reliable_http_call` builds for one call): by default nothing, so they read the wall
//! clock and sleep on tokio's timer. A test gives them a virtual clock, a sleep on it and
//! observers, so a call's decisions can be traced and compared in virtual time (the cross-face
//! conformance suite does).

use std::fmt;
use std::sync::Arc;

use reliable::Builder;

/// A change applied to every builder before it builds.
#[derive(Clone, Default)]
pub struct Instrument(Option<Arc<dyn Fn(Builder) -> Builder + Send + Sync>>);

impl Instrument {
    /// Applies `f` to every builder (`f` sets a clock, a sleep, observers...).
    pub fn new(f: impl Fn(Builder) -> Builder + Send + Sync + 'static) -> Self {
        Instrument(Some(Arc::new(f)))
    }

    /// `builder`, instrumented.
    pub fn apply(&self, builder: Builder) -> Builder {
        match &self.0 {
            Some(f) => f(builder),
            None => builder,
        }
    }
}

impl fmt::Debug for Instrument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Instrument(..)"
        } else {
            "Instrument(none)"
        })
    }
}
