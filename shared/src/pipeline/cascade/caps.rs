//! The caps on who makes up what a classifier learns from (docs/labelling.md): no ticket owner
//! gives more than its share of a source's rows, and no label giver more than its share of a
//! training set's weight or of a window's desk truth. One arithmetic for them all.

use std::collections::BTreeMap;

use crate::config::Labelling;

/// The shares the caps keep (`TRIAGE_TRAIN_OWNER_SHARE`, `TRIAGE_TRAIN_GIVER_SHARE`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shares {
    /// Of a source's rows, per ticket owner.
    pub owner: f64,
    /// Of a training set's weight, and of a by-time window's desk truth, per label giver.
    pub giver: f64,
}

impl From<&Labelling> for Shares {
    fn from(labelling: &Labelling) -> Self {
        Self {
            owner: labelling.owner_share,
            giver: labelling.giver_share,
        }
    }
}

/// The fewest rows a cap leaves anyone. A cap below it would starve a young desk, whose own
/// traffic (or its own labels) is all there is, to keep one smoke test's ticket from being an
/// equal owner: with the desk at 1,000 rows and a second owner at 1, an equal share trained
/// on 2. Beside a deployment whose others give thousands, an owner's or giver's thousand rows
/// are within the share anyway; where they are not, the others have too little traffic for a
/// classifier to be much more than one caller's until they have more.
pub const FLOOR_ROWS: i64 = 1_000;

/// The most rows each party of `counts` may give so that none gives more than `share` of
/// `base` (what no cap cuts, in the parties' units) plus what the parties give once capped:
/// the largest `c` with `c <= share × (base + Σ min(n, c))`, never below [`FLOOR_ROWS`].
/// `None`: no party is cut. That ratio `(base + Σ min(n, c)) / c` only falls as `c` grows, so
/// a cap that holds holds for any fewer rows, and the largest is found by bisection.
pub fn cap(counts: &[i64], base: f64, share: f64) -> Option<i64> {
    let most = counts.iter().copied().max().unwrap_or(0);
    let holds = |c: i64| {
        c as f64 <= share * (base + counts.iter().map(|&n| n.min(c)).sum::<i64>() as f64) + 1e-9
    };
    if most <= FLOOR_ROWS || holds(most) {
        return None;
    }
    // `low` may be given (it holds, or it is the floor), `high` may not.
    let (mut low, mut high) = (FLOOR_ROWS, most);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if holds(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    Some(low)
}

/// The most examples one owner may give a source of `counts` (examples per owner) so that
/// none gives more than `share` of what is read, or, with fewer owners than `1 / share`, more
/// than an equal share; never fewer than [`FLOOR_ROWS`], so that a desk beside a smoke
/// test's one ticket is not cut to one row. `None`: no cap (a single owner, or no owner above
/// it).
pub fn owner_cap(counts: &[i64], share: f64) -> Option<i64> {
    let owners = counts.iter().filter(|&&n| n > 0).count().max(1);
    cap(counts, 0.0, share.max(1.0 / owners as f64))
}

/// What a cap `c` leaves out of each party of `counts` (named by the first of each pair) it
/// cuts: reported, so that it is clear whom the cap bit and by how much.
pub fn cut<K: Clone + Ord>(counts: &[(K, i64)], c: Option<i64>) -> BTreeMap<K, u64> {
    let Some(c) = c else {
        return Default::default();
    };
    counts
        .iter()
        .filter(|(_, n)| *n > c)
        .map(|(k, n)| (k.clone(), (n - c) as u64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_keeps_each_party_within_its_share_of_the_rest_and_never_below_the_floor() {
        // (counts, base, share, cap)
        let cases: [(&[i64], f64, f64, Option<i64>); 7] = [
            (&[], 0.0, 0.2, None),
            (&[FLOOR_ROWS, 1], 0.0, 0.2, None),
            // The share cannot be met: the floor.
            (&[5_000, 10], 0.0, 0.2, Some(FLOOR_ROWS)),
            // c <= 0.2 × (c + 5 × 2,000) once past 2,000: 2,500.
            (
                &[20_000, 2_000, 2_000, 2_000, 2_000, 2_000],
                0.0,
                0.2,
                Some(2_500),
            ),
            // What no cap cuts counts: c <= 0.2 × (12,000 + c).
            (&[9_000], 12_000.0, 0.2, Some(3_000)),
            (&[2_000], 12_000.0, 0.2, None),
            (&[20_000, 2_000], 0.0, 1.0, None),
        ];
        for (counts, base, share, expected) in cases {
            let got = cap(counts, base, share);
            assert_eq!(got, expected, "{counts:?} {base} {share}");
            if let Some(c) = got.filter(|&c| c > FLOOR_ROWS) {
                // And for every smaller cap down to the floor: the first rows read, each
                // party's newest level by level, keep everyone within its share.
                for m in FLOOR_ROWS..=c {
                    let held: i64 = counts.iter().map(|&n| n.min(m)).sum();
                    assert!(m as f64 <= share * (base + held as f64) + 1e-9, "{m}");
                }
            }
        }
        let cut = cut(&[("desk", 5_000), ("smoke", 10)], Some(FLOOR_ROWS));
        assert_eq!(cut.into_iter().collect::<Vec<_>>(), [("desk", 4_000)]);
    }

    #[test]
    fn no_owner_gives_more_than_its_share_a_single_owner_is_not_capped_nor_one_starved() {
        let floor = FLOOR_ROWS;
        let cases: [(&[i64], f64, Option<i64>); 9] = [
            (&[], 0.2, None),
            (&[100_000], 0.2, None),
            // A desk and a smoke test's one ticket: the desk trains on all it has (an equal
            // share would be one row each).
            (&[1_000, 1], 0.2, None),
            (&[50_000, 1], 0.2, Some(floor)),
            // Two owners: no more than an equal share.
            (&[50_000, 3_000], 0.2, Some(3_000)),
            (&[3_000, 3_000], 0.2, None),
            // Five or more: a fifth at most.
            (
                &[50_000, 3_000, 3_000, 3_000, 3_000, 3_000],
                0.2,
                Some(3_750),
            ),
            (&[50_000, 3_000, 3_000, 3_000, 3_000, 3_000], 1.0, None),
            (&[5_000, 5_000, 0], 0.2, None),
        ];
        for (counts, share, cap) in cases {
            assert_eq!(owner_cap(counts, share), cap, "{counts:?} {share}");
            if let Some(c) = cap.filter(|&c| c > floor) {
                let total: i64 = counts.iter().map(|&n| n.min(c)).sum();
                let owners = counts.iter().filter(|&&n| n > 0).count() as f64;
                assert!(c as f64 <= share.max(1.0 / owners) * total as f64 + 1e-9);
            }
        }
    }
}
