# `scripts/bench day`, run by `scripts/soak` (sourced by scripts/bench, which provides fresh_db,
# start_bg, stop_bg, start_provider, worker_env, free_port, wait_for_port, psql and base_url):
# a day in production in an hour. Every part at once on one database: `triage serve` taking
# SOAK_RATE tickets/s (116: 10M a day), SOAK_PEAK times that for one minute in every ten,
# SOAK_WORKERS `triage worker` processes, the sweeper, `triage deliver` to a webhook receiver,
# fake-provider answering in BENCH_PROVIDER_MS; a daily budget (SOAK_BUDGET_USD) and a per-caller
# quota (SOAK_QUOTA) set, the ledger kept a day (TRIAGE_RETENTION_SECONDS), so that what turns at
# 00:00 UTC turns. scripts/soak runs the whole stack under libfaketime, the clock set so that the
# run's minutes are clock minutes and 00:00 UTC comes SOAK_LEAD_SECONDS after the start.
#
# Faults, by the plan below: worker kills (-9), a deliverer crash (-9), a PostgreSQL crash and
# restart, a provider outage (every call a 503; five minutes in the hour) and a spell of 429s
# (fake-provider's SIGUSR1 / SIGUSR2). Every minute a row: sent, acknowledged, results done in
# the minute, dead letters, the open backlog, billed / unique keys so far, p50 / p99 time to
# result (ticket created → result stored) of the minute's results, the delivery backlog, each
# process's memory (RSS; PostgreSQL's as the sum of its processes' PSS), the faults of the
# minute. At midnight: the ledger's partitions before and after, each day's spend beside the
# budget, and the caller's count for each day beside the tickets created that day. After the
# arrivals, the drain (up to SOAK_DRAIN_SECONDS); then lost = acknowledged without a result.
# Exits non-zero when anything acknowledged is lost, anything is dead, billed != unique, or a
# midnight invariant does not hold; the latency and memory targets are printed, not asserted.

