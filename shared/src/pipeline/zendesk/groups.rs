//! The group mapping (docs/zendesk.md): a department's Zendesk group is its taxonomy's
//! `zendesk_group_id`, read from the taxonomy the answer was made under (its policy
//! version), never from whatever taxonomy is configured now. The built-in policy has no
//! group ids: nothing is routed, and no group maps back.

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

    pub fn department_of(&self, group: i64) -> Option<&str> {
        self.departments
            .iter()
            .find(|(_, g)| *g == Some(group))
            .map(|(name, _)| name.as_str())
    }
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
        assert_eq!(mapping.department_of(360001), Some("billing"));
        assert_eq!(mapping.department_of(42), None);
    }
}
