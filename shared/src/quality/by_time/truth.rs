//! A judged window's desk truth with each label giver's share capped
//! (`TRIAGE_TRAIN_GIVER_SHARE`, docs/labelling.md): one desk tool labelling every owner's
//! tickets does not make up the truth a gate judges by. Beyond its share a giver's oldest
//! labels are no truth, and their tickets fall back to the next truth: the audit's where it
//! drew them, else none (the large model's own answer, which no gate judges by).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::JudgedRow;
use crate::pipeline::cascade::caps;

/// The desk's label a judged ticket's truth is: who gave it and when, and the share of the
/// audit's draw where one drew the ticket.
#[derive(Debug, Clone)]
pub(super) struct Label {
    pub giver: String,
    pub at: DateTime<Utc>,
    pub drawn_share: Option<f64>,
}

/// Caps each giver's share of the desk truth of `judged` (one list of rows per judge, in the
/// tickets' order; `labels` is the desk label of each ticket, if it has one): the givers cut,
/// with the labels that are no longer truth. A ticket's answer is urgent from `urgent_at`.
pub(super) fn cap(
    judged: &mut [Vec<JudgedRow>],
    labels: &[Option<Label>],
    share: f64,
    urgent_at: f64,
) -> BTreeMap<String, u64> {
    let mut by_giver: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, label) in labels.iter().enumerate() {
        if let Some(label) = label {
            by_giver.entry(&label.giver).or_default().push(i);
        }
    }
    let counts: Vec<(String, i64)> = by_giver
        .iter()
        .map(|(giver, rows)| (giver.to_string(), rows.len() as i64))
        .collect();
    let n: Vec<i64> = counts.iter().map(|(_, n)| *n).collect();
    let Some(most) = caps::cap(&n, 0.0, share) else {
        return BTreeMap::new();
    };
    for rows in by_giver.values_mut() {
        // The newest labels stay truth.
        rows.sort_by_key(|&i| std::cmp::Reverse(labels[i].as_ref().map(|l| l.at)));
        for &i in rows.iter().skip(most as usize) {
            let drawn = labels[i].as_ref().and_then(|l| l.drawn_share);
            for row in judged.iter_mut().map(|rows| &mut rows[i]) {
                row.desk = false;
                row.department = row.large.department.clone();
                row.is_urgent = row.large.is_urgent >= urgent_at;
                row.weight = drawn.map_or(1.0, |share| 1.0 / share);
            }
        }
    }
    caps::cut(&counts, Some(most))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{pipeline::cascade::caps::FLOOR_ROWS, quality::metrics::Prediction};

    fn row(desk: &str) -> JudgedRow {
        JudgedRow {
            family: String::new(),
            department: desk.into(),
            is_urgent: true,
            desk: true,
            audited: false,
            weight: 1.0,
            large: Prediction {
                department: "billing".into(),
                is_urgent: 0.1,
            },
            cost_usd: 0.0,
            local: None,
            answered_locally: false,
        }
    }

    #[test]
    fn beyond_its_share_a_givers_oldest_labels_fall_back_to_the_audit_or_to_no_truth() {
        let tool = FLOOR_ROWS as usize + 10;
        let at = |i: usize| DateTime::<Utc>::from_timestamp(i as i64, 0).unwrap();
        // The tool's labels, oldest first, the first of them audited; one other giver's label.
        let mut labels: Vec<Option<Label>> = (0..tool)
            .map(|i| {
                Some(Label {
                    giver: "tool".into(),
                    at: at(i),
                    drawn_share: (i == 0).then_some(0.25),
                })
            })
            .collect();
        labels.push(Some(Label {
            giver: "agent".into(),
            at: at(0),
            drawn_share: None,
        }));
        labels.push(None);
        let mut judged = vec![vec![row("sales"); labels.len()]; 2];
        for rows in &mut judged {
            rows[0].audited = true;
            rows[tool + 1].desk = false;
        }
        let cut = cap(&mut judged, &labels, 0.2, 0.5);
        assert_eq!(cut, BTreeMap::from([("tool".to_string(), 10)]));
        for rows in &judged {
            assert_eq!(
                rows.iter().filter(|r| r.desk).count(),
                FLOOR_ROWS as usize + 1
            );
            // The oldest ten: the audited one is the audit's truth, weighing 1 / its share.
            assert!(rows[..10]
                .iter()
                .all(|r| !r.desk && r.department == "billing"));
            assert!(!rows[0].is_urgent && rows[0].weight == 4.0 && rows[1].weight == 1.0);
            assert!(rows[tool].desk, "the other giver's label stays");
        }
        // Within the share (or the floor), nothing moves.
        let mut few = vec![vec![row("sales"); 3]];
        assert!(cap(&mut few, &labels[..3], 0.2, 0.5).is_empty());
        assert!(few[0].iter().all(|r| r.desk));
    }
}
