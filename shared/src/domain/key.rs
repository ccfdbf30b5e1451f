//! The content-derived idempotency key (article step 2, SPEC rule 2).
//!
//! The key must match the article's Python byte for byte:
//! `sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]`
//! over `{subject: strip(subject), message: strip(message), prompt, model}`. Ticket id, time and
//! randomness never enter it, so the same content under the same versions always meets its
//! earlier evaluation.

use std::fmt;

use sha2::{Digest, Sha256};

/// 32 lowercase hex characters; the primary key of `evaluation_result`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

/// The built-in policy, the only one the key does not name: its keys are the article's,
/// byte for byte (the seed's vectors), so existing results keep meeting their tickets.
pub const BUILT_IN_POLICY: &str = "policy-v1";

impl IdempotencyKey {
    /// The key under the built-in policy: `{message, model, prompt, subject}`.
    pub fn derive(subject: &str, message: &str, prompt_version: &str, model_version: &str) -> Self {
        Self::derive_under(
            subject,
            message,
            prompt_version,
            model_version,
            BUILT_IN_POLICY,
        )
    }

    /// The key under `policy_version`: a stored taxonomy adds a fifth field, `policy`, so two
    /// taxonomies never share a cached answer under the same prompt and model
    /// (docs/taxonomy.md, "The key").
    pub fn derive_under(
        subject: &str,
        message: &str,
        prompt_version: &str,
        model_version: &str,
        policy_version: &str,
    ) -> Self {
        let policy = (policy_version != BUILT_IN_POLICY).then_some(policy_version);
        // Keys in sorted order, as `sort_keys=True` emits them.
        let fields = [
            Some(("message", python_strip(message))),
            Some(("model", model_version)),
            policy.map(|policy| ("policy", policy)),
            Some(("prompt", prompt_version)),
            Some(("subject", python_strip(subject))),
        ];
        let mut blob = String::with_capacity(96 + subject.len() + message.len());
        blob.push('{');
        for (i, (name, value)) in fields.iter().flatten().enumerate() {
            if i > 0 {
                blob.push_str(", ");
            }
            push_python_json_str(&mut blob, name);
            blob.push_str(": ");
            push_python_json_str(&mut blob, value);
        }
        blob.push('}');
        let digest = Sha256::digest(blob.as_bytes());
        Self(hex::encode(&digest[..16]))
    }

