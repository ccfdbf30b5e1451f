//! The fake over real loopback HTTP, with a bare HTTP/1.1 client so what is on the wire
//! (including a reset) is seen as is.

use std::{io, time::Duration};

use fake_provider::{classify, prefix_tokens, usage_for, Api, Behavior, FakeProvider};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

const WAIT: Duration = Duration::from_secs(5);

struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// One request on its own connection (`Connection: close`), read to the end.
async fn post(fake: &FakeProvider, path: &str, body: &Value) -> io::Result<Answer> {
    let body = body.to_string();
    let mut stream = TcpStream::connect(fake.addr()).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n\
         x-api-key: test-key\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let raw = String::from_utf8(raw).expect("the fake answers in UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete response");
    let status = head[9..12].parse().expect("a status line");
    Ok(Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    })
}

fn openai_request(ticket: &str) -> Value {
    json!({
        "model": "gpt-test",
        "messages": [
            {"role": "developer", "content": "prompt"},
            {"role": "user", "content": ticket},
        ],
    })
}

fn anthropic_request(ticket: &str) -> Value {
    json!({
        "model": "claude-test",
        "system": "prompt",
        "messages": [{"role": "user", "content": ticket}],
        "tool_choice": {"type": "tool", "name": "record_triage"},
    })
}

#[tokio::test]
async fn the_default_answer_is_the_classification_of_the_ticket_with_usage() {
    let fake = FakeProvider::start().await;
    let answer = post(&fake, "/v1/chat/completions", &openai_request("t1"))
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
    let completion: Value = serde_json::from_str(&answer.body).unwrap();
    let content = completion["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(content).unwrap(),
        classify("t1")
    );
    // The developer message is the prompt prefix; a first sight of it is not cached.
    assert_eq!(
        completion["usage"]["prompt_tokens"],
        usage_for("t1").input_tokens + prefix_tokens("prompt")
    );
    assert_eq!(
        completion["usage"]["prompt_tokens_details"]["cached_tokens"],
        0
    );

    let answer = post(&fake, "/v1/messages", &anthropic_request("t2"))
        .await
        .unwrap();
    let message: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["name"], "record_triage");
    assert_eq!(message["content"][0]["input"], classify("t2"));

    let calls = fake.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].api, calls[0].model.as_str(), calls[0].status),
        (Api::OpenAi, "gpt-test", 200)
    );
    assert_eq!(calls[1].api, Api::Anthropic);
    assert!(calls.iter().all(|c| c.billed));
    assert_eq!(calls[1].header("x-api-key"), Some("test-key"));
    assert_eq!(calls[1].body["model"], "claude-test");
}

#[tokio::test]
async fn outage_beats_the_queue_which_beats_rules_which_beat_the_default() {
    let fake = FakeProvider::start().await;
    fake.set_default(Behavior::Unauthorized);
    fake.when_contains("refund", Behavior::ModelNotFound);
    fake.push(Behavior::Status(500));
    fake.set_outage(Some(Behavior::Status(503)));
    let status = |ticket: &'static str| {
        let fake = &fake;
        async move {
            post(fake, "/v1/chat/completions", &openai_request(ticket))
                .await
                .unwrap()
                .status
        }
    };
    assert_eq!(status("refund please").await, 503);
    fake.set_outage(None);
    assert_eq!(status("refund please").await, 500);
    assert_eq!(status("refund please").await, 404);
    assert_eq!(status("hello").await, 401);
    assert!(fake.billed_calls().is_empty());
}

#[tokio::test]
async fn a_rate_limit_sends_retry_after_in_seconds() {
    let fake = FakeProvider::start().await;
    fake.push(Behavior::RateLimited {
        retry_after: Some(Duration::from_millis(1500)),
    });
    fake.push(Behavior::RateLimited {
        retry_after: Some(Duration::from_secs(2)),
    });
    let first = post(&fake, "/v1/messages", &anthropic_request("t"))
        .await
        .unwrap();
    assert_eq!(first.status, 429);
    assert!(first.head.contains("retry-after: 1.500"), "{}", first.head);
    let second = post(&fake, "/v1/chat/completions", &openai_request("t"))
        .await
        .unwrap();
    assert!(second.head.contains("retry-after: 2\r"), "{}", second.head);
}

