//! A scenario's faults, as scenario files write them (`faults: [Outage(downstream: "api", from:
//! "30s", until: "45s"), ...]`): one definition, read by the simulator, which plays every fault,
//! and by the chaos layers, which play those a client can make ([`Fault::client_side`]) on a
//! [`Timeline`](crate::chaos::Timeline). So a storm tried in the simulator is replayed against a
//! real service from the same file, with the same fields and the same meaning.
//!
//! ```
//! use reliable_core::fault::{Fault, OutageMode, ServerSide};
//! use reliable_core::chaos::ClientFault;
//! use reliable_core::Duration;
//!
//! let outage = Fault::Outage {
//!     downstream: "api".into(),
//!     from: Duration::from_secs(30),
//!     until: Duration::from_secs(45),
//!     mode: OutageMode::Hang,
//! };
//! let (downstream, window) = outage.client_side().unwrap();
//! assert_eq!((downstream, window.fault), ("api", ClientFault::Outage { hang: true }));
//!
//! let loss = Fault::CapacityLoss {
//!     downstream: "api".into(),
//!     from: Duration::from_secs(30),
//!     until: Duration::from_secs(45),
//!     share: 0.6,
//! };
//! assert!(matches!(loss.client_side(), Err(ServerSide { kind: "CapacityLoss", .. })));
//! ```

use crate::Duration;
use crate::chaos::{ClientFault, FaultWindow};
use alloc::string::String;

/// Something that goes wrong during `[from, until)`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Fault {
    /// The downstream is down: arrivals fail at once (`FailFast`) or never get an answer (`Hang`).
    Outage {
        /// Which downstream.
        downstream: String,
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
        /// How it fails. Default `FailFast`.
        #[serde(default)]
        mode: OutageMode,
    },
    /// The network to the downstream is partitioned but buffers (a link that queues, a load
    /// balancer holding connections): calls and answers that would be delivered during the window
    /// are held and delivered when it ends, in the order they were sent. Nothing reaches the
    /// downstream meanwhile; clients time out and retry into the same buffer, and the held traffic
    /// arrives at once when the partition heals (whether or not its clients still wait for it).
    Partition {
        /// Which downstream.
        downstream: String,
        /// Start.
        from: Duration,
        /// End (exclusive): when the held traffic is delivered.
        until: Duration,
    },
    /// Jobs finishing in the window fail with probability `rate` (after being served).
    ErrorRate {
        /// Which downstream.
        downstream: String,
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
        /// Share of jobs that fail, in [0, 1].
        rate: f64,
    },
    /// Service times of jobs starting in the window are multiplied by `factor`.
    LatencyInflation {
        /// Which downstream.
        downstream: String,
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
        /// Multiplier, at least 1.
        factor: f64,
    },
    /// The downstream loses `share` of its workers (jobs in service finish; no new ones start
    /// while the busy workers exceed what is left).
    CapacityLoss {
        /// Which downstream.
        downstream: String,
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
        /// Share of workers lost, in (0, 1].
        share: f64,
    },
    /// The downstream rejects a `share` of arrivals with a Retry-After of `retry_after`.
    Throttle {
        /// Which downstream.
        downstream: String,
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
        /// Share of arrivals rejected, in (0, 1]. Default 1.
        #[serde(default = "whole")]
        share: f64,
        /// The hint sent back.
        retry_after: Duration,
    },
    /// The open-loop arrival rate is multiplied by `factor` (a burst of users, a cron job, a
    /// cache flush). Needs an open-loop workload.
    LoadSpike {
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
        /// Multiplier, above 0.
        factor: f64,
    },
}

fn whole() -> f64 {
    1.0
}

/// How an outage fails calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum OutageMode {
    /// Refused at once (a transient error, no work done).
    #[default]
    FailFast,
    /// Swallowed: no answer ever comes, only the client's timeout ends the attempt.
    Hang,
}

/// A fault only the server or the workload can make: a client-side chaos layer cannot play it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerSide {
    /// The fault's kind as files write it (`CapacityLoss`, `LoadSpike`).
    pub kind: &'static str,
    /// Why, and where to play it instead.
    pub reason: &'static str,
}

impl Fault {
    /// The window `[from, until)`.
    pub fn window(&self) -> (Duration, Duration) {
        match self {
            Fault::Outage { from, until, .. }
            | Fault::Partition { from, until, .. }
            | Fault::ErrorRate { from, until, .. }
            | Fault::LatencyInflation { from, until, .. }
            | Fault::CapacityLoss { from, until, .. }
            | Fault::Throttle { from, until, .. }
            | Fault::LoadSpike { from, until, .. } => (*from, *until),
        }
    }

