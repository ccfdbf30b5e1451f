# `scripts/bench train-memory` (sourced by scripts/bench, which provides fresh_db, psql, note,
# die, $profile, $target_dir and $out): issue 39 item 4, training that fits where it runs.
# BENCH_TRAIN_ROWS production results (default 300000; --quick 30000), each ticket's message
# BENCH_TRAIN_CHARS characters long (default 20000, the API's largest), in 8 owners' names,
# seeded by one SQL statement; then `train --from results:30` through the ops function's
# release binary, driven through the Runtime API emulator (testkit's lambda-invoke) at each
# memory of BENCH_TRAIN_MEMORY_MB (default "128 256": the template's least and its
# OpsMemorySize default), told to the function as Lambda tells it. Prints, per memory, the
# rows read and left out (and why), what the examples held of their budget, the process's
# peak resident memory (VmHWM, what Lambda compares with the function's memory) beside the
# memory, and the invocation's time. It asserts nothing. Files: $out/train-memory-*.
# shellcheck shell=bash
# SC2154: variables set by scripts/bench.
# shellcheck disable=SC2154

train_rows=${BENCH_TRAIN_ROWS:-$([ -n "$quick" ] && echo 30000 || echo 300000)}
train_chars=${BENCH_TRAIN_CHARS:-20000}
train_memory=${BENCH_TRAIN_MEMORY_MB:-128 256}

bench_train_memory() {
  echo "== train-memory: triage train --from results:30 through the ops function ($profile), at its memory"
  note "building triage-ops and lambda-invoke ($profile)"
  cargo build --profile "$profile" -q -p triage-ops -p testkit --bin triage-ops --bin lambda-invoke
  local ops=$target_dir/$profile_dir/triage-ops invoke=$target_dir/$profile_dir/lambda-invoke
  local url started seeded
  url=$(fresh_db bench_train)
  started=$(date +%s.%N)
  # Each message a dev-like text repeated to the length, with the ticket's own reference in
  # every repetition (so every text differs), its labels alternating; a second apart, newest
  # first by number.
  psql "$url" -v n="$train_rows" -v chars="$train_chars" <<'SQL'
WITH g AS (
    SELECT md5('bench-train-' || g)::uuid AS id, g,
           (ARRAY['Charged twice for order', 'Cannot log in to account', 'Server error on export',
                  'Upgrade the plan for', 'Question about'])[1 + g % 5] AS head
    FROM generate_series(1, :n) g
), t AS (
    INSERT INTO ticket (id, subject, message, owner)
    SELECT id, head || ' ' || g,
           left(repeat(head || ' ' || g || ', please help: the customer writes again and again. ',
                       :chars / 60 + 1), :chars),
           md5('bench-train-owner-' || g % 8)
    FROM g
    RETURNING id
)
INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department, urgency_score,
                               model_version, prompt_version, policy_version, answered_by, computed_at)
SELECT md5('bench-train-key-' || g), g.id, CASE WHEN g % 7 = 0 THEN 0.9 ELSE 0.1 END,
       (ARRAY['billing', 'account', 'technical', 'sales', 'general'])[1 + g % 5],
       CASE WHEN g % 7 = 0 THEN 0.9 ELSE 0.1 END, 'gpt-6-luna@medium', 'triage-v6', 'policy-v1',
       'model', now() - make_interval(secs => g)
FROM g JOIN t USING (id);
ANALYZE ticket;
ANALYZE evaluation_result;
SQL
  seeded=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
  local text_gb
  text_gb=$(psql "$url" -tAc "SELECT round(sum(octet_length(message)) / 1e9, 2) FROM ticket")
  echo "  seeded: $train_rows results, ${train_chars}-character messages ($text_gb GB of text), 8 owners, in ${seeded} s"
  printf '  %-7s %9s %9s %-26s %-22s %-20s %9s\n' "memory" "read" "left out" "why left out" \
    "examples held/budget" "peak RSS / limit" "time"
  local memory_mb
  for memory_mb in $train_memory; do
    "$invoke" --memory "$memory_mb" --timeout 900 "$ops" '{"op": "train", "from": ["results:30"]}' \
      DATABASE_URL="$url" TRIAGE_PROMPT_VERSION=triage-v6 RUST_LOG=info \
      >"$out/train-memory-$memory_mb.json" 2>"$out/train-memory-$memory_mb.log" \
      || { cat "$out/train-memory-$memory_mb.log" >&2; die "lambda-invoke at $memory_mb MB failed"; }
    python3 - "$out/train-memory-$memory_mb.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if d["error"] is not None:
    print(f"  {d['memory_mb']:>4} MB  refused or failed: {d['error']}")
    sys.exit()
r = d["result"]
s = r["sources"][0]
left = s["left_out"]
why = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in left.items() if v) or "-"
mb = lambda b: b / 2**20
rss = d["peak_rss_bytes"]
print(f"  {d['memory_mb']:>4} MB {s['examples']:>9} {sum(left.values()):>9} {why:<26} "
      f"{mb(r['held_bytes']):>6.1f}/{mb(r['budget']['bytes']):.1f} MiB      "
      f"{mb(rss):>6.1f}/{d['memory_mb']} MiB ({rss / (d['memory_mb'] * 2**20):.0%})  {d['seconds']:>7.1f} s")
PY
  done
  echo "  target: peak RSS below the function's memory, every row read or counted as left out"
}