day_minutes=${SOAK_MINUTES:-60}
day_lead=${SOAK_LEAD_SECONDS:-300}
day_rate=${SOAK_RATE:-116}
day_peak=${SOAK_PEAK:-5}
day_workers=${SOAK_WORKERS:-3}
day_concurrency=${SOAK_CONCURRENCY:-16}
day_budget=${SOAK_BUDGET_USD:-1000}
day_quota=${SOAK_QUOTA:-10000000}
day_drain=${SOAK_DRAIN_SECONDS:-600}
# How far scripts/soak moved the clock (FAKETIME=+Ns; 0 when it is not moved).
day_offset=${FAKETIME:-+0s}
day_offset=${day_offset#+}
day_offset=${day_offset%s}

# The plan: "second fault" lines, seconds from the start. The hour: worker kills every ten
# minutes, the deliverer's crash, PostgreSQL's restart, a five-minute outage and a minute of
# 429s, none in the midnight minute's neighbours but a kill right after it. A shorter run
# (scripts/test --long) keeps every fault, shorter: a one-minute outage, 30 s of 429s.
day_plan() {
  local m=$(( day_lead ))
  if [ "$day_minutes" -ge 30 ]; then
    local s
    for s in 450 1050 1650 2250 2850 3450; do echo "$s kill-worker"; done
    echo "$(( m + 30 )) kill-worker"
    echo "930 crash-deliverer"
    echo "1230 restart-postgres"
    # Between two peaks (minutes 4, 14, 24, ... of the run): its five minutes hold no peak.
    echo "2100 outage-start"; echo "2400 outage-end"
    echo "2700 limit-start"; echo "2760 limit-end"
  else
    echo "$(( m - 60 )) kill-worker"
    echo "$(( m + 20 )) crash-deliverer"
    echo "$(( m + 40 )) kill-worker"
    echo "$(( m + 90 )) restart-postgres"
    echo "$(( m + 140 )) outage-start"; echo "$(( m + 200 )) outage-end"
    echo "$(( m + 225 )) limit-start"; echo "$(( m + 255 )) limit-end"
  fi | sort -n
}

day_env() {
  # unquoted: worker_env prints NAME=VALUE words
  echo $(worker_env "$day_url" "$day_concurrency") TRIAGE_DAILY_BUDGET_USD="$day_budget" \
    TRIAGE_CALLER_DAILY_TICKETS="$day_quota" TRIAGE_RETENTION_SECONDS=86400 \
    TRIAGE_WEBHOOK_ALLOWED_HOSTS=127.0.0.1
}

day_start_worker() {
  # shellcheck disable=SC2046
  start_bg "day-worker-$1" env $(day_env) "$triage" worker
  day_worker_pids[$1]=$started_pid
}

day_start_deliverer() {
  # shellcheck disable=SC2046
  start_bg day-deliverer env $(day_env) TRIAGE_DB_POOL_SIZE=8 "$triage" deliver
  day_deliverer_pid=$started_pid
}

day_kill() { kill -KILL "$1" 2>/dev/null || true; stop_bg "$1"; }

# Leases that follow the work (docs/fencing.md): how long after a worker's kill -9 (at the
# database's time $2) its jobs are back in the queue, each claimer returning expired leases
# before it claims. Its jobs are the rows still leased before the kill once every live
# worker has renewed since (a renewal period, 5 s at the default 15 s lease, plus a second).
# Runs in the background; one line per kill in $day_out/reclaims.
day_reclaim() {
  local who=$1 killed_at=$2 held="" n waited
  sleep 6
  for _ in $(seq 240); do
    n=$(psql "$day_url" -tAc "SELECT count(*) FROM evaluation_outbox
          WHERE status = 'processing' AND leased_at < '$killed_at'" 2>/dev/null) || { sleep 0.5; continue; }
    held=${held:-$n}
    if [ "$n" = 0 ]; then
      waited=$(psql "$day_url" -tAc "SELECT round(extract(epoch FROM now() - '$killed_at'::timestamptz)::numeric, 1)")
      echo "$who: its $held jobs back after at most $waited s" >>"$day_out/reclaims"
      return
    fi
    sleep 0.5
  done
  echo "$who: $n of its $held jobs not back after 120 s" >>"$day_out/reclaims"
}

# Runs fault $1 (here, not in a subshell: it starts processes); sets $day_label.
day_fault() {
  case "$1" in
    kill-worker)
      local i=$(( day_next_kill % day_workers + 1 ))
      day_next_kill=$(( day_next_kill + 1 ))
      local killed_at
      killed_at=$(psql "$day_url" -tAc "SELECT now()" 2>/dev/null || true)
      day_kill "${day_worker_pids[$i]}"
      [ -z "$killed_at" ] || day_reclaim "worker $i killed at $(date -u +%T)" "$killed_at" &
      day_start_worker "$i"
      day_label="worker $i killed" ;;
    crash-deliverer)
      day_kill "$day_deliverer_pid"
      day_start_deliverer
      day_label="deliverer killed" ;;
    restart-postgres)
      scripts/local-postgres stop "$BENCH_PG_DIR" >/dev/null 2>&1
      sleep 2
      scripts/local-postgres start "$BENCH_PG_DIR" >/dev/null 2>&1
      day_label="PostgreSQL crashed and restarted" ;;
    outage-start) kill -USR1 "$provider_pid"; day_label="outage begins" ;;
    outage-end) kill -USR1 "$provider_pid"; day_label="outage ends" ;;
    limit-start) kill -USR2 "$provider_pid"; day_label="429s begin" ;;
    limit-end) kill -USR2 "$provider_pid"; day_label="429s end" ;;
  esac
}

