//! A breaker of `Fleet` scope in a run: its decisions (`crate::client::fleet`'s rules) wired to
//! requests, the wait for the store, and the metrics; and a client's own network going down.

use reliable_core::answer::Refuser;
use reliable_core::breaker::{Outcome, State, Transition};

use super::*;
use crate::client::fleet::{Ctx, Decision as FleetDecision, Held, Refusal};

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

    /// Runs `f` on the fleet state of breaker `slot` for `request`'s client, with the store's and
    /// the clients' breakers; counts the transitions it makes.
    fn with_fleet<T>(
        &mut self,
        slot: u16,
        store: u16,
        scope: reliable_core::policy::FleetScope,
        shadow: bool,
        request: Handle,
        f: impl FnOnce(
            &mut crate::client::fleet::FleetClient,
            &mut Ctx<'_>,
            crate::client::fleet::Note<'_>,
        ) -> T,
    ) -> Option<T> {
        let client = self.requests.get(request)?.client;
        let network_down = self.network_down(client);
        let s = usize::from(slot);
        let mut counters = self.m.fleet.take().unwrap_or_default();
        let mut transitions: Vec<(usize, Transition)> = Vec::new();
        let out = {
            let fc = self.fleet.get_mut(s)?.get_mut(client as usize)?;
            let mut cx = Ctx {
                scope,
                store: self.stores.get_mut(usize::from(store))?,
                breakers: &mut **self.breakers.get_mut(s)?,
                client,
                network_down,
                now: self.now,
                counters: &mut counters,
            };
            let mut note = |i: usize, t: Option<Transition>| {
                if let Some(t) = t {
                    transitions.push((i, t));
                }
            };
            f(fc, &mut cx, &mut note)
        };
        for (i, t) in transitions {
            if i == 0 && t.to == State::Open && t.from != State::Open {
                counters.fleet_opens += 1;
                counters.first_fleet_open_ns.get_or_insert(self.now);
            }
            self.note_transition(Some(t), shadow);
        }
        self.m.fleet = Some(counters);
        Some(out)
    }

    /// Invokes fleet breaker `node` for `request`: asks for a permit; if the decision waited for
    /// the store, the call goes on (or is refused) when the answer arrives.
    pub(super) fn invoke_fleet(&mut self, request: Handle, node: u16, deadline: u64) {
        let Some(NodeKind::Breaker {
            slot,
            store,
            scope,
            breaker,
            ..
        }) = self.stack.nodes.get(usize::from(node)).map(|n| &n.kind)
        else {
            return;
        };
        let Some(fleet) = scope.fleet() else { return };
        let (slot, store, shadow) = (*slot, *store, breaker.shadow());
        let Some(FleetDecision { delay, result }) =
            self.with_fleet(slot, store, fleet, shadow, request, |fc, cx, note| {
                fc.acquire(cx, note)
            })
        else {
            return;
        };
        if delay == 0 {
            self.fleet_decided(request, node, result, deadline);
            return;
        }
        if let Some(f) = self.fleet_frame(request, slot) {
            *f = FleetFrame::Waiting { result, deadline };
        }
        let at = self.now.saturating_add(delay);
        self.q.push(at, EventKind::StoreAnswer { request, node });
    }

    /// The store's answer for `request` at fleet breaker `node` arrived.
    pub(super) fn store_answer(&mut self, request: Handle, node: u16) {
        if !self.requests.contains(request) {
            return;
        }
        let Some(NodeKind::Breaker { slot, .. }) =
            self.stack.nodes.get(usize::from(node)).map(|n| &n.kind)
        else {
            return;
        };
        let Some(FleetFrame::Waiting { result, deadline }) =
            self.fleet_frame(request, *slot).map(std::mem::take)
        else {
            return;
        };
        self.fleet_decided(request, node, result, deadline);
    }

    fn fleet_decided(
        &mut self,
        request: Handle,
        node: u16,
        result: Result<Held, Refusal>,
        deadline: u64,
    ) {
        let Some(NodeKind::Breaker { inner, slot, .. }) =
            self.stack.nodes.get(usize::from(node)).map(|n| &n.kind)
        else {
            return;
        };
        let (inner, slot) = (*inner, *slot);
        match result {
            Ok(held) => {
                if let Some(f) = self.fleet_frame(request, slot) {
                    *f = FleetFrame::Held(held);
                }
                self.invoke(request, inner, deadline);
            }
            Err(refusal) => {
                self.decide(Decision::Refused(Refuser::Breaker));
                self.m.at(self.now).local_rejections += 1;
                let mut a = Answer::new(AnswerKind::Rejected, node);
                if let Refusal::Breaker(after) = refusal {
                    a.retry_after = after;
                }
                self.answer(request, node, a);
            }
        }
    }

    /// A call fleet breaker `node` permitted for `request` ended with `outcome`.
    pub(super) fn record_fleet(
        &mut self,
        request: Handle,
        node: u16,
        held: Held,
        outcome: Outcome,
    ) {
        let Some(NodeKind::Breaker {
            slot,
            store,
            scope,
            breaker,
            ..
        }) = self.stack.nodes.get(usize::from(node)).map(|n| &n.kind)
        else {
            return;
        };
        let Some(fleet) = scope.fleet() else { return };
        let (slot, store, shadow) = (*slot, *store, breaker.shadow());
        self.with_fleet(slot, store, fleet, shadow, request, |fc, cx, note| {
            fc.record(held, outcome, cx, note)
        });
    }
}
