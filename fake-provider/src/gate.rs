//! Holding calls: a [`Gate`] keeps every call scripted [`Behavior::held`] by it from
//! answering until the test releases it, so a test awaits the state it asserts while calls
//! are in flight instead of timing calls against the clock.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use fake_provider::{Behavior, FakeProvider, Gate};
//! let fake = FakeProvider::start().await;
//! let gate = Gate::new();
//! fake.push(Behavior::Classify.held(&gate));
//! // ... start the worker, then:
//! gate.wait_held(1, Duration::from_secs(10)).await.expect("the call is held");
//! // assert what holds while the call is in flight, then:
//! gate.release();
//! # }
//! ```
//!
//! [`Behavior::held`]: crate::Behavior::held

use std::{fmt, sync::Arc, time::Duration};

use tokio::sync::watch;

use crate::WaitTimedOut;

/// Holds calls until [`Gate::release`]; clones are the same gate.
#[derive(Clone)]
pub struct Gate(Arc<watch::Sender<State>>);

#[derive(Clone, Copy, Default, Debug)]
struct State {
    /// Calls waiting at the gate now.
    held: usize,
    released: bool,
}

impl Gate {
    pub fn new() -> Self {
        Gate(Arc::new(watch::Sender::new(State::default())))
    }

    /// How many calls the gate holds now.
    pub fn held(&self) -> usize {
        self.0.borrow().held
    }

    /// Waits until the gate holds at least `n` calls (recorded in the fake's ledger by then).
    pub async fn wait_held(&self, n: usize, timeout: Duration) -> Result<(), WaitTimedOut> {
        let mut state = self.0.subscribe();
        tokio::time::timeout(timeout, state.wait_for(|s| s.held >= n))
            .await
            .map(|_| ())
            .map_err(|_| WaitTimedOut {
                wanted: n,
                seen: self.held(),
            })
    }

    /// Lets every held call go on (to its delay, if any, then its answer), and every later
    /// call through at once.
    pub fn release(&self) {
        self.0.send_modify(|s| s.released = true);
    }

    /// Waits here until released; counted as held meanwhile (also if the client gives up).
    pub(crate) async fn pass(&self) {
        let mut state = self.0.subscribe();
        if state.borrow().released {
            return;
        }
        self.0.send_modify(|s| s.held += 1);
        let _counted = Counted(self);
        let _ = state.wait_for(|s| s.released).await;
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

/// Takes a held call off the count when it goes on, or its connection is dropped.
struct Counted<'a>(&'a Gate);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0 .0.send_modify(|s| s.held -= 1);
    }
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = *self.0.borrow();
        f.debug_struct("Gate")
            .field("held", &state.held)
            .field("released", &state.released)
            .finish()
    }
}

/// The same gate.
impl PartialEq for Gate {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