    /// Wraps a key read back from the database, where only derived keys are ever written.
    pub fn from_stored(key: String) -> Self {
        Self(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The article's per-key jitter seed: `int(key[:4], 16)`.
    /// The key of the article's printer-on-fire ticket, whose jitter seed is
    /// `int("a525", 16) % 30 = 7`: the fixture of the retry-schedule tests.
    #[cfg(test)]
    pub(crate) fn example() -> Self {
        Self::derive(
            "Printer on fire",
            "The printer on floor 3 is literally on fire.",
            "triage-v3",
            "gpt-6-luna@medium",
        )
    }

    pub fn jitter_seed(&self) -> u32 {
        u32::from_str_radix(&self.0[..4], 16).unwrap_or(0)
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Python's `str.isspace()` set, which is Unicode `White_Space` plus U+001C..U+001F
/// (the information separators Python counts as whitespace and Rust does not).
fn is_python_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn python_strip(s: &str) -> &str {
    s.trim_matches(is_python_whitespace)
}

/// A JSON string as Python's `json.dumps(..., ensure_ascii=False)` writes it: only `"`, `\`
/// and C0 controls are escaped; everything else (DEL and non-ASCII included) is literal.
fn push_python_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if c < '\u{20}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    struct Vector {
        subject: String,
        message: String,
        prompt_version: String,
        model_version: String,
        key: String,
    }

    #[test]
    fn reproduces_every_shared_key_vector() {
        let raw = include_str!("../../tests/data/key-vectors.json");
        let vectors: Vec<Vector> = serde_json::from_str(raw).unwrap();
        assert!(vectors.len() >= 12);
        for v in vectors {
            let key =
                IdempotencyKey::derive(&v.subject, &v.message, &v.prompt_version, &v.model_version);
            assert_eq!(key.as_str(), v.key, "subject {:?}", v.subject);
        }
    }

    /// `json.dumps({..., "policy": "bank-3f2a9c1b0d4e"}, sort_keys=True, ensure_ascii=False)`,
    /// hashed as the article does; without the field, the built-in policy's key.
    #[test]
    fn a_stored_taxonomy_is_named_in_the_key_and_the_built_in_policy_is_not() {
        let (subject, message) = (
            "Printer on fire",
            "The printer on floor 3 is literally on fire.",
        );
        let under = |policy| {
            IdempotencyKey::derive_under(subject, message, "triage-v6", "gpt-6-luna@medium", policy)
        };
        assert_eq!(
            under("bank-3f2a9c1b0d4e").as_str(),
            "944b5c7cf7273447dbb5ab582f7f05fa"
        );
        assert_eq!(
            under(BUILT_IN_POLICY).as_str(),
            "bacc0ab7851952279203a9e74892b395"
        );
        assert_eq!(
            under(BUILT_IN_POLICY),
            IdempotencyKey::derive(subject, message, "triage-v6", "gpt-6-luna@medium")
        );
        assert_ne!(under("bank-3f2a9c1b0d4e"), under("shop-0123456789ab"));
    }

    #[test]
    fn python_whitespace_includes_information_separators() {
        assert_eq!(python_strip("\u{1c}\u{1f} a \u{3000}\u{85}"), "a");
        assert_eq!(
            python_strip("\u{200b}a"),
            "\u{200b}a",
            "zero-width space is not whitespace"
        );
    }

    #[test]
    fn controls_are_escaped_like_python() {
        let mut out = String::new();
        push_python_json_str(&mut out, "\u{1}\u{7f}é\"\\\u{8}\u{c}");
        assert_eq!(out, "\"\\u0001\u{7f}é\\\"\\\\\\b\\f\"");
    }

    const WS: &[char] = &[
        ' ', '\t', '\n', '\r', '\u{0b}', '\u{0c}', '\u{1c}', '\u{1f}', '\u{85}', '\u{a0}',
        '\u{2003}', '\u{3000}',
    ];

    fn padding() -> impl Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(WS), 0..4)
            .prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        #[test]
        fn surrounding_whitespace_never_changes_the_key(
            subject in "\\PC{0,40}", message in "\\PC{0,200}", pre in padding(), post in padding()
        ) {
            let plain = IdempotencyKey::derive(&subject, &message, "triage-v3", "gpt-6-luna@medium");
            let padded = IdempotencyKey::derive(
                &format!("{pre}{subject}{post}"), &format!("{post}{message}{pre}"), "triage-v3", "gpt-6-luna@medium");
            prop_assert_eq!(plain, padded);
        }

        #[test]
        fn prompt_or_model_version_always_changes_the_key(
            subject in "\\PC{0,40}", message in "\\PC{0,200}", a in "[a-z0-9@.-]{1,12}", b in "[a-z0-9@.-]{1,12}"
        ) {
            prop_assume!(a != b);
            let base = IdempotencyKey::derive(&subject, &message, &a, "m@x");
            prop_assert_ne!(&base, &IdempotencyKey::derive(&subject, &message, &b, "m@x"));
            let base = IdempotencyKey::derive(&subject, &message, "p", &a);
            prop_assert_ne!(&base, &IdempotencyKey::derive(&subject, &message, "p", &b));
        }

        #[test]
        fn key_is_32_lowercase_hex(subject in "\\PC{0,40}", message in "\\PC{0,40}") {
            let key = IdempotencyKey::derive(&subject, &message, "p", "m");
            prop_assert_eq!(key.as_str().len(), 32);
            prop_assert!(key.as_str().chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        }
    }
}