# Memory in MB: RSS of a process, or PostgreSQL's processes' PSS added up.
day_rss() { awk '/^VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "-"; }
day_pg_mb() {
  local postmaster
  postmaster=$(head -1 "$pgdata/postmaster.pid" 2>/dev/null) || { echo "-"; return; }
  # A backend may exit between the listing and the reading (psql's own do).
  { echo "$postmaster"; pgrep -P "$postmaster" || true; } | while read -r pid; do
    awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || true
  done | awk '{ t += $1 } END { printf "%d", t / 1024 }'
}

# What the database says of [FROM, TO) (epoch seconds): results done, their p50 / p99 time to
# result, dead, open, billed / unique so far, the delivery backlog.
day_db_row() {
  psql "$day_url" -tA -F' ' -c "
    WITH r AS (
      SELECT extract(epoch FROM r.computed_at - t.created_at) AS s
      FROM evaluation_result r JOIN ticket t ON t.id = r.ticket_id
      WHERE r.computed_at >= to_timestamp($1) AND r.computed_at < to_timestamp($2))
    SELECT (SELECT count(*) FROM r),
           coalesce(round(percentile_cont(0.5) WITHIN GROUP (ORDER BY s)::numeric, 2), 0),
           coalesce(round(percentile_cont(0.99) WITHIN GROUP (ORDER BY s)::numeric, 2), 0),
           (SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'),
           (SELECT count(*) FROM evaluation_outbox WHERE status IN ('pending', 'processing')),
           (SELECT count(*) FILTER (WHERE billed) || '/' || count(DISTINCT idempotency_key) FILTER (WHERE billed)
            FROM provider_call),
           (SELECT count(*) FROM delivery WHERE status IN ('pending', 'processing'))
    FROM r" 2>/dev/null || echo "- - - - - - -"
}

day_partitions() {
  psql "$day_url" -tAc "SELECT string_agg(replace(c.relname, 'provider_call_', ''), ' ' ORDER BY c.relname)
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'provider_call'::regclass AND c.relname <> 'provider_call_default'"
}

# The midnight figures: each UTC day's spend (the running totals) beside the budget, the
# caller's count beside the tickets created that day, what the DEFAULT partition caught.
day_midnight_figures() {
  psql "$day_url" -tA -F' ' -c "
    SELECT d::date,
           (SELECT coalesce(round(sum(cost_usd)::numeric, 4), 0) FROM provider_call_hour
            WHERE hour >= d AND hour < d + interval '1 day'),
           (SELECT coalesce(sum(tickets), 0) FROM caller_daily_tickets WHERE day = d::date),
           (SELECT count(*) FROM ticket WHERE created_at >= d AND created_at < d + interval '1 day')
    FROM generate_series(date_trunc('day', to_timestamp($1 - 86400), 'UTC'),
                         date_trunc('day', to_timestamp($1), 'UTC'), interval '1 day') d"
}

day_row='  %-5s %6s %6s %6s %4s %7s %15s %6s %6s %7s  %s\n'
day_print_row() {
  local label=$1 from=$2 to=$3 faults=$4 sent acked refused other errors done p50 p99 dead open billed backlog
  [ ! -e "$day_out/totals" ] || read -r sent acked refused other errors <"$day_out/totals"
  read -r done p50 p99 dead open billed backlog <<<"$(day_db_row "$from" "$to")"
  local mem="serve $(day_rss "$day_api_pid") w" i
  for i in $(seq "$day_workers"); do mem+="$(day_rss "${day_worker_pids[$i]}")/"; done
  mem="${mem%/} sweep $(day_rss "$day_sweeper_pid") deliver $(day_rss "$day_deliverer_pid")"
  mem+=" fake $(day_rss "$provider_pid") pg $(day_pg_mb)"
  printf "$day_row" "$label" "$(( ${sent:-0} - day_sent ))" "$(( ${acked:-0} - day_acked ))" \
    "$done" "$dead" "$open" "$billed" "$p50" "$p99" "$backlog" "$mem${faults:+ | $faults}"
  echo "$label $(( ${sent:-0} - day_sent )) $(( ${acked:-0} - day_acked )) $done $dead $open $billed $p50 $p99 $backlog $mem | $faults" \
    >>"$day_out/rows"
  day_sent=${sent:-0} day_acked=${acked:-0}
  # Statuses other than 201 so far (503 during the database's restart is by design).
  day_refused="${refused:-0} 503s, ${other:-0} other, ${errors:-0} failed"
}

bench_day() {
  day_out="$out/day"
  rm -rf "$day_out"
  mkdir -p "$day_out"
  local start midnight end now i
  # The run starts SOAK_LEAD_SECONDS before the next 00:00 UTC, which scripts/soak's clock
  # brings a little after the set-up.
  now=$(date +%s)
  midnight=$(( (now / 86400 + 1) * 86400 ))
  start=$(( midnight - day_lead ))
  [ "$start" -ge $(( now + 20 )) ] || die "day: $(( start - now )) s before the start at $(date -u -d "@$start" +%T):" \
    "too little for the set-up (scripts/soak sets the clock; SOAK_LEAD_SECONDS is $day_lead)"
  end=$(( start + day_minutes * 60 ))
  echo
  echo "== day: $day_minutes min from $(date -u -d "@$start" '+%F %T') UTC (the clock as the stack sees it)," \
    "$day_rate tickets/s, ${day_peak}x for one minute in ten, $day_workers workers (C=$day_concurrency)," \
    "provider ${provider_ms} ms, budget \$$day_budget/day, quota $day_quota/day, ledger kept a day"
  day_url=$(fresh_db bench_day)
  # Yesterday's ledger partition, as a deployment running since then has it: the day's
  # retention (a day) drops it at midnight.
  psql "$day_url" -c "CREATE TABLE provider_call_$(date -u -d "@$(( start - 86400 ))" +%Y%m%d) PARTITION OF provider_call
    FOR VALUES FROM ('$(date -u -d "@$(( start - 86400 ))" +%F)') TO ('$(date -u -d "@$start" +%F)')" >/dev/null
  start_provider fake-provider-day --delay-ms "$provider_ms"
  local port receiver_port
  receiver_port=$(free_port)
  start_bg day-receiver env -u LD_PRELOAD python3 scripts/bench.d/receiver.py "$receiver_port" 0
  wait_for_port "$receiver_port"
  psql "$day_url" -c "INSERT INTO subscription (id, owner, target, secret) VALUES (gen_random_uuid(), 'local',
    'http://127.0.0.1:$receiver_port/hook', 'whsec_YmVuY2gtc2VjcmV0LWJlbmNoLXNlY3JldC0xMjM0NTY=')" >/dev/null
  port=$(free_port)
  # shellcheck disable=SC2046
  start_bg day-serve env $(day_env) TRIAGE_DB_POOL_SIZE=16 "$triage" serve --listen "127.0.0.1:$port"
  day_api_pid=$started_pid
  wait_for_port "$port"
  # shellcheck disable=SC2046
  start_bg day-sweeper env $(day_env) "$triage" sweeper
  day_sweeper_pid=$started_pid
  declare -g -a day_worker_pids=()
  day_next_kill=0
  for i in $(seq "$day_workers"); do day_start_worker "$i"; done
  day_start_deliverer
  local before_partitions
  before_partitions=$(day_partitions)
  # The load and the receiver keep the real clock (Python's sleep fails under libfaketime: EINVAL
  # from clock_nanosleep); the load's start is the same instant on it.
  start_bg day-load env -u LD_PRELOAD python3 scripts/bench.d/day-load.py "http://127.0.0.1:$port" \
    "$(( start - day_offset ))" "$day_minutes" "$day_rate" "$day_peak" $(( day_lead / 60 - 1 )) "$day_out"
  local load_pid=$started_pid
  while [ "$(date +%s)" -lt "$start" ]; do sleep 0.2; done
  mapfile -t plan < <(day_plan)
  printf "$day_row" minute sent acked done dead open "billed/unique" "p50 s" "p99 s" backlog \
    "memory MB (serve, workers, sweeper, deliverer, fake-provider, PostgreSQL) | faults"
  day_sent=0 day_acked=0
  local minute=0 faults="" due what next_row=$(( start + 60 )) failed=0 midnight_done=""
  while :; do
    now=$(date +%s)
    while [ ${#plan[@]} -gt 0 ]; do
      read -r due what <<<"${plan[0]}"
      [ $(( start + due )) -le "$now" ] || break
      day_fault "$what"
      faults+="${faults:+, }$day_label"
      plan=("${plan[@]:1}")
    done
    if [ "$now" -ge "$next_row" ]; then
      day_print_row "$(date -u -d "@$(( next_row - 60 ))" +%H:%M)" $(( next_row - 60 )) "$next_row" "$faults"
      faults=""
      if [ -z "$midnight_done" ] && [ "$next_row" -ge $(( midnight + 60 )) ]; then
        midnight_done=1
        day_midnight "$before_partitions" "$midnight" || failed=1
      fi
      next_row=$(( next_row + 60 ))
      minute=$(( minute + 1 ))
    fi
    if [ "$now" -ge "$end" ]; then
      local open backlog
      read -r open backlog < <(psql "$day_url" -tA -F' ' -c "
        SELECT (SELECT count(*) FROM evaluation_outbox WHERE status IN ('pending', 'processing')),
               (SELECT count(*) FROM delivery WHERE status IN ('pending', 'processing'))" 2>/dev/null || echo "1 1")
      if { [ "$open" = 0 ] && [ "$backlog" = 0 ] && ! kill -0 "$load_pid" 2>/dev/null; } \
         || [ "$now" -ge $(( end + day_drain )) ]; then
        break
      fi
    fi
    sleep 1
  done
  now=$(date +%s)
  [ "$now" -le $(( next_row - 60 )) ] || day_print_row "$(date -u -d "@$(( next_row - 60 ))" +%H:%M)" $(( next_row - 60 )) "$now" "$faults (end)"
  stop_bg "$load_pid"
  day_summary "$start" "$end" "$now" || failed=1
  for i in $(seq "$day_workers"); do stop_bg "${day_worker_pids[$i]}"; done
  stop_bg "$day_deliverer_pid"; stop_bg "$day_sweeper_pid"; stop_bg "$day_api_pid"; stop_bg "$provider_pid"
  [ "$failed" = 0 ] || die "day: an invariant did not hold (above)"
}

# The midnight check, a minute after it: the partitions made and dropped, each day's spend
# beside the budget, the caller's count per day beside the tickets of the day.
day_midnight() {
  local before=$1 midnight=$2 after ok=0 today yesterday tomorrow4 day spend counted created
  after=$(day_partitions)
  today=$(date -u -d "@$midnight" +%Y%m%d)
  yesterday=$(date -u -d "@$(( midnight - 2 * 86400 ))" +%Y%m%d)
  tomorrow4=$(date -u -d "@$(( midnight + 3 * 86400 ))" +%Y%m%d)
  echo "  -- midnight ($(date -u -d "@$midnight" '+%F %T') UTC) --"
  echo "  ledger partitions before: $before"
  echo "  ledger partitions after:  $after"
  [[ " $after " == *" $today "* && " $after " == *" $tomorrow4 "* ]] \
    || { echo "  FAILED: the new day's partitions ($today, $tomorrow4) are not there"; ok=1; }
  [[ " $before " == *" $yesterday "* && " $after " != *" $yesterday "* ]] \
    || { echo "  FAILED: the partition of $yesterday (past the day's retention) was not dropped"; ok=1; }
  local caught
  caught=$(psql "$day_url" -tAc "SELECT count(*) FROM provider_call_default")
  [ "$caught" = 0 ] || { echo "  FAILED: $caught calls in the DEFAULT partition"; ok=1; }
  echo "  spend today: \$$(psql "$day_url" -tAc "SELECT round(spent_usd::numeric, 4) FROM budget_spend()") (the new day's, from zero)"
  echo "  day         spend USD (budget $day_budget)   caller's count   tickets created"
  while read -r day spend counted created; do
    printf '  %-11s %24s %16s %17s\n' "$day" "$spend" "$counted" "$created"
    awk -v s="$spend" -v b="$day_budget" 'BEGIN { exit !(s <= b) }' \
      || { echo "  FAILED: $day spent more than the budget"; ok=1; }
    [ "$counted" = "$created" ] || { echo "  FAILED: the caller's count of $day is not its tickets"; ok=1; }
  done < <(day_midnight_figures "$midnight")
  return "$ok"
}

day_summary() {
  local start=$1 end=$2 stopped=$3 lost dead billed unique ok=0
  psql "$day_url" -c "CREATE TABLE day_acknowledged (id uuid)" >/dev/null
  psql "$day_url" -c "\\copy day_acknowledged FROM '$day_out/acknowledged'" >/dev/null
  read -r acked lost dead billed unique < <(psql "$day_url" -tA -F' ' -c "
    SELECT (SELECT count(*) FROM day_acknowledged),
           (SELECT count(*) FROM day_acknowledged a WHERE NOT EXISTS (
              SELECT 1 FROM ticket_evaluation te JOIN evaluation_result r USING (idempotency_key)
              WHERE te.ticket_id = a.id)),
           (SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'),
           count(*) FILTER (WHERE billed), count(DISTINCT idempotency_key) FILTER (WHERE billed)
    FROM provider_call")
  echo "  -- end: arrivals over at $(date -u -d "@$end" +%T), drained by $(date -u -d "@$stopped" +%T) --"
  echo "  acknowledged $acked, lost $lost (acknowledged, no result at the end), dead $dead," \
    "billed $billed for $unique keys; API: $day_refused"
  echo "  p99 time to result by minute: $(awk '{ printf "%s %s  ", $1, $9 }' "$day_out/rows")"
  echo "  memory MB, first minute: $(head -1 "$day_out/rows" | cut -d'|' -f1 | cut -d' ' -f11-)"
  echo "  memory MB, last minute:  $(tail -1 "$day_out/rows" | cut -d'|' -f1 | cut -d' ' -f11-)"
  echo "  worker kills (leases that follow the work; target: back within 15 s):"
  sed 's/^/    /' "$day_out/reclaims" 2>/dev/null || echo "    none measured"
  echo "  targets: 0 lost, 0 dead, billed == unique (asserted); p99 <= 2 s in minutes without a fault," \
    "<= 30 s with one (the outage aside), memory flat within 30% (printed)"
  [ "$lost" = 0 ] || { echo "  FAILED: $lost acknowledged tickets have no result"; ok=1; }
  [ "$dead" = 0 ] || { echo "  FAILED: $dead dead letters"; ok=1; }
  [ "$billed" = "$unique" ] || { echo "  FAILED: billed $billed != unique $unique"; ok=1; }
  return "$ok"
}
