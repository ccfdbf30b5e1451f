//! `triage taxonomy add|list|show` (and the ops payload `{"op": "taxonomy"}`): the desk's
//! taxonomies, stored by their content's version (`pipeline::taxonomy`). The CLI reads the file;
//! the ops Lambda is given the taxonomy itself (it reads no local files, `checks`).

use std::io::Read;

use deadpool_postgres::Pool;
use serde::Serialize;

use super::{Outcome, TaxonomyAction, TaxonomyFile};
use crate::{
    db,
    domain::{
        error::{InvalidRequest, Result},
        taxonomy::{Taxonomy, MAX_FILE_BYTES},
    },
    pipeline::taxonomy,
    providers::Policy,
};

/// What `triage taxonomy show` answers: the taxonomy as stored, under its version.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shown {
    pub policy_version: String,
    #[serde(flatten)]
    pub taxonomy: Taxonomy,
}

pub(super) async fn run(pool: &Pool, action: TaxonomyAction) -> Result<Outcome> {
    let client = db::client(pool).await?;
    Ok(match action {
        TaxonomyAction::Add { file } => {
            let parsed = Taxonomy::parse(&read(&file)?)?;
            Outcome::TaxonomyAdded(taxonomy::add(&client, &parsed).await?)
        }
        TaxonomyAction::List => Outcome::Taxonomies(taxonomy::list(&client).await?),
        TaxonomyAction::Show { version } => {
            if Policy::load(&version).is_some() {
                let built_in = format!(
                    "{version:?} is a built-in policy (prompts/{version}.json), not a stored taxonomy"
                );
                return Err(InvalidRequest::new("version", built_in).into());
            }
            match taxonomy::load(&client, &version).await? {
                Ok(taxonomy) => Outcome::Taxonomy(Box::new(Shown {
                    policy_version: version,
                    taxonomy,
                })),
                Err(unusable) => {
                    return Err(InvalidRequest::new("version", unusable.to_string()).into())
                }
            }
        }
    })
}

/// The file's bytes, at most one more than a taxonomy may have (the parse names the excess).
fn read(file: &TaxonomyFile) -> Result<Vec<u8>, InvalidRequest> {
    match file {
        TaxonomyFile::Inline(value) => Ok(value.to_string().into_bytes()),
        TaxonomyFile::Path(path) => {
            let unreadable =
                |e: std::io::Error| InvalidRequest::new("file", format!("{}: {e}", path.display()));
            let mut bytes = Vec::new();
            std::fs::File::open(path)
                .map_err(unreadable)?
                .take(MAX_FILE_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(unreadable)?;
            Ok(bytes)
        }
    }
}
