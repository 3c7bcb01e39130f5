//! A scenario file's `faults`, read without the simulator: the client-visible ones become
//! [`FaultWindow`]s, the others are refused with the reason.

use reliable_core::Duration;
use reliable_core::chaos::{ClientFault, FaultWindow, Timeline};
use serde::Deserialize;

/// A scenario file as far as faults go: every other field is skipped.
#[derive(Deserialize)]
struct Scenario {
    #[serde(default)]
    faults: Vec<Fault>,
}

/// A fault as scenario files write it (the simulator's variants and fields).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
enum Fault {
    Outage {
        downstream: String,
        from: Duration,
        until: Duration,
        #[serde(default)]
        mode: Mode,
    },
    Partition {
        downstream: String,
        from: Duration,
        until: Duration,
    },
    ErrorRate {
        downstream: String,
        from: Duration,
        until: Duration,
        rate: f64,
    },
    LatencyInflation {
        downstream: String,
        from: Duration,
        until: Duration,
        factor: f64,
    },
    CapacityLoss {
        downstream: String,
        #[allow(dead_code)]
        from: Duration,
        #[allow(dead_code)]
        until: Duration,
        #[allow(dead_code)]
        share: f64,
    },
    Throttle {
        downstream: String,
        from: Duration,
        until: Duration,
        #[serde(default = "one")]
        share: f64,
        retry_after: Duration,
    },
    LoadSpike {
        #[allow(dead_code)]
        from: Duration,
        #[allow(dead_code)]
        until: Duration,
        #[allow(dead_code)]
        factor: f64,
    },
}

fn one() -> f64 {
    1.0
}

#[derive(Deserialize, Default, Clone, Copy)]
enum Mode {
    #[default]
    FailFast,
    Hang,
}

/// A fault of the file that a client cannot play.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnplayableFault {
    /// Its index in `faults`.
    pub index: usize,
    /// Its kind (`CapacityLoss`, `LoadSpike`).
    pub kind: &'static str,
    /// Why, and where to play it instead.
    pub reason: &'static str,
}

impl std::fmt::Display for UnplayableFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "faults[{}]: {} refused: {}",
            self.index, self.kind, self.reason
        )
    }
}

/// The faults of one downstream in a scenario file.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioFaults {
    /// Those a chaos layer plays, in file order, times from the scenario's start.
    pub client: Vec<FaultWindow>,
    /// Those it cannot, with the reason.
    pub refused: Vec<UnplayableFault>,
}

impl ScenarioFaults {
    /// The client-side faults, or the first refusal as an error.
    pub fn client_only(self) -> Result<Vec<FaultWindow>, String> {
        match self.refused.first() {
            Some(r) => Err(r.to_string()),
            None => Ok(self.client),
        }
    }
}

const CAPACITY: &str = "a capacity loss removes the server's workers, and only the server has them: \
    a client cannot make the server slower for everyone; play it in the service (fewer workers)";
const LOAD: &str = "a load spike multiplies the workload's arrival rate: the load generator plays \
    it, not a layer on one client's calls";

/// The faults of `downstream` in the scenario file `text` (RON, as the simulator reads it; every
/// field but `faults` is skipped; of a file holding a list of scenarios, the first). Errors name
/// the spot (`line:col: ...`) or the fault and its field (`faults[2].rate: ...`).
pub fn scenario_faults(text: &str, downstream: &str) -> Result<ScenarioFaults, String> {
    let file: Scenario = match ron::from_str(text) {
        Ok(one) => one,
        Err(e) => match ron::from_str::<Vec<Scenario>>(text) {
            Ok(list) => list
                .into_iter()
                .next()
                .ok_or("the file holds no scenario")?,
            Err(_) => return Err(e.to_string()),
        },
    };
    let mut out = ScenarioFaults {
        client: Vec::new(),
        refused: Vec::new(),
    };
    let mut indices = Vec::new();
    for (index, f) in file.faults.into_iter().enumerate() {
        let (ds, from, until, fault) = match f {
            Fault::Outage {
                downstream,
                from,
                until,
                mode,
            } => (
                downstream,
                from,
                until,
                ClientFault::Outage {
                    hang: matches!(mode, Mode::Hang),
                },
            ),
            Fault::Partition {
                downstream,
                from,
                until,
            } => (downstream, from, until, ClientFault::Partition),
            Fault::ErrorRate {
                downstream,
                from,
                until,
                rate,
            } => (downstream, from, until, ClientFault::ErrorRate { rate }),
            Fault::LatencyInflation {
                downstream,
                from,
                until,
                factor,
            } => (
                downstream,
                from,
                until,
                ClientFault::LatencyInflation { factor },
            ),
            Fault::Throttle {
                downstream,
                from,
                until,
                share,
                retry_after,
            } => (
                downstream,
                from,
                until,
                ClientFault::Throttle { share, retry_after },
            ),
            Fault::CapacityLoss { downstream: ds, .. } => {
                if ds == downstream {
                    out.refused.push(UnplayableFault {
                        index,
                        kind: "CapacityLoss",
                        reason: CAPACITY,
                    });
                }
                continue;
            }
            Fault::LoadSpike { .. } => {
                out.refused.push(UnplayableFault {
                    index,
                    kind: "LoadSpike",
                    reason: LOAD,
                });
                continue;
            }
        };
        if ds == downstream {
            indices.push(index);
            out.client.push(FaultWindow { from, until, fault });
        }
    }
    if let Err((i, e)) = Timeline::new(&out.client, 0) {
        return Err(format!(
            "faults[{}].{e}",
            indices.get(i).copied().unwrap_or(i)
        ));
    }
    Ok(out)
}
