//! The downstream side of a run: network hops, arrivals at servers, registers and scripted
//! downstreams, service completions and replies back to the client.

use super::*;

impl World<'_> {
    /// A network delay to (`to_ds`) or from downstream `ds`.
    #[inline]
    pub(super) fn hop(&mut self, ds: u16, to_ds: bool) -> u64 {
        let i = ds as usize;
        let (req, resp) = &self.net[i];
        let s = if to_ds { req } else { resp };
        if s.is_zero() {
            0
        } else {
            s.sample(self.net_rng[i].rng())
        }
    }

    pub(super) fn send_reply(&mut self, ds: u16, attempt: Handle, reply: Reply, hint: u16) {
        if !self.attempts.contains(attempt) {
            self.m.late_replies += 1;
            return;
        }
        let d = self.hop(ds, false);
        self.q.push(
            self.now.saturating_add(d),
            EventKind::Reply {
                ds,
                attempt,
                reply,
                hint,
            },
        );
    }

    /// If a partition of `ds` holds traffic now, queues `event` again for when it heals and
    /// returns true.
    #[inline]
    pub(super) fn held(&mut self, ds: u16, event: EventKind) -> bool {
        let i = ds as usize;
        let tl = &self.c.timeline;
        if !tl.has_faults(i) {
            return false;
        }
        match tl.held_until(i, self.now) {
            Some(end) => {
                self.m.ds[i].held += 1;
                self.q.push(end, event);
                true
            }
            None => false,
        }
    }

    pub(super) fn at_downstream(&mut self, ds: u16, attempt: Handle) {
        if self.held(ds, EventKind::AtDownstream { ds, attempt }) {
            return;
        }
        let now = self.now;
        let i = ds as usize;
        let tl = &self.c.timeline;
        let cond = if tl.has_faults(i) {
            Some(tl.on_arrival(i, now))
        } else {
            None
        };
        if let Some(c) = cond {
            match c.outage {
                Some(OutageMode::FailFast) => {
                    self.m.server_arrival(now, ds);
                    self.m.answered(now, ds, false, true);
                    self.send_reply(ds, attempt, Reply::Unavailable, 0);
                    return;
                }
                Some(OutageMode::Hang) => {
                    // Sent, never arrived: not load on the downstream.
                    self.m.ds[i].hung += 1;
                    return;
                }
                None => {}
            }
        }
        self.m.server_arrival(now, ds);
        if let Some(g) = &self.graph
            && g.past_deadline(ds, attempt, now)
        {
            // Deadline propagation: the caller's deadline has passed (or it is gone).
            self.m.answered(now, ds, false, true);
            if let Some(h) = &mut self.m.hops {
                h.past_deadline[i] += 1;
            }
            self.send_reply(ds, attempt, Reply::Unavailable, 0);
            return;
        }
        if let Some((share, fault)) = cond.and_then(|c| c.throttle)
            && self.fault_rng.chance(share)
        {
            self.m.answered(now, ds, false, true);
            self.send_reply(ds, attempt, Reply::Throttled, fault);
            return;
        }
        match &mut self.ds[i] {
            Ds::Server(server) => {
                let (lost, factor) = if cond.is_some() {
                    (tl.capacity_lost(i, now), tl.latency_factor(i, now))
                } else {
                    (0.0, 1.0)
                };
                match server.arrive(Job { attempt }, lost, factor) {
                    Admission::Started(s) => self.start_service(ds, s),
                    Admission::Queued => {}
                    Admission::Rejected => {
                        self.m.answered(now, ds, false, true);
                        self.send_reply(ds, attempt, Reply::Unavailable, 0);
                    }
                }
            }
            Ds::Register(r) => {
                if self.attempts.contains(attempt) {
                    let version = r.read();
                    let d = self.hop(ds, false);
                    self.q.push(
                        now.saturating_add(d),
                        EventKind::RegisterRead {
                            ds,
                            attempt,
                            version,
                        },
                    );
                }
            }
            Ds::Llm(_) => self.llm_arrival(ds, attempt),
            Ds::Scripted(s) => {
                let (answer, latency) = s.call();
                let (reply, hint) = match answer {
                    ScriptAnswer::Ok => (Reply::Ok, 0),
                    ScriptAnswer::Error => (Reply::Error, 0),
                    ScriptAnswer::Fatal => (Reply::Fatal, 0),
                    ScriptAnswer::Throttled(h) => (Reply::Throttled, self.c.hint_index(h)),
                    ScriptAnswer::Status { .. } => match answer.status() {
                        Some(a) => (Reply::Status, self.c.status_index(a)),
                        None => (Reply::Error, 0),
                    },
                    ScriptAnswer::Reset => (Reply::Reset, 0),
                    ScriptAnswer::Hang => {
                        self.m.ds[i].hung += 1;
                        return;
                    }
                };
                let ok = match reply {
                    Reply::Status => self.c.statuses[hint as usize].class().is_none(),
                    r => r == Reply::Ok,
                };
                self.m.answered(now, ds, ok, false);
                if !self.attempts.contains(attempt) {
                    self.m.late_replies += 1;
                    return;
                }
                let d = latency.saturating_add(self.hop(ds, false));
                self.q.push(
                    now.saturating_add(d),
                    EventKind::Reply {
                        ds,
                        attempt,
                        reply,
                        hint,
                    },
                );
            }
        }
    }

    pub(super) fn start_service(&mut self, ds: u16, s: Started) {
        let work_us = (s.work_ns / 1_000).min(u64::from(u32::MAX)) as u32;
        self.q.push(
            self.now.saturating_add(s.work_ns),
            EventKind::ServiceDone {
                ds,
                attempt: s.job.attempt,
                work_us,
            },
        );
    }

    pub(super) fn service_done(&mut self, ds: u16, attempt: Handle, work_us: u32) {
        let now = self.now;
        let i = ds as usize;
        let live = self.attempts.contains(attempt);
        self.m.completion(now, ds, u64::from(work_us), !live);
        if let Some(Ds::Llm(_)) = self.ds.get(i) {
            self.llm_done(ds, attempt, live);
            return;
        }
        if self.is_service(ds) {
            // Its worker stays busy through the handler's calls.
            self.start_job(ds, attempt);
            return;
        }
        let fault_rate = self.c.timeline.error_rate(i, now);
        let Ds::Server(server) = &mut self.ds[i] else {
            return;
        };
        server.finish();
        let p = 1.0 - (1.0 - server.error_rate) * (1.0 - fault_rate);
        let failed = server.rng.chance(p);
        self.m.answered(now, ds, !failed, false);
        let reply = if failed { Reply::Error } else { Reply::Ok };
        self.send_reply(ds, attempt, reply, 0);
        self.drain_server(ds);
    }

    /// Starts waiting jobs on `ds` while workers are free.
    pub(super) fn drain_server(&mut self, ds: u16) {
        let i = ds as usize;
        let now = self.now;
        let tl = &self.c.timeline;
        let (lost, factor) = if tl.has_faults(i) {
            (tl.capacity_lost(i, now), tl.latency_factor(i, now))
        } else {
            (0.0, 1.0)
        };
        loop {
            let attempts = &self.attempts;
            let graph = self.graph.as_deref();
            let Some(Ds::Server(server)) = self.ds.get_mut(i) else {
                return;
            };
            let dropped = server.dropped;
            let next = server.next(lost, factor, |h| {
                attempts.contains(h) && !graph.is_some_and(|g| g.past_deadline(ds, h, now))
            });
            let more = server.dropped - dropped;
            if more > 0
                && let Some(h) = &mut self.m.hops
            {
                h.past_deadline[i] += more;
            }
            match next {
                Some(s) => self.start_service(ds, s),
                None => return,
            }
        }
    }

    pub(super) fn reply(&mut self, ds: u16, attempt: Handle, reply: Reply, hint: u16) {
        if self.held(
            ds,
            EventKind::Reply {
                ds,
                attempt,
                reply,
                hint,
            },
        ) {
            return;
        }
        let Some(a) = self.attempts.get(attempt).copied() else {
            self.m.late_replies += 1;
            return;
        };
        self.attempts.remove(attempt);
        self.attempt_gone(a.ds);
        if !self.c.groups.is_empty() {
            let failed = match reply {
                Reply::Error | Reply::Unavailable | Reply::Reset => true,
                Reply::Status => self
                    .c
                    .statuses
                    .get(hint as usize)
                    .is_some_and(|s| s.class().is_some()),
                _ => false,
            };
            self.outlier_outcome(ds, failed);
        }
        if self.graph.is_some() {
            if let Some(h) = &mut self.m.hops {
                let e = &mut h.ended[ds as usize];
                e.0 += 1;
                e.1 += (self.now - a.sent) / 1_000;
            }
            if !self.is_hop(a.request) {
                self.m.attempt_ended(self.now, self.now - a.sent);
            }
        } else {
            self.m.attempt_ended(self.now, self.now - a.sent);
        }
        let kind = match reply {
            Reply::Ok => AnswerKind::Ok,
            Reply::Error => AnswerKind::Error,
            Reply::Unavailable => AnswerKind::Unavailable,
            Reply::Throttled => AnswerKind::Throttled,
            Reply::Fatal => AnswerKind::Fatal,
            Reply::Conflict => AnswerKind::Conflict,
            Reply::RateLimited | Reply::Overloaded | Reply::MoneyLimit => AnswerKind::Throttled,
            Reply::Status | Reply::Reset => AnswerKind::Error,
        };
        let mut ans = Answer::new(kind, a.node);
        match reply {
            Reply::Status => {
                let status = self.c.statuses.get(hint as usize).copied();
                ans = Answer::scripted(
                    status.unwrap_or(reliable_core::answer::Answer::Connection),
                    a.node,
                );
            }
            Reply::Reset => {
                ans = Answer::scripted(reliable_core::answer::Answer::Connection, a.node)
            }
            Reply::Throttled => {
                ans.retry_after = self.c.hints.get(hint as usize).copied().unwrap_or_default();
            }
            Reply::RateLimited => ans.retry_after = Duration::from_secs(u64::from(hint)),
            Reply::MoneyLimit => ans.money = true,
            _ => {}
        }
        self.answering = Some(a.n);
        self.answer(a.request, a.node, ans);
    }
}
