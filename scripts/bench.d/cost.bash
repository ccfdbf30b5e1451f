# `scripts/bench cost` (sourced by scripts/bench, which provides fresh_db, add_jobs, start_bg,
# stop_bg, start_api, start_provider, worker_env, ratio and psql): issue 19's cost and lanes, side by side in
# one run. A reprocess of BENCH_COST_REPROCESS tickets (`triage reprocess` to triage-v4, no
# spread: all of it claimable at once) runs while a burst of new tickets is POSTed to
# `triage serve`; BENCH_COST_WORKERS `triage worker` processes against fake-provider limited
# to BENCH_COST_RPM requests/min (429 + Retry-After beyond it, x-ratelimit-* headers), the
# fleet's shared limit at 90% of it. Configurations, by environment only:
#   A  today: one lane (the reprocess's jobs moved into the interactive lane, so they and new
#      tickets share one FIFO queue, as before lanes existed), online, no prompt caching (the
#      fake caches regardless, so A's prices price cached input as input: the two-price form)
#   B  lanes (TRIAGE_BULK_SHARE default 0.5) + online   + caching prices
#   C  lanes + flex  (TRIAGE_BULK_TIER=flex)             + caching prices
#   D  lanes + batch (TRIAGE_BULK_TIER=batch)            + caching prices
#   alone: the burst without a reprocess (B's configuration): the p95 baseline.
# Prints per run: cost per ticket by prompt version (triage-v3: new tickets, triage-v4: the
# reprocess), lane and tier from `triage stats --json`; the reprocess's cost per ticket beside
# B's (online) and A's; new tickets' time to result (ticket created -> result computed) p50 and
# p95 beside the burst alone; billed calls beside unique contents.
# Targets (issue 19): bulk on batch <= 55% of online; p95 with the reprocess <= 1.2x alone;
# billed = unique in every run.
# Knobs: BENCH_COST_REPROCESS (20000; --quick 2000), BENCH_COST_BURST (500 over
# BENCH_COST_BURST_SECONDS 50; --quick 100 over 10), BENCH_COST_RPM (6000), BENCH_COST_WORKERS
# (4), BENCH_COST_CONCURRENCY (16 each), BENCH_COST_BATCH_DELAY_MS (the fake's batches end this
# long after creation: 20000; --quick 5000), BENCH_PROVIDER_MS (latency, default 50).
# shellcheck shell=bash
# SC2154/SC2034: variables set and read by scripts/bench; SC2059: the row formats are printf's.
# shellcheck disable=SC2154,SC2034,SC2059

cost_reprocess=${BENCH_COST_REPROCESS:-$([ -n "$quick" ] && echo 2000 || echo 20000)}
cost_burst=${BENCH_COST_BURST:-$([ -n "$quick" ] && echo 100 || echo 500)}
cost_burst_secs=${BENCH_COST_BURST_SECONDS:-$([ -n "$quick" ] && echo 10 || echo 50)}
cost_batch_delay_ms=${BENCH_COST_BATCH_DELAY_MS:-$([ -n "$quick" ] && echo 5000 || echo 20000)}
cost_rpm=${BENCH_COST_RPM:-6000}
cost_workers=${BENCH_COST_WORKERS:-4}
cost_concurrency=${BENCH_COST_CONCURRENCY:-16}
# Published-style prices (OpenAI's GPT-5 list: US$ per million tokens), batch and flex at half.
cost_prices="$TRIAGE_MODEL=1.25/0.125/10,batch=0.5"
cost_prices_uncached="$TRIAGE_MODEL=1.25/10,batch=0.5"
# Flex answers 200 ms later than online, and every 20th flex call is "resource unavailable".
cost_flex_delay_ms=200 cost_flex_every=20
# The new tickets start once the reprocess is under way.
cost_burst_after=3

