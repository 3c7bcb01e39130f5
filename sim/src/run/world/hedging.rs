//! Hedged calls: a `Hedge` node sends its `Call` once, arms a timer for the first hedge at the
//! core hedger's `next_hedge_at`, and when it fires asks the hedger (and the enclosing ledger, if
//! any) whether to send another copy. The first **success** back wins, as in `reliable`'s
//! hedging: a copy that fails (or times out) while other copies are still out has just lost, and
//! the race goes on; when the last copy fails, its failure is the call's answer. The copies still
//! out when a copy wins are cancelled: their attempts end (replies that come later are dropped as
//! late), their queued jobs are dropped by a server with `cancel_abandoned` when they reach the
//! head of its queue, and a job already in service runs to its end as wasted work. Every copy's
//! ledger draw is settled when the call ends. Every copy that ends is reported to the hedger
//! with its latency from its own send (`Hedger::copy_ended`, the core's rule: an answer feeds the
//! quantile, a timeout does not); a cancelled copy has none. Each copy is timed from its own send
//! (its `Call`'s timeout), within the deadline the hedge was invoked with (the retry's attempt
//! timeout and the call's deadline), so the call ends when a copy succeeds or every copy has
//! ended.

use reliable_core::Instant;
use reliable_core::answer::Refuser;
use reliable_core::hedge::{HedgedCall, Idempotency, NoHedge};
use reliable_core::ledger::Draw;
use reliable_core::outcome::AttemptOutcome;

use super::*;