    /// The downstream it hits, if it hits one.
    pub fn downstream(&self) -> Option<&str> {
        match self {
            Fault::Outage { downstream, .. }
            | Fault::Partition { downstream, .. }
            | Fault::ErrorRate { downstream, .. }
            | Fault::LatencyInflation { downstream, .. }
            | Fault::CapacityLoss { downstream, .. }
            | Fault::Throttle { downstream, .. } => Some(downstream),
            Fault::LoadSpike { .. } => None,
        }
    }

    /// The variant's name as written in files.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Fault::Outage { .. } => "Outage",
            Fault::Partition { .. } => "Partition",
            Fault::ErrorRate { .. } => "ErrorRate",
            Fault::LatencyInflation { .. } => "LatencyInflation",
            Fault::CapacityLoss { .. } => "CapacityLoss",
            Fault::Throttle { .. } => "Throttle",
            Fault::LoadSpike { .. } => "LoadSpike",
        }
    }

    /// What a client sees of it: the downstream it hits and the window a chaos
    /// [`Timeline`](crate::chaos::Timeline) plays (not yet checked: the timeline checks its
    /// windows), or why only the server or the workload can make it. One row per kind.
    pub fn client_side(&self) -> Result<(&str, FaultWindow), ServerSide> {
        let (from, until) = self.window();
        let (downstream, fault) = match self {
            Fault::Outage {
                downstream, mode, ..
            } => (
                downstream,
                ClientFault::Outage {
                    hang: *mode == OutageMode::Hang,
                },
            ),
            Fault::Partition { downstream, .. } => (downstream, ClientFault::Partition),
            Fault::ErrorRate {
                downstream, rate, ..
            } => (downstream, ClientFault::ErrorRate { rate: *rate }),
            Fault::LatencyInflation {
                downstream, factor, ..
            } => (
                downstream,
                ClientFault::LatencyInflation { factor: *factor },
            ),
            Fault::Throttle {
                downstream,
                share,
                retry_after,
                ..
            } => (
                downstream,
                ClientFault::Throttle {
                    share: *share,
                    retry_after: *retry_after,
                },
            ),
            Fault::CapacityLoss { .. } => {
                return Err(ServerSide {
                    kind: "CapacityLoss",
                    reason: "a capacity loss removes the server's workers, and only the server \
                        has them: a client cannot make the server slower for everyone; play it \
                        in the service (fewer workers)",
                });
            }
            Fault::LoadSpike { .. } => {
                return Err(ServerSide {
                    kind: "LoadSpike",
                    reason: "a load spike multiplies the workload's arrival rate: the load \
                        generator plays it, not a layer on one client's calls",
                });
            }
        };
        Ok((downstream, FaultWindow { from, until, fault }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn every_client_visible_kind_becomes_its_window_and_the_others_say_why() {
        let cases = [
            (
                Fault::Outage {
                    downstream: "a".into(),
                    from: secs(1),
                    until: secs(2),
                    mode: OutageMode::FailFast,
                },
                Some(ClientFault::Outage { hang: false }),
            ),
            (
                Fault::Partition {
                    downstream: "a".into(),
                    from: secs(1),
                    until: secs(2),
                },
                Some(ClientFault::Partition),
            ),
            (
                Fault::ErrorRate {
                    downstream: "a".into(),
                    from: secs(1),
                    until: secs(2),
                    rate: 0.25,
                },
                Some(ClientFault::ErrorRate { rate: 0.25 }),
            ),
            (
                Fault::LatencyInflation {
                    downstream: "a".into(),
                    from: secs(1),
                    until: secs(2),
                    factor: 3.0,
                },
                Some(ClientFault::LatencyInflation { factor: 3.0 }),
            ),
            (
                Fault::Throttle {
                    downstream: "a".into(),
                    from: secs(1),
                    until: secs(2),
                    share: 0.5,
                    retry_after: secs(4),
                },
                Some(ClientFault::Throttle {
                    share: 0.5,
                    retry_after: secs(4),
                }),
            ),
            (
                Fault::CapacityLoss {
                    downstream: "a".into(),
                    from: secs(1),
                    until: secs(2),
                    share: 0.5,
                },
                None,
            ),
            (
                Fault::LoadSpike {
                    from: secs(1),
                    until: secs(2),
                    factor: 2.0,
                },
                None,
            ),
        ];
        for (f, expected) in cases {
            match (f.client_side(), expected) {
                (Ok((downstream, window)), Some(fault)) => {
                    assert_eq!(downstream, "a");
                    assert_eq!(
                        window,
                        FaultWindow {
                            from: secs(1),
                            until: secs(2),
                            fault
                        }
                    );
                }
                (Err(refused), None) => {
                    assert_eq!(refused.kind, f.kind_name());
                    assert!(refused.reason.contains("play"), "{}", refused.reason);
                }
                (got, expected) => panic!("{f:?}: {got:?}, expected {expected:?}"),
            }
        }
    }
}
