//! One execution environment, as every function's Lambda-level tests set it up: a Runtime
//! API emulator, and the function binary started against it.

use std::{ffi::OsStr, path::Path};

use super::{Function, RuntimeApi};

pub struct Container {
    pub runtime: RuntimeApi,
    pub function: Function,
}

impl Container {
    /// A fresh Runtime API, and `binary` started against it with `env` (see
    /// [`Function::spawn`]).
    pub async fn start<K, V>(
        binary: impl AsRef<Path>,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Self
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let runtime = RuntimeApi::start().await;
        let function = Function::spawn(binary, &runtime, env);
        Container { runtime, function }
    }
}

/// A lookup of `name` in `env`, as `Config::from_lookup` and the AWS clients take one: the
/// function's environment read by the test as the function reads it.
pub fn lookup<K: AsRef<str>>(env: &[(K, String)]) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| {
        env.iter()
            .find(|(key, _)| key.as_ref() == name)
            .map(|(_, value)| value.clone())
    }
}