# Batch lines the provider billed, by its own account (before it is stopped): the completed
# lines of every batch in OpenAI's list, so a batch our ledger lost sight of still counts.
provider_batch_lines() {
  python3 - "$provider_url" <<'PY'
import json, sys, urllib.request
url, after, total = sys.argv[1], None, 0
while True:
    query = "?limit=100" + (f"&after={after}" if after else "")
    request = urllib.request.Request(f"{url}/batches{query}", headers={"Authorization": "Bearer bench"})
    page = json.load(urllib.request.urlopen(request, timeout=30))
    total += sum(b["request_counts"]["completed"] for b in page["data"])
    if not page["has_more"]:
        break
    after = page["last_id"]
print(total)
PY
}

# The environment of configuration RUN (A, B, C, D or alone), as NAME=VALUE words. Short
# invocations (the batch tier tends its batches at the start of each) fit a call's timeout.
cost_env() {
  local prices=$cost_prices tier=online
  case "$1" in
    A) prices=$cost_prices_uncached ;;
    C) tier=flex ;;
    D) tier="batch" ;;
  esac
  echo TRIAGE_PRICES="$prices" TRIAGE_BULK_TIER="$tier" \
    TRIAGE_PROVIDER_RPM="$(( cost_rpm * 9 / 10 ))" TRIAGE_INVOCATION_SECONDS=15 \
    TRIAGE_CALL_TIMEOUT_SECONDS=10
}