#[tokio::test]
async fn a_reset_drops_the_connection_without_a_response() {
    let fake = FakeProvider::start().await;
    fake.push(Behavior::ResetConnection);
    let error = post(&fake, "/v1/chat/completions", &openai_request("t"))
        .await
        .err()
        .expect("no response");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
    let calls = fake.calls();
    assert_eq!((calls[0].status, calls[0].billed), (0, false));
}

#[tokio::test]
async fn a_hang_never_answers_but_is_recorded() {
    let fake = FakeProvider::start().await;
    fake.push(Behavior::Hang);
    let body = anthropic_request("t");
    let request = post(&fake, "/v1/messages", &body);
    assert!(tokio::time::timeout(Duration::from_millis(200), request)
        .await
        .is_err());
    let calls = fake.wait_for_calls(1, WAIT).await.unwrap();
    assert_eq!((calls[0].status, calls[0].billed), (0, false));
}

#[tokio::test]
async fn wait_for_calls_wakes_on_the_nth_call_and_reports_a_shortfall() {
    let fake = FakeProvider::start().await;
    let shortfall = fake
        .wait_for_calls(1, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert_eq!((shortfall.wanted, shortfall.seen), (1, 0));

    let (calls, _) = tokio::join!(fake.wait_for_calls(2, WAIT), async {
        for ticket in ["a", "a"] {
            post(&fake, "/v1/chat/completions", &openai_request(ticket))
                .await
                .unwrap();
        }
    });
    assert_eq!(calls.unwrap().len(), 2);
    assert_eq!(fake.billed_by_content().get("a"), Some(&2));
}

/// The ledger stays bounded however long the fake serves (issue "Round five", item 10: an
/// hour's soak grew it to 8.8 GB): past its bound it keeps the newest calls in full and only
/// counts the others, so the totals and the billed count per ticket text stay whole.
#[tokio::test]
async fn past_its_bound_the_ledger_keeps_the_newest_calls_and_counts_them_all() {
    let fake = FakeProvider::start().await;
    fake.keep_calls(4);
    fake.push(Behavior::Status(500));
    let tickets = ["a", "a", "b", "c", "d", "e", "f", "g", "h", "a"];
    for ticket in tickets {
        post(&fake, "/v1/chat/completions", &openai_request(ticket))
            .await
            .unwrap();
    }
    let kept: Vec<_> = fake.calls().into_iter().map(|c| c.ticket_text).collect();
    assert_eq!(kept, ["f", "g", "h", "a"], "the newest, in arrival order");
    assert_eq!(fake.billed_calls().len(), 4);
    assert_eq!(fake.call_count(), tickets.len());
    assert_eq!(
        fake.billed_count(),
        tickets.len() - 1,
        "the 500 is not billed"
    );
    let billed = fake.billed_by_content();
    assert_eq!(billed.get("a"), Some(&2), "one of three was the 500");
    assert_eq!(billed.len(), 8);
    let calls = fake.wait_for_calls(tickets.len(), WAIT).await.unwrap();
    assert_eq!(calls.len(), 4, "waits on the count, returns what is kept");
}

#[tokio::test]
async fn a_body_that_is_not_json_is_a_400_and_leaves_the_script_alone() {
    let fake = FakeProvider::start().await;
    fake.push(Behavior::Refusal);
    let answer = post(&fake, "/v1/chat/completions", &json!("not an object"))
        .await
        .unwrap();
    assert_eq!(answer.status, 400);
    let next = post(&fake, "/v1/chat/completions", &openai_request("t"))
        .await
        .unwrap();
    let completion: Value = serde_json::from_str(&next.body).unwrap();
    assert!(completion["choices"][0]["message"]["refusal"].is_string());
}

#[tokio::test]
async fn shutdown_closes_the_port() {
    let fake = FakeProvider::start().await;
    let addr = fake.addr();
    fake.shutdown().await;
    let error = TcpStream::connect(addr).await.expect_err("port closed");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused);
}
