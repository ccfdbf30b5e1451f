//! The group mapping (docs/zendesk.md): a department's Zendesk group is its taxonomy's
//! `zendesk_group_id`, read from the taxonomy the answer was made under (its policy
//! version), never from whatever taxonomy is configured now. The built-in policy has no
//! group ids: nothing is routed, and no group maps back. A group several departments share
//! maps back to none of them ([`Back::Shared`]): which one the agent meant is not known, so it
//! is no department label (the import and the corrections say so).

use deadpool_postgres::GenericClient;

use crate::{
    domain::error::{InvalidRequest, Result},
    pipeline::taxonomy,
    providers::Policy,
};

/// A policy's departments with their groups, and its urgency threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub policy_version: String,
    departments: Vec<(String, Option<i64>)>,
    pub urgent_threshold: f64,
}

impl Mapping {
    /// The mapping of `policy_version`: the built-in policy's (no groups) or a stored taxonomy's.
    pub async fn of(client: &impl GenericClient, policy_version: &str) -> Result<Self> {
        if let Some(policy) = Policy::load(policy_version) {
            return Ok(Self {
                policy_version: policy.version,
                departments: policy.departments.into_iter().map(|d| (d, None)).collect(),
                urgent_threshold: policy.urgent_threshold,
            });
        }
        match taxonomy::load(client, policy_version).await? {
            Ok(taxonomy) => Ok(Self {
                policy_version: policy_version.to_string(),
                departments: taxonomy
                    .departments
                    .into_iter()
                    .map(|d| (d.name, d.zendesk_group_id))
                    .collect(),
                urgent_threshold: taxonomy.urgent_threshold,
            }),
            Err(unusable) => {
                Err(InvalidRequest::new("policy_version", unusable.to_string()).into())
            }
        }
    }

    pub fn group_of(&self, department: &str) -> Option<i64> {
        self.departments
            .iter()
            .find(|(name, _)| name == department)
            .and_then(|(_, group)| *group)
    }

    /// The department `group` stands for, if exactly one has it.
    pub fn department_of(&self, group: i64) -> Back<'_> {
        let mut named = self
            .departments
            .iter()
            .filter(|(_, g)| *g == Some(group))
            .map(|(name, _)| name.as_str());
        match (named.next(), named.next()) {
            (None, _) => Back::None,
            (Some(department), None) => Back::One(department),
            (Some(_), Some(_)) => Back::Shared,
        }
    }
}

/// What a group maps back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Back<'a> {
    One(&'a str),
    /// No department has the group.
    None,
    /// Several departments have it: none is the label.
    Shared,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_map_both_ways_and_the_built_in_policy_has_none() {
        let mapping = Mapping {
            policy_version: "desk-1".into(),
            departments: vec![("billing".into(), Some(360001)), ("general".into(), None)],
            urgent_threshold: 0.5,
        };
        assert_eq!(mapping.group_of("billing"), Some(360001));
        assert_eq!(mapping.group_of("general"), None);
        assert_eq!(mapping.department_of(360001), Back::One("billing"));
        assert_eq!(mapping.department_of(42), Back::None);
    }

    #[test]
    fn a_group_several_departments_share_maps_back_to_none() {
        let mapping = Mapping {
            policy_version: "desk-1".into(),
            departments: vec![
                ("card_arrival".into(), Some(7)),
                ("card_delivery".into(), Some(7)),
            ],
            urgent_threshold: 0.5,
        };
        assert_eq!(mapping.department_of(7), Back::Shared);
        assert_eq!(mapping.group_of("card_delivery"), Some(7));
    }
}
