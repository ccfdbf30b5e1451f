# `scripts/bench db` (sourced by scripts/bench, which provides fresh_db, add_jobs, rust_sql,
# run_pgbench, start_bg, stop_bg, free_port, wait_for_port and psql): the database at volume.
# Fills the ledger (`provider_call`, calls spread over the last 20 hours, all today's spend)
# and the outbox (finished jobs, with their tickets) to each size in BENCH_DB_ROWS (default
# "1000000 10000000"; --quick: 100000), generated in SQL, and prints beside the same at 0 rows:
#   - a claim alone, and under the daily budget as the worker claims far from the line (the
#     claim, and one claim in CLAIMS_PER_GRANT + 1 then `budget_keep`, whose grant covers the
#     claims until the next), 1 client: latency
#   - the budget's read alone, as it ran before issue 22 (a scan of the day) and now
#   - `triage stats --json`, `triage sweeper --once`, `GET /admin` (the console overview)
#   - the fleet's claims per second, 8 clients, with the budget against without (medians of
#     alternating 5 s runs, see fleet_pair)
#   - what the tables take on disk (docs/scaling.md's storage per day)
# Targets (issue 22): at 10M, a claim under a budget <= 1.2x its latency at 0; stats, the
# sweeper tick and the overview under 100 ms; claims/s with a budget >= 0.9x without.

db_sizes=${BENCH_DB_ROWS:-1000000 10000000}
[ -z "$quick" ] || db_sizes=${BENCH_DB_ROWS:-100000}

# N calls over the last 20 hours, answered and billed, then the running totals rebuilt from
# them (the trigger is off for the fill: minutes, not hours, at 10M).
add_calls() {
  local url=$1 n=$2 rebuild
  rebuild=$(awk '/^-- The calls made before this migration/ { on = 1; next } on { print } on && /;$/ { exit }' \
    migrations/V9__ledger_rollup.sql)
  psql "$url" -v n="$n" -v model="$model_version" -v prompt="$TRIAGE_PROMPT_VERSION" <<SQL
ALTER TABLE provider_call DISABLE TRIGGER provider_call_hour_add;
INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, model_version,
    prompt_version, started_at, finished_at, outcome, billed, input_tokens, output_tokens,
    cost_usd, latency_ms)
SELECT g, md5(g::text), 1, 'bench', 'openai', :'model', :'prompt',
       now() - (g % 72000) * interval '1 second', now() - (g % 72000) * interval '1 second',
       'ok', true, 300, 20, 0.000575, 800
FROM generate_series(1, :n) g;
ALTER TABLE provider_call ENABLE TRIGGER provider_call_hour_add;
TRUNCATE provider_call_hour;
$rebuild
SQL
}

# Milliseconds of the median of 5 runs of a command (after one unmeasured run).
median_ms() {
  local i start times=()
  "$@" >/dev/null 2>&1 || die "$* failed"
  for i in 1 2 3 4 5; do
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1 || die "$* failed"
    times+=("$(( ($(date +%s%N) - start) / 1000 ))")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk 'NR == 3 { printf "%.1f", $1 / 1000 }'
}

# Milliseconds one statement takes on the server (EXPLAIN ANALYZE's execution time, median of 3).
statement_ms() {
  local url=$1 sql=$2 i times=()
  for i in 1 2 3 4; do
    times+=("$(printf 'EXPLAIN (ANALYZE, FORMAT JSON) %s' "$sql" | psql "$url" -tA \
      | sed -n 's/.*"Execution Time": \([0-9.]*\).*/\1/p')")
  done
  printf '%s\n' "${times[@]:1}" | sort -n | awk 'NR == 2 { printf "%.1f", $1 }'
}

