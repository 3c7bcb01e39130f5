//! The LLM side of a run: the provider's answers (429, 529, money limits, billing) and the LLM
//! client layer (provider signals, the core's spend breaker, proactive quotas).

use reliable_core::Instant;
use reliable_core::spend::{RefuseReason, Tokens};

use super::*;
use crate::client::stack::NodeKind;
use crate::model::llm::{Arrival, LlmModel};
use crate::scenario::LlmProvider;

impl World<'_> {
    fn llm_spec(&self, ds: u16) -> Option<&LlmProvider> {
        match &self.c.scenario.downstreams.get(ds as usize)?.model {
            DownstreamModel::LlmProvider(spec) => Some(spec),
            _ => None,
        }
    }

    /// Index of `request`'s reservation slot for LLM node `node`.
    fn held_index(&self, request: Handle, node: u16) -> Option<usize> {
        let f = self.stack.nodes.get(node as usize)?.frame;
        (f != NONE).then(|| request.index as usize * self.stack.frames + f as usize)
    }

    fn spend_instance(&self, slot: u16, request: Handle) -> Option<(usize, usize)> {
        let n = self.spends.get(slot as usize).map_or(0, Vec::len);
        (n > 0).then(|| (slot as usize, self.instance(n, request)))
    }

    /// An attempt reaches LLM provider `ds`.
    pub(super) fn llm_arrival(&mut self, ds: u16, attempt: Handle) {
        let now = self.now;
        let i = ds as usize;
        // An attempt that ended on its way here is not sent on (nothing to bill it to).
        let Some(a) = self.attempts.get(attempt).copied() else {
            return;
        };
        let Some(r) = self.requests.get(a.request).copied() else {
            return;
        };
        let tl = &self.c.timeline;
        let lost = if tl.has_faults(i) {
            tl.capacity_lost(i, now)
        } else {
            0.0
        };
        let Some(Ds::Llm(model)) = self.ds.get_mut(i) else {
            return;
        };
        let arrival = model.arrive(now, attempt, r.client, r.id, lost);
        let llm = self.m.llm.get_or_insert_with(Default::default);
        let (reply, hint) = match arrival {
            Arrival::Started { work_ns } => {
                let work_us = (work_ns / 1_000).min(u64::from(u32::MAX)) as u32;
                self.q.push(
                    now.saturating_add(work_ns),
                    EventKind::ServiceDone {
                        ds,
                        attempt,
                        work_us,
                    },
                );
                return;
            }
            Arrival::RateLimited { retry_after_s } => {
                llm.rate_limited += 1;
                (
                    Reply::RateLimited,
                    retry_after_s.min(u64::from(u16::MAX)) as u16,
                )
            }
            Arrival::Overloaded => {
                llm.overloaded += 1;
                (Reply::Overloaded, 0)
            }
            Arrival::MoneyLimit => {
                llm.money_limited += 1;
                (Reply::MoneyLimit, 0)
            }
        };
        self.m.answered(now, ds, false, true);
        self.send_reply(ds, attempt, reply, hint);
    }

    /// The provider finished generating for `attempt`: bill it, answer if the client still waits.
    pub(super) fn llm_done(&mut self, ds: u16, attempt: Handle, live: bool) {
        let now = self.now;
        let Some(Ds::Llm(model)) = self.ds.get_mut(ds as usize) else {
            return;
        };
        let (input, output, cost) = model.finish(now, attempt);
        let llm = self.m.llm.get_or_insert_with(Default::default);
        llm.input_tokens += input;
        llm.output_tokens += output;
        llm.cost += cost;
        if !live {
            llm.wasted += cost;
        }
        self.m.answered(now, ds, true, false);
        self.send_reply(ds, attempt, Reply::Ok, 0);
    }

    /// LLM node `node` starts an attempt of `request`: reserve its worst case in the spend breaker.
    pub(super) fn invoke_llm(&mut self, request: Handle, node: u16, deadline: u64) {
        let Some(NodeKind::Llm { inner, .. }) =
            self.stack.nodes.get(node as usize).map(|n| &n.kind)
        else {
            return;
        };
        match self.llm_reserve(request, node) {
            Ok(()) => self.invoke(request, *inner, deadline),
            Err(refused) => self.answer(request, node, refused),
        }
    }

    /// Reserves the worst case of `request`'s next attempt through LLM node `node` in its spend
    /// breaker, if it has one; the spend breaker's refusal is the attempt's answer (sent nowhere).
    pub(super) fn llm_reserve(&mut self, request: Handle, node: u16) -> Result<(), Answer> {
        let stack = self.stack;
        let Some(NodeKind::Llm { ds, slot, .. }) = stack.nodes.get(node as usize).map(|n| &n.kind)
        else {
            return Ok(());
        };
        let Some((s, i)) = self.spend_instance(*slot, request) else {
            return Ok(());
        };
        let (Some(spec), Some(r)) = (self.llm_spec(*ds), self.requests.get(request)) else {
            return Ok(());
        };
        let (input, _) = LlmModel::tokens(spec, self.seed, *ds, r.id);
        let estimate = Tokens {
            input,
            output: spec.max_tokens,
        };
        let now = Instant::from_nanos(self.now);
        match self.spends[s][i].reserve(now, estimate) {
            Ok(reservation) => {
                if let Some(h) = self.held_index(request, node) {
                    if self.held.len() <= h {
                        self.held.resize_with(h + 1, || None);
                    }
                    self.held[h] = Some(reservation);
                }
                Ok(())
            }
            Err(no) => {
                self.m.at(self.now).local_rejections += 1;
                self.m
                    .llm
                    .get_or_insert_with(Default::default)
                    .spend_refusals += 1;
                let never = matches!(
                    no.reason,
                    RefuseReason::MoneyLimit | RefuseReason::TooLarge { .. }
                );
                let mut a = Answer::new(
                    if never {
                        AnswerKind::Fatal
                    } else {
                        AnswerKind::Rejected
                    },
                    node,
                );
                if !never {
                    a.retry_after = no.retry_after;
                }
                Err(a)
            }
        }
    }

    /// An answer passes up through LLM node `node`: settle the reservation, read the signals.
    pub(super) fn answer_llm(&mut self, request: Handle, node: u16, mut ans: Answer) -> Answer {
        let stack = self.stack;
        let Some(NodeKind::Llm {
            ds,
            signals,
            proactive,
            slot,
            ..
        }) = stack.nodes.get(node as usize).map(|n| &n.kind)
        else {
            return ans;
        };
        if ans.money && *signals {
            // Never retried: a spent budget does not come back in a few seconds.
            ans.kind = AnswerKind::Fatal;
            ans.retry_after = Duration::ZERO;
        }
        let Some((s, i)) = self.spend_instance(*slot, request) else {
            return ans;
        };
        let now = Instant::from_nanos(self.now);
        let reservation = self
            .held_index(request, node)
            .and_then(|h| self.held.get_mut(h))
            .and_then(Option::take);
        let from_provider =
            !matches!(ans.kind, AnswerKind::Rejected | AnswerKind::Timeout) || ans.money;
        if let Some(reservation) = reservation {
            let spend = &mut self.spends[s][i];
            let _ = match ans.kind {
                AnswerKind::Ok => {
                    let (input, output) = match (self.llm_spec(*ds), self.requests.get(request)) {
                        (Some(spec), Some(r)) => LlmModel::tokens(spec, self.seed, *ds, r.id),
                        _ => (0, 0),
                    };
                    self.spends[s][i].settle(now, reservation, Tokens { input, output })
                }
                // Abandoned: the provider may bill it; nothing came back, so the estimate.
                AnswerKind::Timeout => spend.cancel(now, reservation, None),
                // Refused by the provider (429, 529) or inside: no tokens used.
                _ => spend.settle(now, reservation, Tokens::default()),
            };
        }
        if ans.money && *signals {
            let _ = self.spends[s][i].money_signal(now, None);
        }
        if *proactive && from_provider {
            let client = self.requests.get(request).map_or(0, |r| r.client);
            if let Some(Ds::Llm(model)) = self.ds.get_mut(*ds as usize) {
                for q in model.headers(self.now, client) {
                    let _ = self.spends[s][i].observe(now, q);
                }
            }
        }
        ans
    }
}
