//! What a training holds: its examples, gathered source by source within a budget in bytes
//! (the memory of where it runs: `operations::fits`), each text cut to what the classifier
//! reads of it ([`classifier::bounded`]) and held once, found again by a digest of that text
//! rather than by the text as a key. A gathering that reaches its budget takes nothing more,
//! and each source says how many of its rows it left out, and why ([`LeftOut`]).

use std::collections::{hash_map::Entry, HashMap};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::providers::classifier::{self, Example};

/// What one example costs beside the bytes of its texts: the example in the list (with the
/// list's spare capacity), its three allocations, its digest and index here, the ticket it
/// records, the owner and giver it counts, and the training's own lists of examples (checked
/// and labelled, shuffled twice, the holdout's scores). Measured: docs/benchmarks.md, "Training
/// in the ops function's memory".
pub const PER_EXAMPLE_BYTES: u64 = 512;

/// Whose word an example's labels are, lowest first: of two examples of one text, the labels
/// of the higher standing train, whatever their weights (an audited answer may weigh more than
/// a desk label, `examples::AUDIT_WEIGHT_CAP`, and is still the model's word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// The large model's answer.
    Model,
    /// The large model's answer on a ticket the audit drew at random.
    Audit,
    /// A labeller's label, or a labelled set's row.
    Desk,
}

/// The examples of one training, one per text.
#[derive(Debug, Default)]
pub struct Gathered {
    examples: Vec<Example>,
    /// Beside each example, whose word its labels are.
    standing: Vec<Standing>,
    /// The first 16 bytes of SHA-256 over the example's (bounded) text: 16 bytes a text,
    /// however long, and a collision as likely as a random one among 2^128.
    at: HashMap<[u8; 16], usize>,
    budget: Option<u64>,
    held: u64,
    full: bool,
}

/// What became of an example offered to a gathering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Held: a text not held before.
    New,
    /// Its text is held already: one example stands for both, with the labels (and weight) of
    /// the higher [`Standing`] (the first of equals), in the place of the first.
    Merged,
    /// Not held: it would take the examples beyond the budget, and the gathering takes
    /// nothing more (its sources are read newest first: nothing older replaces it).
    Full,
}

impl Gathered {
    /// A gathering of at most `budget` bytes ([`cost`]); `None`: no bound but the rows'.
    pub fn within(budget: Option<u64>) -> Self {
        Self {
            budget,
            ..Self::default()
        }
    }

    pub fn take(&mut self, example: Example, standing: Standing) -> Taken {
        if self.full {
            return Taken::Full;
        }
        let example = Example {
            subject: classifier::bounded(example.subject),
            message: classifier::bounded(example.message),
            ..example
        };
        match self.at.entry(digest(&example)) {
            Entry::Occupied(at) => {
                let at = *at.get();
                if standing > self.standing[at] {
                    self.examples[at] = example;
                    self.standing[at] = standing;
                }
                Taken::Merged
            }
            Entry::Vacant(slot) => {
                let held = self.held + cost(&example);
                if self.budget.is_some_and(|budget| held > budget) {
                    self.full = true;
                    return Taken::Full;
                }
                self.held = held;
                slot.insert(self.examples.len());
                self.examples.push(example);
                self.standing.push(standing);
                Taken::New
            }
        }
    }

    /// Whether an example was refused for the budget: nothing more is taken.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// What the examples held cost ([`cost`]).
    pub fn held_bytes(&self) -> u64 {
        self.held
    }

    /// The examples, in the order their texts were first taken.
    pub fn into_examples(self) -> Vec<Example> {
        self.examples
    }
}

/// What holding `example` costs: its texts and labels, and [`PER_EXAMPLE_BYTES`].
pub fn cost(example: &Example) -> u64 {
    (example.subject.len() + example.message.len() + example.department.len()) as u64
        + PER_EXAMPLE_BYTES
}

