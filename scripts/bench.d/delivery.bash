# `scripts/bench delivery` (sourced by scripts/bench, which provides fresh_db, add_jobs,
# start_bg, stop_bg, start_provider, worker_env, free_port, wait_for_port and psql): results
# produced by a `triage worker` against fake-provider and delivered by one `triage deliver` to
# four webhook receivers (scripts/bench.d/receiver.py, one of them answering in 2 s) and to
# EventBridge (moto, when scripts/test has installed it in target/test-tools). Run twice: with
# the slow receiver, and without it (the baseline). Prints, per healthy endpoint, the delivery
# lag (result stored → delivery acknowledged: delivery.finished_at - created_at) p50 / p99 in
# both runs side by side (target: within 1.2x), and deliveries per second beside the receivers'
# own ceiling (wrk against one receiver). Results: 20,000 (--quick: 2,000).
# Knobs: BENCH_DELIVERY_CONCURRENCY (the worker's, default 32).

delivery_results=20000
[ -z "$quick" ] || delivery_results=2000
delivery_worker_concurrency=${BENCH_DELIVERY_CONCURRENCY:-32}

# A receiver answering after DELAY seconds; sets $receiver_url.
start_receiver() {
  local name=$1 delay=$2 port
  port=$(free_port)
  start_bg "$name" python3 scripts/bench.d/receiver.py "$port" "$delay"
  wait_for_port "$port"
  receiver_url="http://127.0.0.1:$port/hook"
}

# moto as EventBridge with a bus; sets $moto_env (the AWS variables) and $bus, or leaves them
# empty when moto is not installed.
start_moto_bus() {
  local tools=target/test-tools/bin port
  moto_env="" bus=""
  if [ ! -x "$tools/moto_server" ] || [ ! -x "$tools/aws" ]; then
    note "moto is not in $tools (scripts/test installs it): EventBridge left out"
    return
  fi
  port=$(free_port)
  start_bg moto "$tools/moto_server" -p "$port"
  wait_for_port "$port"
  moto_env="AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_ENDPOINT_URL=http://127.0.0.1:$port"
  bus=bench-results
  env $moto_env "$tools/aws" --region us-east-1 --endpoint-url "http://127.0.0.1:$port" \
    events create-event-bus --name "$bus" >/dev/null
}

# One run: RUN names the database; the remaining arguments are the receivers' URLs. Prints
# one line per subscription: target p50 p99 delivered seconds.
delivery_run() {
  local run=$1 url worker_pid deliverer_pid sweeper_pid target i pending
  shift
  url=$(fresh_db "delivery_$run")
  for target in "$@"; do
    psql "$url" -c "INSERT INTO subscription (id, target, secret)
                    VALUES (gen_random_uuid(), '$target', 'whsec_YmVuY2gtc2VjcmV0LWJlbmNoLXNlY3JldC0xMjM0NTY=')"
  done
  # The bus as the deliverer makes it (pipeline::delivery::bus), before any result exists.
  [ -z "$bus" ] || psql "$url" -c "INSERT INTO subscription (id, kind, target) VALUES (gen_random_uuid(), 'eventbridge', '$bus')"
  add_jobs "$url" "$delivery_results" pending >/dev/null
  # shellcheck disable=SC2046
  start_bg "deliverer-$run" env $(worker_env "$url" 4) $moto_env \
    TRIAGE_WEBHOOK_ALLOWED_HOSTS=127.0.0.1 TRIAGE_EVENT_BUS="$bus" \
    TRIAGE_WEBHOOK_TIMEOUT_SECONDS=5 TRIAGE_DELIVERY_LEASE_SECONDS=15 TRIAGE_DB_POOL_SIZE=16 \
    "$triage" deliver
  deliverer_pid=$started_pid
  # shellcheck disable=SC2046
  start_bg "worker-$run" env $(worker_env "$url" "$delivery_worker_concurrency") "$triage" worker
  worker_pid=$started_pid
  # Returns the leases of deliveries whose write was lost (a pool wait on a loaded machine).
  start_bg "sweeper-$run" env DATABASE_URL="$url" "$triage" sweeper
  sweeper_pid=$started_pid
  # Until every result is out and every delivery but the slow endpoint's is acknowledged.
  for i in $(seq 1200); do
    pending=$(psql "$url" -tAc "
      SELECT (SELECT count(*) FROM evaluation_outbox WHERE status <> 'done')
           + (SELECT count(*) FROM delivery d JOIN subscription s ON s.id = d.subscription_id
              WHERE d.status <> 'done' AND s.target NOT LIKE '%slow%')")
    [ "$pending" -eq 0 ] && break
    sleep 0.5
  done
  stop_bg "$worker_pid"
  stop_bg "$deliverer_pid"
  stop_bg "$sweeper_pid"
  psql "$url" -tA -F ' ' -c "
    SELECT s.target,
           round((1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.finished_at - d.created_at)))::numeric),
           round((1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.finished_at - d.created_at)))::numeric),
           count(*),
           round(extract(epoch FROM max(d.finished_at) - min(d.created_at))::numeric, 1)
    FROM delivery d JOIN subscription s ON s.id = d.subscription_id
    WHERE d.status = 'done'
    GROUP BY s.target ORDER BY s.target"
}

bench_delivery() {
  local healthy=() slow ceiling with without target p50 p99 n span base i
  echo
  echo "== delivery: $delivery_results results to 3 healthy webhooks + EventBridge, with and without a 2 s one"
  start_provider "fake-provider-${provider_ms}ms" --delay-ms "$provider_ms"
  for i in 1 2 3; do
    start_receiver "receiver-$i" 0
    healthy+=("$receiver_url")
  done
  start_receiver receiver-slow 2
  # Its name marks it in the results (the receiver ignores the query).
  slow="$receiver_url?slow"
  start_moto_bus
  # The receivers' own ceiling: wrk posting to one of them as fast as it answers.
  printf 'wrk.method = "POST"\nwrk.body = "{}"\n' >"$out/post-empty.lua"
  ceiling=$(wrk -t2 -c16 -d"${secs}s" -s "$out/post-empty.lua" "${healthy[0]}" 2>/dev/null \
    | awk '/Requests\/sec/ { printf "%.0f", $2 }')
  with=$(delivery_run with_slow "${healthy[@]}" "$slow")
  without=$(delivery_run without_slow "${healthy[@]}")
  printf '  %-34s %22s %22s %14s\n' endpoint "lag p50/p99 ms (slow)" "(no slow: baseline)" "ratio p50/p99"
  while read -r target p50 p99 n span; do
    [ -n "$target" ] || continue
    [[ "$target" == *slow* ]] && continue
    base=$(awk -v t="$target" '$1 == t { print $2 "/" $3 }' <<<"$without")
    printf '  %-34s %22s %22s %14s\n' "$target" "$p50/$p99" "$base" \
      "$(awk -v a="$p50" -v b="${base%/*}" -v c="$p99" -v d="${base#*/}" \
        'BEGIN { if (b > 0 && d > 0) printf "%.2fx/%.2fx", a / b, c / d; else print "n/a" }')"
  done <<<"$with"
  echo "  deliveries/s (with the slow one, all healthy sinks): $(awk '!/slow/ && $4 > 0 { n += $4; if ($5 > s) s = $5 } END { if (s > 0) printf "%.0f", n / s }' <<<"$with")" \
    "· receiver ceiling (wrk, one receiver): ${ceiling:-n/a} req/s"
  echo "  slow endpoint acknowledged meanwhile: $(awk '/slow/ { print $4 }' <<<"$with") (bounded by TRIAGE_DELIVERY_PER_ENDPOINT in flight)"
}