impl World<'_> {
    /// Starts a hedged call of `request` at hedge node `node`.
    pub(super) fn invoke_hedge(&mut self, request: Handle, node: u16, deadline: u64) {
        let stack = self.stack;
        let Some(NodeKind::Hedge {
            idempotent,
            slot,
            inner,
            copies,
            ..
        }) = stack.nodes.get(node as usize).map(|n| &n.kind)
        else {
            return;
        };
        if deadline <= self.now {
            self.m.at(self.now).timeouts += 1;
            self.answer(request, node, Answer::new(AnswerKind::Timeout, node));
            return;
        }
        let (h, i) = self.instance_of(&self.hedgers, *slot, request);
        let idempotency = if *idempotent {
            Idempotency::Idempotent
        } else {
            Idempotency::NotIdempotent
        };
        let call = self.hedgers[h][i].start(Instant::from_nanos(self.now), idempotency);
        self.hedged_calls = self.hedged_calls.wrapping_add(1);
        let number = self.hedged_calls;
        if let Some(f) = self.frame_mut(request, node) {
            *f = Frame::Hedge {
                call,
                deadline,
                number,
            };
        }
        self.send_copy(request, *inner, *copies, 0, None, deadline);
        self.arm_hedge(request, node, (h, i), &call, number);
    }

    /// Arms the timer of `call`'s next hedge, if one can be due.
    fn arm_hedge(
        &mut self,
        request: Handle,
        node: u16,
        (h, i): (usize, usize),
        call: &HedgedCall,
        number: u32,
    ) {
        if let Some(at) = self.hedgers[h][i].next_hedge_at(call) {
            let event = EventKind::HedgeDue {
                request,
                node,
                call: number,
            };
            self.q.push(at.as_nanos().max(self.now), event);
        }
    }

    /// Sends copy `k` of a hedged call through call node `call`, recording it at `base` (the
    /// hedge node's offset) in the request's copies, with the ledger `draw` it holds.
    fn send_copy(
        &mut self,
        request: Handle,
        call: u16,
        base: u16,
        k: usize,
        draw: Option<Draw>,
        deadline: u64,
    ) -> Option<Draw> {
        let stack = self.stack;
        let Some(NodeKind::Call {
            ds,
            timeout,
            timeout_dist,
        }) = stack.nodes.get(call as usize).map(|n| &n.kind)
        else {
            return draw;
        };
        let idx = request.index as usize * stack.copies + base as usize + k;
        let Some(attempt) = self.send_attempt(
            request,
            call,
            *ds,
            *timeout,
            timeout_dist.as_ref(),
            deadline,
        ) else {
            return draw;
        };
        let n = self.requests.get(request).map_or(0, |r| r.attempts);
        let Some(copy) = self.copies.get_mut(idx) else {
            return draw;
        };
        *copy = HedgeCopy {
            attempt,
            n,
            sent: self.now,
            draw,
        };
        None
    }

    /// The timer of hedged call number `number` at node `node` fired: send a hedge if the
    /// hedger (and the ledger) say so, and arm the next.
    pub(super) fn hedge_due(&mut self, request: Handle, node: u16, number: u32) {
        if !self.requests.contains(request) {
            return;
        }
        let stack = self.stack;
        let Some(NodeKind::Hedge {
            slot,
            inner,
            ledger,
            copies,
            ..
        }) = stack.nodes.get(node as usize).map(|n| &n.kind)
        else {
            return;
        };
        let (mut call, deadline) = match self.frame_mut(request, node) {
            Some(Frame::Hedge {
                call,
                deadline,
                number: n,
            }) if *n == number => (*call, *deadline),
            // Its call has been answered: a stale timer.
            _ => return,
        };
        if deadline <= self.now {
            // The copies' timers fire now: no point in another.
            return;
        }
        let now = Instant::from_nanos(self.now);
        let (h, i) = self.instance_of(&self.hedgers, *slot, request);
        let ledger = self.ledger_of(*ledger, request);
        let hedger = &self.hedgers[h][i];
        let decision = match ledger {
            Some((l, li)) => self.ledgers[l][li]
                .try_hedge(hedger, &mut call, now)
                .map(Some),
            None => hedger.try_hedge(&mut call, now).map(|()| None),
        };
        match decision {
            Ok(draw) => {
                if let Some(Frame::Hedge { call: c, .. }) = self.frame_mut(request, node) {
                    *c = call;
                }
                if let Some(e) = &mut self.m.extra {
                    e.hedges_sent += 1;
                }
                self.decide(Decision::Hedge);
                let k = call.hedges() as usize;
                if let Some(unsent) = self.send_copy(request, *inner, *copies, k, draw, deadline)
                    && let Some((l, li)) = ledger
                {
                    self.ledgers[l][li].settle(unsent, now);
                }
                self.arm_hedge(request, node, (h, i), &call, number);
            }
            Err(NoHedge::NotYet { retry_after }) => {
                // The quantile delay grew since the timer was armed.
                let at = self.now.saturating_add(retry_after.as_nanos());
                let event = EventKind::HedgeDue {
                    request,
                    node,
                    call: number,
                };
                self.q.push(at, event);
            }
            Err(NoHedge::Ledger(_)) => {
                self.decide(Decision::NoHedge(Refuser::Budget));
                if let Some(e) = &mut self.m.extra {
                    e.hedges_refused += 1;
                }
            }
            Err(NoHedge::NotIdempotent | NoHedge::MaxHedges | NoHedge::Warming) => {}
        }
    }

    /// A copy of the hedged call at `node` answered `ans`. Returns whether the answer goes on up:
    /// false when it is a failure (a timeout included) and other copies are still out.
    pub(super) fn hedge_answered(&mut self, request: Handle, node: u16, ans: Answer) -> bool {
        let stack = self.stack;
        let Some(NodeKind::Hedge {
            slot,
            ledger,
            copies,
            ..
        }) = stack.nodes.get(node as usize).map(|n| &n.kind)
        else {
            return true;
        };
        let call = match self.frame_mut(request, node) {
            Some(Frame::Hedge { call, .. }) => *call,
            _ => return true,
        };
        let base = request.index as usize * stack.copies + *copies as usize;
        let range = base..base + call.hedges() as usize + 1;
        let dead = HedgeCopy::default().attempt;
        let out = self
            .copies
            .get(range.clone())
            .unwrap_or(&[])
            .iter()
            .filter(|c| self.attempts.contains(c.attempt))
            .count();
        if !ans.is_ok() && out > 0 {
            // This copy lost; mark it so the winner can be told apart later, and report it (a
            // timeout too: at least that slow, by the core's rule).
            let now = self.now;
            let mut answered = None;
            for c in self.copies.get_mut(range).unwrap_or(&mut []) {
                if c.attempt != dead && !self.attempts.contains(c.attempt) {
                    c.attempt = dead;
                    answered = Some(c.sent);
                }
            }
            if let Some(sent) = answered {
                let (h, i) = self.instance_of(&self.hedgers, *slot, request);
                let latency = Duration::from_nanos(now.saturating_sub(sent));
                self.hedgers[h][i].copy_ended(latency, outcome(&ans));
            }
            return false;
        }
        if let Some(f) = self.frame_mut(request, node) {
            *f = Frame::Idle;
        }
        let now = Instant::from_nanos(self.now);
        let ledger = self.ledger_of(*ledger, request);
        let mut winner = None;
        for idx in range {
            let Some(c) = self.copies.get_mut(idx).map(std::mem::take) else {
                continue;
            };
            if let Some(a) = self.attempts.get(c.attempt).copied() {
                self.attempts.remove(c.attempt);
                self.attempt_gone(a.ds);
                self.decide(Decision::Cancelled(c.n));
                let (h, i) = self.instance_of(&self.hedgers, *slot, request);
                let elapsed = Duration::from_nanos(self.now.saturating_sub(c.sent));
                self.hedgers[h][i].copy_ended(elapsed, AttemptOutcome::Cancelled);
                if let Some(e) = &mut self.m.extra {
                    e.copies_cancelled += 1;
                }
            } else if c.attempt != dead {
                winner = Some((idx - base, c.sent));
            }
            if let (Some(draw), Some((l, li))) = (c.draw, ledger) {
                self.ledgers[l][li].settle(draw, now);
            }
        }
        // A timeout is nobody's win (`is_ok` below), though it is reported, as the core says.
        if let Some((k, sent)) = winner {
            let (h, i) = self.instance_of(&self.hedgers, *slot, request);
            let latency = Duration::from_nanos(self.now.saturating_sub(sent));
            self.hedgers[h][i].copy_ended(latency, outcome(&ans));
            if k > 0
                && ans.is_ok()
                && let Some(e) = &mut self.m.extra
            {
                e.hedges_won += 1;
            }
        }
        true
    }
}

/// How a copy that answered `ans` ended, in the core's words.
fn outcome(ans: &Answer) -> AttemptOutcome {
    ans.error_class()
        .map_or(AttemptOutcome::Success, AttemptOutcome::Failed)
}
