# `scripts/bench plans` (sourced by scripts/bench, which provides fresh_db and psql): what a
# prepared statement costs on a fresh deployment's database, whose tables were analyzed while
# empty (docs/database.md, "Plans on a fresh database"). The worker's two statements that read
# a growing table by key, as they stand in the code (the dedup lookup of ledger.rs's START, the
# ledger row's close of its FINISH), are prepared and executed six times on the empty tables
# (PostgreSQL's plan cache makes its choice there), then the tables grow to N rows with no
# ANALYZE and before autovacuum analyzes them (it is off for the run; BENCH_PLAN_ROWS, default
# "11000 100000"; --quick: 11000), and the median of five executions is timed: with the default
# plan_cache_mode (a generic plan made for empty tables) beside
# force_custom_plan (what every pooled session sets: db::session_settings).

plan_rows=${BENCH_PLAN_ROWS:-11000 100000}
[ -z "$quick" ] || plan_rows=${BENCH_PLAN_ROWS:-11000}

# One run: prints "<generic plans> <dedup ms> <finish ms>", each ms planning + execution.
plan_run() {
  local url=$1 mode=$2 rows=$3
  psql "$url" -v mode="$mode" -v rows="$rows" -tA <<'SQL' | awk '
    function median(a, first,   v, i, j, t) {
      for (i = 0; i < 5; i++) v[i] = a[first + i]
      for (i = 1; i < 5; i++) for (j = i; j > 0 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return v[2]
    }
    BEGIN { n = 0 }
    /^[0-9]+$/ { generic = $1 }
    /Planning Time/ { plan = $3 }
    /Execution Time/ { ms[n++] = plan + $3 }
    END { printf "%s %.3f %.3f\n", generic, median(ms, 0), median(ms, 5) }'
SET client_min_messages = warning;
TRUNCATE ticket, evaluation_result, provider_call CASCADE;
-- Autovacuum has not analyzed them again yet (it does so within a minute or so of growth).
ALTER TABLE evaluation_result SET (autovacuum_enabled = off);
SELECT format('ALTER TABLE %s SET (autovacuum_enabled = off)', inhrelid::regclass)
FROM pg_inherits WHERE inhparent = 'provider_call'::regclass \gexec
-- Every table the login may analyze (the catalogs it may not are skipped, silently).
SET client_min_messages = error;
ANALYZE;
SET client_min_messages = warning;
SET plan_cache_mode = :mode;
PREPARE dedup(text) AS SELECT NOT EXISTS (SELECT 1 FROM evaluation_result WHERE idempotency_key = $1);
PREPARE finish(bigint, timestamptz) AS
  UPDATE provider_call SET finished_at = now() WHERE id = $1 AND started_at = $2 AND finished_at IS NULL;
\o /dev/null
EXECUTE dedup('k1'); EXECUTE dedup('k2'); EXECUTE dedup('k3');
EXECUTE dedup('k4'); EXECUTE dedup('k5'); EXECUTE dedup('k6');
EXECUTE finish(1, now()); EXECUTE finish(2, now()); EXECUTE finish(3, now());
EXECUTE finish(4, now()); EXECUTE finish(5, now()); EXECUTE finish(6, now());
INSERT INTO ticket (id, subject, message)
  SELECT md5(i::text)::uuid, 's', 'm' FROM generate_series(1, :rows) i;
INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department, urgency_score,
                               model_version, prompt_version, policy_version)
  SELECT md5(i::text), md5(i::text)::uuid, 0, 'billing', 0.5, 'm@medium', 'triage-v5', 'p1'
  FROM generate_series(1, :rows) i;
INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, model_version,
                           prompt_version, started_at)
  SELECT i, md5(i::text), 1, 'w', 'openai', 'm@medium', 'triage-v5', now()
  FROM generate_series(1, :rows) i;
\o
SELECT sum(generic_plans) FROM pg_prepared_statements;
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE dedup('absent');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE dedup('absent');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE dedup('absent');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE dedup('absent');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE dedup('absent');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE finish(1, now() - interval '1 hour');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE finish(1, now() - interval '1 hour');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE finish(1, now() - interval '1 hour');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE finish(1, now() - interval '1 hour');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE finish(1, now() - interval '1 hour');
SQL
}

bench_plans() {
  echo
  echo "== Plans on a fresh database: tables analyzed empty, then grown to N rows, no ANALYZE"
  echo "   ms per execution (planning + execution), default plan_cache_mode beside force_custom_plan"
  local url rows auto custom row='  %9s %18s %14s %18s %14s\n'
  url=$(fresh_db bench_plans)
  printf "$row" "rows" "dedup default" "dedup custom" "finish default" "finish custom"
  for rows in $plan_rows; do
    read -r _ auto_dedup auto_finish <<<"$(plan_run "$url" auto "$rows")"
    read -r generic custom_dedup custom_finish <<<"$(plan_run "$url" force_custom_plan "$rows")"
    [ "$generic" = 0 ] || note "force_custom_plan still made $generic generic plans"
    printf "$row" "$rows" "$auto_dedup" "$custom_dedup" "$auto_finish" "$custom_finish"
  done
  echo "  target: custom plans stay at index-scan cost (about 0.1 ms) at any size"
}
