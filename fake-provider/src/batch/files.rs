//! OpenAI's file uploads as batches use them: a `multipart/form-data` body with a `purpose`
//! and the file, read by hand, and the files it stores (downloaded and deleted in `batch`).

use std::collections::HashMap;

use bytes::Bytes;
use hyper::HeaderMap;
use serde_json::json;

use super::{describe::unix_now, ok, reject, Answer, Batches};
use crate::{server::header_value, Api};

pub(super) struct File {
    pub(super) filename: String,
    pub(super) purpose: String,
    pub(super) content: Vec<u8>,
}

/// `POST /v1/files`: a multipart form with `purpose` and `file`.
pub(super) fn upload(
    batches: &mut Batches,
    headers: &HeaderMap,
    body: &Bytes,
    strict: bool,
) -> Answer {
    let Some(mut form) = multipart(headers, body) else {
        return reject(Api::OpenAi, "file", "expected a multipart/form-data body");
    };
    let Some((_, purpose)) = form.remove("purpose") else {
        return reject(Api::OpenAi, "purpose", "'purpose' is a required property");
    };
    let purpose = String::from_utf8_lossy(&purpose).into_owned();
    const PURPOSES: &[&str] = &[
        "assistants",
        "batch",
        "fine-tune",
        "vision",
        "user_data",
        "evals",
    ];
    if strict && !PURPOSES.contains(&purpose.as_str()) {
        return reject(
            Api::OpenAi,
            "purpose",
            &format!("'{purpose}' is not one of {PURPOSES:?}"),
        );
    }
    let Some((Some(filename), content)) = form.remove("file") else {
        return reject(Api::OpenAi, "file", "'file' is a required property");
    };
    let id = batches.next_id("file-");
    let answer = json!({
        "id": id,
        "object": "file",
        "bytes": content.len(),
        "created_at": unix_now(),
        "filename": filename,
        "purpose": purpose,
    });
    batches.files.insert(
        id,
        File {
            filename,
            purpose,
            content,
        },
    );
    ok(answer)
}

/// One part of a form: its file name, if it is a file, and its content.
type Part = (Option<String>, Vec<u8>);

/// The parts of a `multipart/form-data` body by name.
fn multipart(headers: &HeaderMap, body: &[u8]) -> Option<HashMap<String, Part>> {
    let content_type = header_value(headers, "content-type")?;
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))?
        .trim_matches('"');
    let delimiter = format!("--{boundary}");
    let mut parts = HashMap::new();
    for chunk in split(body, delimiter.as_bytes()).into_iter().skip(1) {
        if chunk.starts_with(b"--") {
            break;
        }
        let chunk = chunk.strip_prefix(b"\r\n")?;
        let head_end = find_bytes(chunk, b"\r\n\r\n")?;
        let head = std::str::from_utf8(&chunk[..head_end]).ok()?;
        let content = &chunk[head_end + 4..];
        let content = content.strip_suffix(b"\r\n").unwrap_or(content);
        let disposition = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition"))?;
        let param = |name: &str| {
            disposition.split(';').find_map(|p| {
                p.trim()
                    .strip_prefix(&format!("{name}=\""))
                    .map(|v| v.trim_end_matches('"').to_owned())
            })
        };
        parts.insert(param("name")?, (param("filename"), content.to_vec()));
    }
    Some(parts)
}

pub(super) fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

pub(super) fn split<'a>(mut haystack: &'a [u8], needle: &[u8]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    while let Some(at) = find_bytes(haystack, needle) {
        pieces.push(&haystack[..at]);
        haystack = &haystack[at + needle.len()..];
    }
    pieces.push(haystack);
    pieces
}
