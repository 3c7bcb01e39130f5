//! A scenario file's `faults`, read without the simulator: the client-visible ones become
//! [`FaultWindow`]s, the others are refused with the reason.

use reliable_core::chaos::{FaultWindow, Timeline};
use reliable_core::fault::Fault;
use serde::Deserialize;

/// A scenario file as far as faults go: every other field is skipped.
#[derive(Deserialize)]
struct Scenario {
    #[serde(default)]
    faults: Vec<Fault>,
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
    /// The faults of `downstream` among `faults`, already read (a scenario a program holds, a
    /// simulator's compiled one): split as [`scenario_faults`] splits a file's. Errors name the
    /// fault and its field (`faults[2].rate: ...`).
    pub fn from_faults(faults: &[Fault], downstream: &str) -> Result<ScenarioFaults, String> {
        let mut out = ScenarioFaults {
            client: Vec::new(),
            refused: Vec::new(),
        };
        let mut indices = Vec::new();
        for (index, f) in faults.iter().enumerate() {
            match f.client_side() {
                Ok((ds, window)) if ds == downstream => {
                    indices.push(index);
                    out.client.push(window);
                }
                Ok(_) => {}
                // A capacity loss is refused only for the downstream it hits; a load spike hits the
                // workload, so every downstream's replay is told.
                Err(server) if f.downstream().is_none_or(|ds| ds == downstream) => {
                    out.refused.push(UnplayableFault {
                        index,
                        kind: server.kind,
                        reason: server.reason,
                    });
                }
                Err(_) => {}
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

    /// The client-side faults, or the first refusal as an error.
    pub fn client_only(self) -> Result<Vec<FaultWindow>, String> {
        match self.refused.first() {
            Some(r) => Err(r.to_string()),
            None => Ok(self.client),
        }
    }
}

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
    ScenarioFaults::from_faults(&file.faults, downstream)
}
