//! The script: which behaviour answers the next call (outage, queue, rules, default), flex's
//! turns, and classifier mode's labels.

use std::{collections::VecDeque, time::Duration};

use crate::{classifier, Behavior, Flex};

#[derive(Default)]
pub(crate) struct Script {
    /// The only API key accepted, when set.
    pub(crate) accepted_key: Option<String>,
    /// Refuse what the real APIs refuse in a request's shape (see `strict`).
    pub(crate) strict: bool,
    pub(crate) outage: Option<Behavior>,
    pub(crate) queue: VecDeque<Behavior>,
    pub(crate) rules: Vec<(String, Behavior)>,
    pub(crate) default: Behavior,
    pub(crate) flex: Option<Flex>,
    pub(crate) flex_calls: u32,
    /// How long a batch runs before it ends.
    pub(crate) batch_delay: Duration,
    /// Deleting a file or a batch fails (500) while set.
    pub(crate) deletes_fail: bool,
    /// Classifier mode: `Classify` answers from these labels (see [`classifier`]).
    pub(crate) labels: Option<classifier::Classifier>,
}

impl Script {
    /// A flex call's turn: every n-th is unavailable, the others answer after the flex delay.
    pub(crate) fn next_flex(&mut self, ticket_text: &str, model: &str) -> Behavior {
        let Some(flex) = self.flex else {
            return self.behavior(ticket_text, model);
        };
        self.flex_calls += 1;
        if flex.unavailable_every > 0 && self.flex_calls.is_multiple_of(flex.unavailable_every) {
            return Behavior::ResourceUnavailable;
        }
        self.behavior(ticket_text, model).after(flex.delay)
    }

    /// The behaviour for a call, with `Classify` answered from the labels in classifier mode.
    pub(crate) fn behavior(&mut self, ticket_text: &str, model: &str) -> Behavior {
        let behavior = self.next(ticket_text);
        match &self.labels {
            Some(labels) => labelled(behavior, labels, ticket_text, model),
            None => behavior,
        }
    }

    pub(crate) fn next(&mut self, ticket_text: &str) -> Behavior {
        if let Some(outage) = &self.outage {
            return outage.clone();
        }
        if let Some(next) = self.queue.pop_front() {
            return next;
        }
        self.rules
            .iter()
            .find(|(needle, _)| ticket_text.contains(needle.as_str()))
            .map_or_else(|| self.default.clone(), |(_, b)| b.clone())
    }
}

/// `Classify` (delayed or not) as the label file answers it; a ticket it does not label keeps
/// the hash answer.
fn labelled(
    behavior: Behavior,
    labels: &classifier::Classifier,
    ticket_text: &str,
    model: &str,
) -> Behavior {
    match behavior {
        Behavior::Classify => labels
            .answer(ticket_text, model)
            .map_or(Behavior::Classify, Behavior::Answer),
        Behavior::Delay(delay, inner) => Behavior::Delay(
            delay,
            Box::new(labelled(*inner, labels, ticket_text, model)),
        ),
        Behavior::Held(gate, inner) => {
            Behavior::Held(gate, Box::new(labelled(*inner, labels, ticket_text, model)))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_prefers_outage_then_queue_then_rules_then_default() {
        let mut script = Script::default();
        script
            .rules
            .push(("refund".into(), Behavior::QuotaExhausted));
        script.queue.push_back(Behavior::Hang);
        script.outage = Some(Behavior::Status(503));
        assert_eq!(script.next("refund"), Behavior::Status(503));
        script.outage = None;
        assert_eq!(script.next("refund"), Behavior::Hang);
        assert_eq!(script.next("refund"), Behavior::QuotaExhausted);
        assert_eq!(script.next("other"), Behavior::Classify);
    }
}
