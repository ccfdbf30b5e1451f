# `scripts/bench scale` (sourced by scripts/bench, which provides fresh_db, add_jobs, start_bg,
# stop_bg, start_provider, worker_env and psql): a burst plus steady arrivals drained
# by several `triage worker` processes against fake-provider enforcing a request limit, once
# with the shared limit at 90% of the provider's and once without it (the negative control:
# no TRIAGE_PROVIDER_RPM, and the provider withholds its x-ratelimit-* headers, so only
# Retry-After slows the fleet). Prints drain time beside jobs / allowed rate, 429s, dead
# letters, billed vs unique; plots queue depth and calls/s of both runs to docs/scale.png.
# Knobs: BENCH_SCALE_RPM (the provider's limit, default 6000), BENCH_SCALE_WORKERS (4),
# BENCH_SCALE_CONCURRENCY (16 each), BENCH_SCALE_ARRIVALS (steady jobs/s, default 5),
# BENCH_PROVIDER_MS (latency, default 50). Burst: 20,000 jobs (--quick: 2,000).

scale_rpm=${BENCH_SCALE_RPM:-6000}
scale_workers=${BENCH_SCALE_WORKERS:-4}
scale_concurrency=${BENCH_SCALE_CONCURRENCY:-16}
scale_arrivals=${BENCH_SCALE_ARRIVALS:-5}
scale_burst=20000
[ -z "$quick" ] || scale_burst=2000

# SECS seconds of $scale_arrivals new jobs a second into URL (run in the background), by the
# clock: a busy machine delays an insert, never the end of the arrivals.
arrive_steadily() {
  local url=$1 secs=$2 started added=0 due
  started=$(date +%s.%N)
  while :; do
    due=$(awk -v s="$started" -v n="$(date +%s.%N)" -v r="$scale_arrivals" -v t="$secs" \
      'BEGIN { e = n - s; if (e > t) e = t; printf "%d", e * r }')
    if [ "$due" -gt "$added" ]; then
      add_jobs "$url" $(( due - added )) pending
      added=$due
    fi
    [ "$due" -lt $(( secs * scale_arrivals )) ] || break
    sleep 0.2
  done
}