fn digest(example: &Example) -> [u8; 16] {
    let digest = Sha256::new()
        .chain_update((example.subject.len() as u64).to_le_bytes())
        .chain_update(example.subject.as_bytes())
        .chain_update(example.message.as_bytes())
        .finalize();
    let mut key = [0; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// A source's rows that did not train, by why (none is left out silently).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// Desk labels held: one giver's word against both the model and the classifier, until a
    /// second source agrees (`cascade::hold`, docs/labelling.md).
    pub held: u64,
    /// Beyond their owner's cap (`TRIAGE_TRAIN_OWNER_SHARE`, docs/labelling.md).
    pub owner_cap: u64,
    /// Desk labels beyond their giver's share of the training set's weight
    /// (`TRIAGE_TRAIN_GIVER_SHARE`): the giver's oldest.
    pub giver_cap: u64,
    /// Beyond the most rows one source gives (300,000, each owner's newest).
    pub row_cap: u64,
    /// Beyond the budget of the memory where the training runs: the older ones (each owner's
    /// newest are read first).
    pub memory: u64,
}

impl LeftOut {
    pub fn total(&self) -> u64 {
        self.held + self.owner_cap + self.giver_cap + self.row_cap + self.memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(subject: &str, message: &str, department: &str, weight: f32) -> Example {
        Example {
            subject: subject.into(),
            message: message.into(),
            department: department.into(),
            is_urgent: false,
            weight,
        }
    }

    #[test]
    fn one_example_per_text_and_the_desks_label_stands_over_the_models() {
        let model = [
            (example("a", "m", "billing", 1.0), Standing::Model),
            (example("b", "m", "sales", 1.0), Standing::Model),
        ];
        // An audited answer weighs more than a desk label and is still the model's word.
        let audited = (example("a", "m", "cards", 10.0), Standing::Audit);
        let desk = (example("a", "m", "account", 3.0), Standing::Desk);
        for desk_first in [false, true] {
            let mut gathered = Gathered::within(None);
            let mut offered = model.to_vec();
            offered.push(audited.clone());
            if desk_first {
                offered.insert(0, desk.clone());
            } else {
                offered.push(desk.clone());
            }
            let taken: Vec<Taken> = offered
                .into_iter()
                .map(|(e, standing)| gathered.take(e, standing))
                .collect();
            assert_eq!(taken.iter().filter(|t| **t == Taken::Merged).count(), 2);
            let merged = gathered.into_examples();
            assert_eq!(merged.len(), 2);
            let a = merged.iter().find(|e| e.subject == "a").unwrap();
            assert_eq!((a.department.as_str(), a.weight), ("account", 3.0));
        }
        // The audit's answer stands over the model's own, with its weight.
        let mut gathered = Gathered::within(None);
        gathered.take(example("a", "m", "billing", 1.0), Standing::Model);
        gathered.take(audited.0.clone(), audited.1);
        let merged = gathered.into_examples();
        assert_eq!(
            (merged[0].department.as_str(), merged[0].weight),
            ("cards", 10.0)
        );
        // The same words split otherwise between subject and message are another text.
        let mut gathered = Gathered::within(None);
        let model = Standing::Model;
        assert_eq!(
            gathered.take(example("ab", "c", "sales", 1.0), model),
            Taken::New
        );
        assert_eq!(
            gathered.take(example("a", "bc", "sales", 1.0), model),
            Taken::New
        );
    }

    #[test]
    fn a_gathering_stops_at_its_budget_and_holds_each_text_bounded() {
        let long = "x".repeat(20_000);
        let one = cost(&Example {
            message: classifier::bounded(long.clone()),
            ..example("s0", "", "billing", 1.0)
        });
        assert_eq!(one, 2 + 8 * 1024 + 7 + PER_EXAMPLE_BYTES);
        let mut gathered = Gathered::within(Some(3 * one + one / 2));
        let taken: Vec<Taken> = (0..5)
            .map(|i| {
                let e = example(&format!("s{i}"), &long, "billing", 1.0);
                gathered.take(e, Standing::Model)
            })
            .collect();
        assert_eq!(
            taken,
            [Taken::New, Taken::New, Taken::New, Taken::Full, Taken::Full]
        );
        assert!(gathered.is_full());
        // Once full, nothing more, not even a text held already.
        assert_eq!(
            gathered.take(example("s0", &long, "billing", 3.0), Standing::Desk),
            Taken::Full
        );
        assert_eq!(gathered.held_bytes(), 3 * one);
        let held = gathered.into_examples();
        assert!(held.iter().all(|e| e.message.len() == 8 * 1024));
        // Without a budget, every text is held.
        let mut unbounded = Gathered::within(None);
        assert!((0..5).all(|i| unbounded
            .take(example(&i.to_string(), &long, "b", 1.0), Standing::Model)
            == Taken::New));
    }
}
