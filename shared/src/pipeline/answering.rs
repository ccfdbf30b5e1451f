//! What a job is answered under: its policy (the built-in `policy-v1`, or a stored taxonomy)
//! and this build's prompts rendered for it. Each job carries the version of the policy it was
//! ingested under (docs/taxonomy.md). A process loads each policy once (a taxonomy never
//! changes under its version), has the prompt registry check the rendered texts, and keeps
//! them while it runs. A taxonomy that is missing or unreadable is never answered with another
//! policy: its jobs wait ([`taxonomy::Unusable`]).

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use deadpool_postgres::Pool;

use crate::{
    db,
    domain::{error::Result, versions::PromptVersion},
    pipeline::{prompt_registry, taxonomy},
    providers::{Policy, Prompt},
};

/// A policy and every prompt version of this build rendered for it.
#[derive(Debug)]
pub struct Answering {
    pub policy: Policy,
    pub prompts: HashMap<PromptVersion, Prompt>,
}

impl Answering {
    fn rendered(policy: Policy) -> Self {
        let prompts = Prompt::known_versions()
            .filter_map(|v| Some((v.parse().ok()?, Prompt::load(v, &policy)?)))
            .collect();
        Self { policy, prompts }
    }

    pub fn prompt(&self, version: &PromptVersion) -> Option<&Prompt> {
        self.prompts.get(version)
    }
}

/// The policies one process answers under, loaded as its jobs name them.
pub struct Policies {
    /// The built-in policy: always there, its prompts checked before the first claim.
    built_in: Arc<Answering>,
    stored: RwLock<HashMap<String, Arc<Answering>>>,
}

impl Policies {
    pub fn new() -> Self {
        let policy = Policy::load(crate::domain::key::BUILT_IN_POLICY).expect("built in");
        Self {
            built_in: Arc::new(Answering::rendered(policy)),
            stored: RwLock::default(),
        }
    }

    pub fn built_in(&self) -> &Arc<Answering> {
        &self.built_in
    }

    /// `version` if this process has it already (no database round trip), else `None`.
    pub fn loaded(&self, version: &str) -> Option<Arc<Answering>> {
        if version == self.built_in.policy.version {
            return Some(self.built_in.clone());
        }
        let stored = self.stored.read().unwrap_or_else(|e| e.into_inner());
        stored.get(version).cloned()
    }

    /// What a job under `version` is estimated with before its policy is loaded (the budget
    /// costs a claim before its jobs are processed): its own when this process has it, else
    /// the `configured` one's (loaded before the first claim), else the built-in one's. The
    /// call itself is made under its own, loaded first.
    pub fn for_estimate(&self, version: &str, configured: &str) -> Arc<Answering> {
        self.loaded(version)
            .or_else(|| self.loaded(configured))
            .unwrap_or_else(|| self.built_in.clone())
    }

    /// `version`, loaded from the database the first time: the taxonomy checked against its
    /// version, its rendered prompts against the registry.
    pub async fn get(
        &self,
        pool: &Pool,
        version: &str,
    ) -> Result<std::result::Result<Arc<Answering>, taxonomy::Unusable>> {
        if let Some(answering) = self.loaded(version) {
            return Ok(Ok(answering));
        }
        let loaded = taxonomy::policy(&db::client(pool).await?, version).await?;
        let answering = match loaded {
            Ok(policy) => Arc::new(Answering::rendered(policy)),
            Err(unusable) => return Ok(Err(unusable)),
        };
        prompt_registry::verify(pool, answering.prompts.values()).await?;
        let mut stored = self.stored.write().unwrap_or_else(|e| e.into_inner());
        Ok(Ok(stored
            .entry(version.to_string())
            .or_insert(answering)
            .clone()))
    }
}

impl Default for Policies {
    fn default() -> Self {
        Self::new()
    }
}