# One run: MODE is "limiter" or "control". Prints its summary row; appends its per-second
# series to $out/scale-series.csv.
scale_run() {
  local mode=$1 url limit_env=() provider_flags=() worker_pids=() i started now depth
  local limit=$(( scale_rpm * 9 / 10 )) arrival_pid sampler_pid arrival_secs deadline
  url=$(fresh_db "bench_scale_$mode")
  add_jobs "$url" "$scale_burst" pending
  if [ "$mode" = limiter ]; then
    limit_env=(TRIAGE_PROVIDER_RPM="$limit")
  else
    provider_flags=(--withhold-limit-headers)
  fi
  start_provider "fake-provider-scale-$mode" --delay-ms "$provider_ms" --limit-rpm "$scale_rpm" \
    "${provider_flags[@]}"
  # Steady arrivals for as long as the burst takes at the shared limit, less what they add.
  arrival_secs=$(awk -v b="$scale_burst" -v r="$limit" -v a="$scale_arrivals" \
    'BEGIN { printf "%d", b / (r / 60 - a) + 1 }')
  started=$(date +%s.%N)
  for i in $(seq "$scale_workers"); do
    # unquoted: worker_env prints NAME=VALUE words for env
    start_bg "worker-scale-$mode-$i" env $(worker_env "$url" "$scale_concurrency") \
      "${limit_env[@]}" "$triage" worker
    worker_pids+=("$started_pid")
  done
  start_bg "arrivals-scale-$mode" arrive_steadily "$url" "$arrival_secs"
  arrival_pid=$started_pid
  # Queue depth once a second, until the arrivals are over and nothing is left.
  deadline=$(awk -v s="$arrival_secs" 'BEGIN { printf "%d", s * 4 + 120 }')
  : >"$out/scale-depth-$mode.csv"
  for i in $(seq "$deadline"); do
    depth=$(psql "$url" -tAc \
      "SELECT count(*) FROM evaluation_outbox WHERE status IN ('pending', 'processing')")
    now=$(date +%s.%N)
    echo "$(awk -v s="$started" -v n="$now" 'BEGIN { printf "%.1f", n - s }'),$depth" \
      >>"$out/scale-depth-$mode.csv"
    if [ "$depth" = 0 ] && ! kill -0 "$arrival_pid" 2>/dev/null; then break; fi
    sleep 1
  done
  local drained
  drained=$(awk -v s="$started" -v n="$now" 'BEGIN { printf "%.1f", n - s }')
  [ "$depth" = 0 ] || note "scale $mode: $depth jobs left after ${drained} s"
  stop_bg "$arrival_pid"
  for i in "${worker_pids[@]}"; do stop_bg "$i"; done
  stop_bg "$provider_pid"

  local jobs calls refused dead billed unique
  read -r jobs calls refused dead billed unique < <(psql "$url" -tA -F' ' -c "
    SELECT (SELECT count(*) FROM evaluation_outbox),
           count(*), count(*) FILTER (WHERE outcome = 'rate_limited'),
           (SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'),
           count(*) FILTER (WHERE billed), count(DISTINCT idempotency_key) FILTER (WHERE billed)
    FROM provider_call")
  # Calls and 429s per second, from the ledger, joined to the sampled depth.
  psql "$url" -tA -F, -c "
    SELECT floor(extract(epoch FROM started_at) - $started)::int,
           count(*) FILTER (WHERE outcome <> 'rate_limited'),
           count(*) FILTER (WHERE outcome = 'rate_limited')
    FROM provider_call GROUP BY 1 ORDER BY 1" >"$out/scale-calls-$mode.csv"
  awk -F, -v run="$mode" 'NR == FNR { calls[$1] = $2; refused[$1] = $3; next }
    { s = int($1); printf "%s,%s,%s,%d,%d\n", run, $1, $2, calls[s], refused[s] }' \
    "$out/scale-calls-$mode.csv" "$out/scale-depth-$mode.csv" >>"$out/scale-series.csv"

  local emptied ideal_limit ideal_provider
  # When the burst was gone: the first sample with nothing left (arrivals may still come).
  emptied=$(awk -F, '$2 == 0 { print $1; exit }' "$out/scale-depth-$mode.csv")
  ideal_limit=$(awk -v j="$jobs" -v r="$limit" 'BEGIN { printf "%.1f", j / (r / 60) }')
  ideal_provider=$(awk -v j="$jobs" -v r="$scale_rpm" 'BEGIN { printf "%.1f", j / (r / 60) }')
  printf "$scale_row" "$mode" "$jobs" "$drained" "${emptied:--}" "$ideal_limit" \
    "$(ratio "$drained" "$ideal_limit")" "$ideal_provider" "$calls" \
    "$refused ($(ratio "$refused" "$calls"))" "$dead" "$billed/$unique"
}

# The limiter's own ceiling: TAKE as rate_limit.rs runs it, 8 clients on the one row, a limit so
# high that every take reserves. Prints "takes/s mean_ms p99_ms".
scale_take_ceiling() {
  local url script result tps mean p99
  url=$(fresh_db bench_scale_take)
  script="$out/take.pgbench"
  rust_sql shared/src/pipeline/limits/rate_limit.rs TAKE "'openai'" 0.0001 0.9999 0 0 3600 \
    | sed '$s/$/;/' >"$script"
  result=$(run_pgbench take "$url" 8 "$script")
  read -r tps mean _ p99 _ <<<"$result"
  echo "$tps $mean $p99"
}

bench_scale() {
  echo
  echo "== 6. Scale: $scale_workers × triage worker (C=$scale_concurrency), provider limit $scale_rpm/min," \
    "latency ${provider_ms} ms; burst $scale_burst + $scale_arrivals/s arrivals"
  scale_row='  %-8s %7s %8s %8s %13s %7s %14s %7s %15s %5s %13s\n'
  printf "$scale_row" "run" "jobs" "drain s" "empty s" "jobs/limit s" "ratio" "jobs/provider" \
    "calls" "429s" "dead" "billed/unique"
  echo "run,second,queue_depth,calls,refused" >"$out/scale-series.csv"
  scale_run limiter
  scale_run control
  local take_tps take_mean take_p99
  read -r take_tps take_mean take_p99 <<<"$(scale_take_ceiling)"
  echo "  the limiter itself: $take_tps takes/s from 8 clients on its one row (mean $take_mean ms," \
    "p99 $take_p99 ms), against the $(( scale_rpm * 9 / 600 ))/s it was asked for above"
  echo "  drain: until the arrivals ended and nothing was left; empty: when the queue was first"
  echo "  empty. limiter: TRIAGE_PROVIDER_RPM at 90% of the provider's; control: no configured limit and"
  echo "  no limit headers (429 + Retry-After only). Targets (limiter): drain <= 1.1 × jobs / limit,"
  echo "  429s <= 1% of calls, 0 dead, billed == unique."
  note "plotting docs/scale.png"
  CARGO_TARGET_DIR=$PWD/target/bench-plot cargo run --release -q \
    --manifest-path scripts/bench.d/plot/Cargo.toml -- "$out/scale-series.csv" docs/scale.png \
    "${BENCH_FONT:-/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf}"
  echo "  plot: docs/scale.png (queue depth and calls/s over time, both runs)"
}