# One configuration: prints its summary row into $out/cost-RUN.row and its cost groups into
# $out/cost-RUN.groups ("version lane tier calls evaluated usd_per_ticket" lines).
cost_run() {
  local run=$1 url reprocess=$cost_reprocess worker_pids=() i pid poster_pid started pending
  local deadline drained="" provider_lines
  [ "$run" != alone ] || reprocess=0
  url=$(fresh_db "bench_cost_${run,,}")
  if [ "$reprocess" -gt 0 ]; then
    # Tickets evaluated under triage-v3 before the run, then queued again under triage-v4.
    add_jobs "$url" "$reprocess" "done" >/dev/null
    DATABASE_URL=$url "$triage" reprocess --since 1d --prompt-version triage-v4 --spread 0s \
      --confirm >"$out/cost-reprocess-$run.log" 2>&1 \
      || { cat "$out/cost-reprocess-$run.log" >&2; die "reprocess ($run) failed"; }
    # Today's one lane: the reprocess's jobs compete with new tickets in one queue, oldest first.
    [ "$run" != A ] || psql "$url" -c "UPDATE evaluation_outbox SET lane = 'interactive'" >/dev/null
  fi
  start_provider "fake-provider-cost-$run" --delay-ms "$provider_ms" --limit-rpm "$cost_rpm" \
    --batch-delay-ms "$cost_batch_delay_ms" --flex-delay-ms "$cost_flex_delay_ms" \
    --flex-unavailable-every "$cost_flex_every"
  start_api "$url"
  started=$(date +%s.%N)
  for i in $(seq "$cost_workers"); do
    # unquoted: worker_env and cost_env print NAME=VALUE words for env
    # shellcheck disable=SC2046
    start_bg "worker-cost-$run-$i" env $(worker_env "$url" "$cost_concurrency") $(cost_env "$run") \
      "$triage" worker
    worker_pids+=("$started_pid")
  done
  [ "$reprocess" -eq 0 ] || sleep "$cost_burst_after"
  start_bg "burst-cost-$run" python3 scripts/bench.d/post-burst.py "$api_url" "$cost_burst" \
    "$cost_burst_secs" "$run-$(date +%s%N)"
  poster_pid=$started_pid
  # Until the burst is in and every job is finished: at the shared limit the reprocess takes
  # reprocess / (0.9 × RPM / 60) s; four times that, and two minutes, before giving up.
  deadline=$(awk -v n="$(( reprocess + cost_burst ))" -v r="$cost_rpm" \
    'BEGIN { printf "%d", 4 * n / (0.9 * r / 60) + 120 }')
  for i in $(seq $(( deadline * 2 ))); do
    for pid in "${worker_pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || die "a worker of run $run exited (see $out/worker-cost-$run-*.log)"
    done
    pending=$(psql "$url" -tAc "SELECT count(*) FROM evaluation_outbox WHERE status IN ('pending', 'processing')")
    if [ "$pending" = 0 ] && ! kill -0 "$poster_pid" 2>/dev/null; then
      drained=$(awk -v s="$started" -v n="$(date +%s.%N)" 'BEGIN { printf "%.0f", n - s }')
      break
    fi
    sleep 0.5
  done
  [ -n "$drained" ] || note "cost $run: $pending jobs left after ${deadline} s"
  stop_bg "$poster_pid"
  for i in "${worker_pids[@]}"; do stop_bg "$i"; done
  stop_bg "$api_pid"
  provider_lines=$(provider_batch_lines) || die "listing the provider's batches ($run) failed"
  stop_bg "$provider_pid"

  local posted p50 p95 billed billed_keys unique dead refused ledger_lines
  posted=$(sed -n 's/^posted=\([0-9]*\).*/\1/p' "$out/burst-cost-$run.log")
  # New tickets: those the API filed (under triage-v3) with a result; created -> computed.
  read -r p50 p95 < <(psql "$url" -tA -F' ' -c "
    SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY s)::numeric, 2),
           round(percentile_cont(0.95) WITHIN GROUP (ORDER BY s)::numeric, 2)
    FROM (SELECT extract(epoch FROM r.computed_at - t.created_at) AS s
          FROM ticket t
          JOIN ticket_evaluation te ON te.ticket_id = t.id AND te.prompt_version = 'triage-v3'
          JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key) new")
  # Billed calls against the contents evaluated (one result each), the keys billed more than
  # once, dead letters and the provider's 429s; batch lines billed by the ledger's account
  # beside the provider's.
  read -r billed billed_keys unique dead refused ledger_lines < <(psql "$url" -tA -F' ' -c "
    SELECT count(*) FILTER (WHERE billed), count(DISTINCT idempotency_key) FILTER (WHERE billed),
           (SELECT count(*) FROM evaluation_result),
           (SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'),
           count(*) FILTER (WHERE outcome = 'rate_limited'),
           count(*) FILTER (WHERE billed AND tier = 'batch')
    FROM provider_call")
  DATABASE_URL=$url "$triage" stats --json >"$out/cost-stats-$run.json" 2>"$out/cost-stats-$run.log" \
    || { cat "$out/cost-stats-$run.log" >&2; die "triage stats ($run) failed"; }
  python3 -c '
import json, sys
for g in json.load(open(sys.argv[1]))["cost_per_task"]:
    print(g["prompt_version"], g["lane"], g["tier"], g["calls"], g["evaluated"], g["cost_usd"])
' "$out/cost-stats-$run.json" >"$out/cost-$run.groups"
  echo "$reprocess ${drained:--} ${posted:-0} ${p50:--} ${p95:--} $billed $billed_keys $unique $dead" \
    "$refused $ledger_lines $provider_lines" >"$out/cost-$run.row"
}

# USD per ticket of the groups of VERSION in RUN (all its lanes and tiers): "-" when none.
cost_per_ticket() {
  awk -v v="$2" '$1 == v { c += $6; n += $5 } END { if (n > 0) printf "%.7f", c / n; else print "-" }' \
    "$out/cost-$1.groups"
}

# A reprocess's cost per ticket over another's; "-" without one.
bulk_ratio() {
  if [ "$1" = - ] || [ "$2" = - ]; then echo -; else ratio "$1" "$2"; fi
}

bench_cost() {
  local run row groups base_p95 label reprocess drained posted p50 p95 billed billed_keys
  local unique dead refused ledger_lines provider_lines lines bulk bulk_b bulk_a verdict violations=0
  echo
  echo "== cost: a reprocess of $cost_reprocess tickets while $cost_burst new ones arrive over" \
    "${cost_burst_secs} s; $cost_workers × triage worker (C=$cost_concurrency), provider limit" \
    "$cost_rpm/min (shared limit 90%), latency ${provider_ms} ms; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "   prices (USD per Mtok input/cached input/output, batch and flex factor): $cost_prices;"
  echo "   A: $cost_prices_uncached (cached input priced as input); batches end after" \
    "${cost_batch_delay_ms} ms, flex answers ${cost_flex_delay_ms} ms later, every ${cost_flex_every}th flex call a 429"
  rm -f "$out"/cost-*
  for run in alone A B C D; do
    note "cost: run $run"
    cost_run "$run"
  done
  read -r _ _ _ _ base_p95 _ <"$out/cost-alone.row"
  bulk_b=$(cost_per_ticket B triage-v4)
  bulk_a=$(cost_per_ticket A triage-v4)
  row='  %-28s %6s %8s %6s %15s %10s %10s %11s %7s %7s %13s %13s %4s %5s\n'
  printf "$row" "run" "bulk" "drain s" "new" "new p50/p95 s" "p95/alone" "new \$/tkt" "bulk \$/tkt" \
    "bulk/B" "bulk/A" "billed/unique" "batch: prov." "dead" "429s"
  for run in alone A B C D; do
    read -r reprocess drained posted p50 p95 billed billed_keys unique dead refused ledger_lines \
      provider_lines <"$out/cost-$run.row"
    bulk=$(cost_per_ticket "$run" triage-v4)
    verdict="$billed/$unique" lines="$provider_lines/$ledger_lines"
    if [ "$billed" != "$unique" ] || [ "$billed" != "$billed_keys" ]; then
      verdict="$verdict !!"
      violations=$((violations + 1))
    fi
    if [ "$provider_lines" != "$ledger_lines" ]; then
      lines="$lines !!"
      violations=$((violations + 1))
    fi
    case "$run" in
      alone) label="alone: the burst, no reprocess" ;;
      A) label="A today: 1 lane, online" ;;
      B) label="B lanes + online + cache" ;;
      C) label="C lanes + flex + cache" ;;
      D) label="D lanes + batch + cache" ;;
    esac
    printf "$row" "$label" "$reprocess" "$drained" "$posted" "$p50/$p95" \
      "$(awk -v a="$p95" -v b="$base_p95" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')" \
      "$(cost_per_ticket "$run" triage-v3)" "$bulk" \
      "$(bulk_ratio "$bulk" "$bulk_b")" "$(bulk_ratio "$bulk" "$bulk_a")" "$verdict" "$lines" \
      "$dead" "$refused"
  done
  echo "  cost per ticket by version (triage-v3: new tickets, triage-v4: the reprocess), lane and tier"
  echo "  (triage stats --json, cost_per_task):"
  groups='    %-6s %-10s %-12s %-7s %8s %10s %14s\n'
  printf "$groups" run version lane tier calls evaluated "USD/ticket"
  for run in A B C D; do
    while read -r version lane tier calls evaluated usd; do
      printf "$groups" "$run" "$version" "$lane" "$tier" "$calls" "$evaluated" \
        "$(awk -v c="$usd" -v n="$evaluated" 'BEGIN { if (n > 0) printf "%.7f", c / n; else print "-" }')"
    done <"$out/cost-$run.groups"
  done
  echo "  new: tickets POSTed (time to result: ticket created -> result computed); bulk \$/tkt: every"
  echo "  reprocess call's cost (retries, 429s, lines back online) over the tickets it evaluated."
  echo "  batch: prov.: batch lines the provider billed (its list of batches) / the ledger's billed"
  echo "  batch lines. Targets: bulk/B (batch, D) <= 55%; p95/alone (B-D) <= 1.2x; billed = unique"
  echo "  in every run, and the provider's batch lines = the ledger's."
  if [ "$violations" -gt 0 ]; then
    echo "  !! $violations VIOLATION(S) marked !!: a content paid for twice, a result without its billed"
    echo "  call, or batch lines the provider billed that the ledger does not show"
  fi
}
