//! The guard that keeps `reliable_http_call` from becoming a server-side request forgery (SSRF)
//! hole: an agent (or a prompt injected into one) must not be able to make this server fetch
//! cloud metadata, an admin port on loopback or a host on the operator's private network.
//!
//! Every way a request can reach an address is checked, and each check has its own file:
//!
//! - [`addr`]: which addresses are public (the ranges, and IPv6 forms judged by the IPv4 inside);
//! - [`guard`]: the policy: http/https only, literal IP hosts checked here (reqwest never calls a
//!   resolver for them), and the operator's explicit allow-list;
//! - [`resolver`]: DNS through the guard: a name is refused whole if any of its addresses is not
//!   allowed, and reqwest dials exactly the addresses it returns, so there is no window for DNS
//!   rebinding between the check and the connect;
//! - [`redirect`]: every redirect re-checked, at most three;
//! - [`body`]: the response body read under a cap (a `Content-Length` over it is refused before
//!   reading, a streamed body is cut off at it);
//! - [`client`]: the reqwest client that wires them together, with no proxy from the environment
//!   and connect, read and total timeouts.

pub mod addr;
pub mod body;
pub mod client;
pub mod guard;
pub mod redirect;
pub mod resolver;

pub use addr::{Class, classify};
pub use body::{BodyError, read_capped};
pub use client::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_HEDGES, DEFAULT_MAX_HTTP_CALLS, HARD_MAX_ATTEMPTS,
    HARD_MAX_HEDGES, HARD_MAX_HTTP_CALLS, Limits, build_client,
};
pub use guard::{AllowList, Guard, Refusal};
