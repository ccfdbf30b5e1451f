//! What bounds the work: the retry schedule ([`backoff`]), the provider's circuit breaker
//! ([`breaker`]), the fleet's shared rate limit ([`rate_limit`]), the daily spend budget
//! ([`budget`]) and the size of the fleet ([`fleet`]).

pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod fleet;
pub mod rate_limit;
