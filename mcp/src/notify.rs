//! What the server tells clients without being asked: `notifications/resources/updated` for a
//! subscribed breaker at each of its transitions, `notifications/resources/list_changed` when a
//! breaker is created, and log messages (`notifications/message`) for transitions and refused
//! calls at or above each client's level (`logging/setLevel`; warning until it sets one).
//!
//! Breakers report from inside calls, synchronously ([`Hub::emit`]); one task per hub delivers
//! the events in order, so a slow client delays nobody's call. Clients are kept from their
//! `initialized` notification until their session ends (a failed delivery), at most
//! [`MAX_CLIENTS`]; each subscribes to at most [`MAX_SUBSCRIPTIONS`] resources.
#![allow(deprecated)] // rmcp marks logging and resources/subscribe legacy; the 2025 protocol has them.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::mpsc;

/// Clients kept at most (older ones are dropped first when full).
pub const MAX_CLIENTS: usize = 256;
/// Resources one client may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 64;

/// Something clients may hear about.
#[derive(Clone, Debug)]
pub enum Event {
    /// The resource `uri` changed.
    Updated(String),
    /// The list of resources changed.
    ListChanged,
    /// A log message.
    Log(LoggingLevel, Value),
}

/// A level's severity, for comparisons.
pub fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

struct Client {
    key: u64,
    peer: Peer<RoleServer>,
    subscribed: BTreeSet<String>,
    level: LoggingLevel,
}

type Clients = Arc<Mutex<Vec<Client>>>;

fn lock(m: &Mutex<Vec<Client>>) -> MutexGuard<'_, Vec<Client>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The clients of one server and the task that delivers to them.
pub struct Hub {
    clients: Clients,
    events: mpsc::UnboundedSender<Event>,
    pending: Mutex<Option<mpsc::UnboundedReceiver<Event>>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hub({} clients)", lock(&self.clients).len())
    }
}

impl Default for Hub {
    fn default() -> Self {
        let (events, pending) = mpsc::unbounded_channel();
        Hub {
            clients: Arc::default(),
            events,
            pending: Mutex::new(Some(pending)),
        }
    }
}

impl Hub {
    /// Client `key` (one per session) is ready: start telling it things. Called from the
    /// runtime (the delivery task starts with the first client).
    pub fn register(&self, key: u64, peer: Peer<RoleServer>) {
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(events) = pending
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(deliver(self.clients.clone(), events));
        }
        let mut clients = lock(&self.clients);
        clients.retain(|c| c.key != key && !c.peer.is_transport_closed());
        if clients.len() >= MAX_CLIENTS {
            clients.remove(0);
        }
        clients.push(Client {
            key,
            peer,
            subscribed: BTreeSet::new(),
            level: LoggingLevel::Warning,
        });
    }

    fn with<T>(&self, key: u64, f: impl FnOnce(&mut Client) -> T) -> Option<T> {
        lock(&self.clients).iter_mut().find(|c| c.key == key).map(f)
    }

    /// Client `key` subscribes to `uri`; an error says why not.
    pub fn subscribe(&self, key: u64, uri: &str) -> Result<(), String> {
        self.with(key, |c| {
            if c.subscribed.len() >= MAX_SUBSCRIPTIONS && !c.subscribed.contains(uri) {
                return Err(format!(
                    "{MAX_SUBSCRIPTIONS} subscriptions are the most one client may hold: unsubscribe from one first"
                ));
            }
            c.subscribed.insert(uri.to_string());
            Ok(())
        })
        .unwrap_or_else(|| Err("the session is not initialized".into()))
    }

    /// Client `key` no longer hears about `uri`.
    pub fn unsubscribe(&self, key: u64, uri: &str) {
        self.with(key, |c| c.subscribed.remove(uri));
    }

    /// Client `key` hears log messages at `level` and above.
    pub fn set_level(&self, key: u64, level: LoggingLevel) {
        self.with(key, |c| c.level = level);
    }

    /// Tells the clients concerned (never blocks; delivered in order by the hub's task).
    pub fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }
}

async fn deliver(clients: Clients, mut events: mpsc::UnboundedReceiver<Event>) {
    while let Some(event) = events.recv().await {
        let targets: Vec<(u64, Peer<RoleServer>)> = lock(&clients)
            .iter()
            .filter(|c| match &event {
                Event::Updated(uri) => c.subscribed.contains(uri),
                Event::ListChanged => true,
                Event::Log(level, _) => severity(*level) >= severity(c.level),
            })
            .map(|c| (c.key, c.peer.clone()))
            .collect();
        let mut gone = Vec::new();
        for (key, peer) in targets {
            let sent = match &event {
                Event::Updated(uri) => {
                    peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.clone()))
                        .await
                }
                Event::ListChanged => peer.notify_resource_list_changed().await,
                Event::Log(level, data) => {
                    let mut message = LoggingMessageNotificationParam::new(*level, data.clone());
                    message.logger = Some("reliable-mcp".into());
                    peer.notify_logging_message(message).await
                }
            };
            if sent.is_err() {
                gone.push(key);
            }
        }
        if !gone.is_empty() {
            lock(&clients).retain(|c| !gone.contains(&c.key));
        }
    }
}
