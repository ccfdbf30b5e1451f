//! What bounds the work: the retry schedule ([`backoff`]), the provider's circuit breaker
//! ([`breaker`]), the fleet's shared rate limit ([`rate_limit`]), the daily spend budget
//! ([`budget`]), the size of the fleet ([`fleet`]) and each caller's request rate
//! ([`caller_rate`]).

pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod caller_rate;
pub mod fleet;
pub mod rate_limit;
