//! EventBridge as the delivery bus (`pipeline::delivery::bus`): PutEvents with the client
//! every AWS integration here shares (`AWS_ENDPOINT_URL_EVENTBRIDGE` or `AWS_ENDPOINT_URL`
//! redirect it, as tests do to moto).

use std::sync::Arc;

use aws_sdk_eventbridge::{error::DisplayErrorContext, types::PutEventsRequestEntry, Client};
use deadpool_postgres::Pool;
use futures::future::BoxFuture;

use super::sdk;
use crate::{
    config::Config,
    domain::error::{ConfigError, Result},
    pipeline::delivery::{
        bus::{self, Bus, BusEntry},
        decision::Attempt,
        Deliverer,
    },
};

#[derive(Debug, Clone)]
pub struct EventBridge {
    client: Client,
}

impl EventBridge {
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Self, ConfigError> {
        let settings = sdk::settings(get, "EVENTBRIDGE", "to put events on TRIAGE_EVENT_BUS")?;
        Ok(Self {
            client: Client::new(&settings),
        })
    }

    pub fn from_env() -> std::result::Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }
}

impl Bus for EventBridge {
    fn put<'a>(&'a self, bus: &'a str, entries: &'a [BusEntry]) -> BoxFuture<'a, Vec<Attempt>> {
        Box::pin(async move {
            let request: Vec<PutEventsRequestEntry> = entries
                .iter()
                .map(|entry| {
                    PutEventsRequestEntry::builder()
                        .event_bus_name(bus)
                        .source(bus::SOURCE)
                        .detail_type(bus::DETAIL_TYPE)
                        .detail(&entry.detail)
                        .build()
                })
                .collect();
            match self
                .client
                .put_events()
                .set_entries(Some(request))
                .send()
                .await
            {
                Ok(answer) => {
                    let errors: Vec<Option<String>> = answer
                        .entries()
                        .iter()
                        .map(|e| e.error_code().map(str::to_string))
                        .collect();
                    bus::per_entry(entries.len(), &errors)
                }
                Err(error) => {
                    let why = format!("PutEvents failed: {}", DisplayErrorContext(&error));
                    entries
                        .iter()
                        .map(|_| Attempt::Failed(why.clone()))
                        .collect()
                }
            }
        })
    }
}

/// The deliverer as the binaries run it: with EventBridge when `TRIAGE_EVENT_BUS` is set.
pub fn deliverer(pool: Pool, config: Arc<Config>) -> Result<Deliverer> {
    let with_bus = config.delivery.event_bus.is_some();
    let deliverer = Deliverer::new(pool, config)?;
    Ok(if with_bus {
        deliverer.with_bus(Arc::new(EventBridge::from_env()?))
    } else {
        deliverer
    })
}
