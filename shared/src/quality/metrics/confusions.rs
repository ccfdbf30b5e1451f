//! A confusion read at any taxonomy's size: up to [`GRID_CLASSES`] departments as the full
//! grid, beyond as its most frequent errors (no one reads a 77×77 grid). The console's Quality
//! page and the CLI's eval report both read it so.

use std::collections::BTreeMap;

/// Up to this many departments a confusion is shown as its grid; beyond, its top errors.
pub const GRID_CLASSES: usize = 12;
/// Errors listed when there are too many departments for a grid.
pub const TOP_CONFUSIONS: usize = 20;

/// Rows labelled `label` answered `answer`: `rows` of the label's `label_rows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confusion<'a> {
    pub label: &'a str,
    pub answer: &'a str,
    pub rows: u64,
    pub label_rows: u64,
}

/// Every error of `confusion` (label → answer → rows), the most frequent first, ties by label
/// then answer.
pub fn ranked(confusion: &BTreeMap<String, BTreeMap<String, u64>>) -> Vec<Confusion<'_>> {
    let mut errors: Vec<Confusion<'_>> = confusion
        .iter()
        .flat_map(|(label, row)| {
            let label_rows: u64 = row.values().sum();
            row.iter()
                .filter(move |(answer, rows)| *answer != label && **rows > 0)
                .map(move |(answer, rows)| Confusion {
                    label,
                    answer,
                    rows: *rows,
                    label_rows,
                })
        })
        .collect();
    errors.sort_by(|a, b| {
        b.rows
            .cmp(&a.rows)
            .then((a.label, a.answer).cmp(&(b.label, b.answer)))
    });
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_come_most_frequent_first_and_right_answers_are_no_error() {
        let row = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let confusion = BTreeMap::from([
            ("a".to_string(), row(&[("a", 8), ("b", 1), ("c", 3)])),
            ("b".to_string(), row(&[("b", 5), ("a", 3), ("c", 0)])),
        ]);
        let ranked = ranked(&confusion);
        let pairs: Vec<_> = ranked.iter().map(|c| (c.label, c.answer, c.rows)).collect();
        assert_eq!(pairs, [("a", "c", 3), ("b", "a", 3), ("a", "b", 1)]);
        assert_eq!(ranked[0].label_rows, 12);
    }
}
