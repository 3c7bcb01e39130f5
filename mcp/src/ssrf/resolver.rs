//! [`GuardedResolver`]: DNS that refuses a whole name if any of its addresses is not allowed.
//!
//! reqwest dials exactly the addresses a custom resolver returns, so checking them here leaves no
//! window for DNS rebinding (a name that resolves to a public address for the check and to
//! 127.0.0.1 for the connect). Refusing the whole name, rather than filtering out the bad
//! addresses, keeps a name that mixes public and private addresses from reaching the private ones
//! by retry or happy-eyeballs fallback.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::guard::{Guard, Refusal};

/// The system resolver (`getaddrinfo`, through tokio) behind the [`Guard`].
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    guard: Arc<Guard>,
    timeout: Duration,
}

impl GuardedResolver {
    /// Resolves through the system, gives up after `timeout`, and checks every address.
    pub fn new(guard: Arc<Guard>, timeout: Duration) -> Self {
        GuardedResolver { guard, timeout }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let unresolved = |why: String| Refusal::Unresolved {
                name: host.clone(),
                why,
            };
            let found = tokio::time::timeout(timeout, tokio::net::lookup_host((host.as_str(), 0)))
                .await
                .map_err(|_| unresolved(format!("no answer within {timeout:?}")))?
                .map_err(|e| unresolved(e.to_string()))?;
            let addrs: Vec<SocketAddr> = found.collect();
            let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
            guard.check_name(&host, &ips)?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}
