//! Client policy stacks: the scenario's layers compiled into a flat tree of nodes, and the state
//! each stateful layer keeps (per client or shared).
//!
//! Every decision (admit or reject a call, retry or give up, how long to wait) is made by the core's
//! types; this module only wires them to the simulator's calls and answers.

pub mod answer;
pub mod breakers;
pub mod budgets;
pub mod fleet;
pub mod fleet_budget;
pub mod ledgers;
pub mod llm;
pub mod stack;

pub use answer::{Answer, AnswerKind};
pub use stack::{CompiledStack, NodeKind};
