//! Tests of the provider layer as a whole (request bodies, endpoints, answer shaping), each
//! file spanning several of its modules; one module's own tests stay beside it.

// The provider modules under their own names, so `super::client` etc. read as in `providers`.
use super::*;

mod body;
mod endpoint;
mod shaping;
pub(super) mod signature;
