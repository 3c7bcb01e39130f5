//! A breaker of `Fleet` scope in a run: the permits a chain's call holds, the store's answer a
//! decision waits for (the engine asks it through its view, `call.rs`, by
//! `crate::client::fleet`'s rules); and a client's own network going down.

use reliable_core::breaker::{Permit, RejectReason, Rejection};
use reliable_core::{Duration, Instant};

use super::*;
use crate::client::fleet::{Held, REST_NS, Refusal};

impl World<'_> {
    /// Fleet breaker `slot`'s state for `request`.
    pub(super) fn fleet_frame(&mut self, request: Handle, slot: u16) -> Option<&mut FleetFrame> {
        if self.fleet_stride == 0 {
            return None;
        }
        let i = request.index as usize * self.fleet_stride + usize::from(slot);
        self.fleet_frames.get_mut(i)
    }

    /// Whether `client`'s own network is down now.
    pub(super) fn network_down(&self, client: u32) -> bool {
        self.client_down
            .iter()
            .any(|&(c, from, until)| c == client && (from..until).contains(&self.now))
    }

    /// Whether the client of `request` has its network down now.
    pub(super) fn request_network_down(&self, request: Handle) -> bool {
        !self.client_down.is_empty()
            && self
                .requests
                .get(request)
                .is_some_and(|r| self.network_down(r.client))
    }

    /// The store's answer for `request`'s call of the chain topped by `node` arrived: the call,
    /// asking its fleet breaker, goes on with it.
    pub(super) fn store_answer(&mut self, request: Handle, node: u16) {
        if !self.requests.contains(request) {
            return;
        }
        let stack = self.stack;
        let Some(ch) = stack.nodes.get(usize::from(node)).map(|n| n.chain) else {
            return;
        };
        let Some(chain) = stack.chains.get(usize::from(ch)) else {
            return;
        };
        let Some(NodeKind::Breaker { slot, .. }) =
            stack.nodes.get(usize::from(chain.breaker)).map(|n| &n.kind)
        else {
            return;
        };
        let Some(FleetFrame::Waiting(result)) =
            self.fleet_frame(request, *slot).map(std::mem::take)
        else {
            return;
        };
        let answer = match result {
            Ok(held) => Ok(self.fleet_held.keep(held, Instant::from_nanos(self.now))),
            Err(refusal) => Err(rejection(refusal)),
        };
        self.chain_decided(request, ch, answer);
    }
}

/// The core's rejection for a fleet breaker's refusal: its breaker's, with the time until one
/// might be admitted; or, failing closed while the store fails, after the rest the client
/// leaves it alone for, as `reliable::fleet` says.
pub(super) fn rejection(refusal: Refusal) -> Rejection {
    let retry_after = match refusal {
        Refusal::Breaker(after) => after,
        Refusal::StoreUnavailable => Duration::from_nanos(REST_NS),
    };
    Rejection {
        reason: RejectReason::Open { retry_after },
    }
}

/// Fleet permits the engine holds, by the token the core permit standing for them carries
/// ([`Permit::foreign`]): a fleet's permits (the store's and the client's own) do not fit in one.
#[derive(Debug, Default)]
pub(super) struct HeldPermits {
    slots: Vec<Option<Held>>,
    free: Vec<u32>,
}

impl HeldPermits {
    /// Keeps `held`, admitted at `now`; the core permit that stands for it.
    pub(super) fn keep(&mut self, held: Held, now: Instant) -> Permit {
        let probe = held.is_probe();
        let token = match self.free.pop() {
            Some(free) => {
                if let Some(slot) = self.slots.get_mut(free as usize) {
                    *slot = Some(held);
                }
                free
            }
            None => {
                self.slots.push(Some(held));
                (self.slots.len() - 1) as u32
            }
        };
        Permit::foreign(token, probe, now)
    }

    /// The permits `permit` stands for, given back by the engine.
    pub(super) fn take(&mut self, permit: Permit) -> Option<Held> {
        let token = permit.generation();
        let held = self.slots.get_mut(token as usize).and_then(Option::take);
        if held.is_some() {
            self.free.push(token);
        }
        held
    }
}