# The fleet's claims/s, 8 clients, without and with the budget: "plain budgeted" medians of
# six alternating runs of 5 s, each after a VACUUM of the outbox: each run leaves dead row
# versions at the head of the queue, and alternating pairs from the same clean start compare
# like with like (single 30 s runs depended on how far autovacuum had got).
fleet_pair() {
  local url=$1 plain=$2 budgeted=$3 i script plain_tps=() budget_tps=() tps
  shift 3
  for i in 1 2 3 4 5 6; do
    for script in "$plain" "$budgeted"; do
      psql "$url" -qc "VACUUM evaluation_outbox"
      "$pgbin/pgbench" -n -M prepared -c 8 -j 2 -T 5 -f "$script" "$@" "$url" >"$out/pgbench-fleet.log" 2>&1 \
        || { cat "$out/pgbench-fleet.log" >&2; die "pgbench fleet failed"; }
      tps=$(sed -n 's/^tps = \([0-9]*\.[0-9]\).* (without initial connection time)/\1/p' "$out/pgbench-fleet.log")
      if [ "$script" = "$plain" ]; then plain_tps+=("$tps"); else budget_tps+=("$tps"); fi
    done
  done
  echo "$(printf '%s\n' "${plain_tps[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", (v[3] + v[4]) / 2 }')" \
    "$(printf '%s\n' "${budget_tps[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", (v[3] + v[4]) / 2 }')"
}

bench_db() {
  echo
  echo "== 8. The database at volume: ledger and outbox filled to ${db_sizes// /, } rows (calls over the"
  echo "   last 20 hours, finished jobs), beside 0 rows; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  local plain="$out/claim-plain.pgbench" budgeted="$out/claim-budget.pgbench" main_budget="$out/budget-main.rs"
  local claim_sql unclaim_sql spend_sql main_spend_sql size url port api_pid
  # Each client is its own worker (`:client_id`), so it can find and give back what it claimed.
  claim_sql=$(rust_sql shared/src/pipeline/outbox/claim.rs CLAIM :client_id :lease :batch :rules :lane :take)
  # Given back at the queue's tail (as new work arriving), so the claims move through the queue
  # as a drain does. Given back at its head, 8 clients churned the same 80 rows, and how their
  # dead versions happened to be cleaned decided the rate (identical runs: 734-1537 claims/s).
  unclaim_sql=$(rust_sql shared/src/pipeline/outbox/claim.rs UNCLAIM :ids \
    | sed 's/attempts = attempts - 1$/attempts = attempts - 1, available_at = now()/')
  grep -q 'available_at = now()' <<<"$unclaim_sql" || die "UNCLAIM in claim.rs changed: the bench's give-back must follow"
  spend_sql=$(rust_sql shared/src/pipeline/limits/budget.rs SPEND)
  # The budget's read before issue 22 (the last release before it): a scan of the day.
  git show f5754f7:shared/src/pipeline/budget.rs >"$main_budget"
  main_spend_sql=$(rust_sql "$main_budget" SPEND)
  # As the worker runs it, each statement its own transaction: the claim, then (under a budget)
  # the decision, which keeps every job here (the budget is far away), reserves them and grants
  # the client room for CLAIMS_PER_GRANT more claims like it (budget.rs), which it makes
  # without deciding: one claim in CLAIMS_PER_GRANT + 1 decides, drawn at random; then the jobs
  # go back to the queue's tail, so it stays as filled. Both read the claimed ids back (the
  # worker has them from the claim's rows), so both pay that statement.
  local read_back="SELECT coalesce(array_agg(id ORDER BY id), '{}') AS ids, coalesce(array_agg(0.0006::float8), '{}') AS estimates FROM evaluation_outbox WHERE status = 'processing' AND locked_by = :client_id::text"
  {
    printf '%s;\n' "$claim_sql"
    printf '%s \\gset\n' "$read_back"
    printf '%s;\n' "$unclaim_sql"
  } >"$plain"
  # The worker's grant size, read from its source so that the two cannot drift apart.
  local per_grant
  per_grant=$(sed -n 's/^pub const CLAIMS_PER_GRANT: f64 = \([0-9]*\)\.0;/\1/p' shared/src/pipeline/limits/budget.rs)
  [ -n "$per_grant" ] || die "no CLAIMS_PER_GRANT in budget.rs"
  {
    echo "\\set decide random(1, $(( per_grant + 1 )))"
    printf '%s;\n' "$claim_sql"
    printf '%s \\gset\n' "$read_back"
    echo '\if :decide = 1'
    echo "SELECT kept FROM budget_keep(:ids, :estimates, 1000000000, :client_id::text, 0, $per_grant * 0.006, 300);"
    echo '\endif'
    printf '%s;\n' "$unclaim_sql"
  } >"$budgeted"
  local row='  %-34s' header
  declare -A cell
  for size in 0 $db_sizes; do
    url=$(fresh_db "bench_db_$size")
    note "db: $size calls and finished jobs"
    local filled=$(date +%s)
    # The ledger and the outbox fill side by side (one core each): minutes at 10M.
    add_calls "$url" "$size" &
    local calls_pid=$!
    add_jobs "$url" "$size" done
    wait "$calls_pid" || die "filling the ledger failed"
    add_jobs "$url" "$pending_rows" pending
    psql "$url" -c "VACUUM ANALYZE"
    cell[fill,$size]="$(( $(date +%s) - filled )) s"
    local pg=(-D lease=300 -D batch=10 -D rules=false -D lane=interactive -D take=any)
    read -r _ cell[claim,$size] _ <<<"$(run_pgbench "db-claim-$size" "$url" 1 "$plain" "${pg[@]}")"
    read -r _ cell[claim_budget,$size] _ <<<"$(run_pgbench "db-claim-budget-$size" "$url" 1 "$budgeted" "${pg[@]}")"
    read -r cell[fleet,$size] cell[fleet_budget,$size] <<<"$(fleet_pair "$url" "$plain" "$budgeted" "${pg[@]}")"
    cell[spend,$size]=$(statement_ms "$url" "$spend_sql")
    cell[spend_main,$size]=$(statement_ms "$url" "$main_spend_sql")
    cell[stats,$size]=$(DATABASE_URL=$url median_ms "$triage" stats --json)
    cell[sweep,$size]=$(DATABASE_URL=$url median_ms "$triage" sweeper --once)
    port=$(free_port)
    start_bg "db-serve-$size" env DATABASE_URL="$url" "$triage" serve --listen "127.0.0.1:$port"
    api_pid=$started_pid
    wait_for_port "$port"
    cell[overview,$size]=$(median_ms curl -sf "http://127.0.0.1:$port/admin")
    stop_bg "$api_pid"
    cell[disk,$size]=$(psql "$url" -tAc "SELECT pg_size_pretty((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('provider_call'))) || ' + ' || pg_size_pretty(pg_total_relation_size('evaluation_outbox')) || ' + ' || pg_size_pretty(pg_total_relation_size('ticket') + pg_total_relation_size('ticket_evaluation'))")
    # Each size's database is dropped once measured: 10M rows take gigabytes.
    [ "$size" = 0 ] || psql "$base_url" -c "DROP DATABASE bench_db_$size WITH (FORCE)"
  done
  header=$(printf "$row" "")
  for size in 0 $db_sizes; do header+=$(printf ' %16s' "$size rows"); done
  echo "$header"
  local key label
  for key in fill claim claim_budget spend_main spend stats sweep overview fleet fleet_budget disk; do
    case $key in
      fill) label="fill (s)" ;;
      claim) label="claim, mean ms" ;;
      claim_budget) label="claim under a budget, mean ms" ;;
      spend_main) label="budget read before issue 22, ms" ;;
      spend) label="budget read (V19), ms" ;;
      stats) label="triage stats --json, ms" ;;
      sweep) label="triage sweeper --once, ms" ;;
      overview) label="GET /admin (overview), ms" ;;
      fleet) label="fleet claims/s, 8 clients" ;;
      fleet_budget) label="... under a budget" ;;
      disk) label="ledger + outbox + tickets" ;;
    esac
    printf "$row" "$label"
    for size in 0 $db_sizes; do printf ' %16s' "${cell[$key,$size]}"; done
    echo
  done
  local last=${db_sizes##* }
  echo "  at $last rows: claim under a budget / the same at 0 rows: $(ratio "${cell[claim_budget,$last]}" "${cell[claim_budget,0]}") (target <= 120%);"
  echo "  fleet claims/s under a budget / without: $(ratio "${cell[fleet_budget,$last]}" "${cell[fleet,$last]}") (target >= 90%);"
  echo "  stats, sweeper tick, overview: target < 100 ms each (process start included for the CLI)"
}
