# `scripts/bench cascade` (sourced by scripts/bench, which provides fresh_db, start_provider,
# stop_bg, psql, note, die, $triage, $profile and $out): issue 30's cascade on the shipped set
# (evals/tickets.jsonl), with fake-provider in classifier mode answering the large model
# (gpt-6-luna@medium, prompt triage-v6) wrong at BENCH_CASCADE_ERROR_RATE (default 0.1), priced
# at BENCH_CASCADE_PRICES (gpt-style, US$1.25 in / $10 out per Mtok; the two-price form, so the
# fake's prompt cache does not make a call's price depend on the calls before it):
#   1. trains the local classifier on the set's dev split (`triage train --from
#      set:evals/tickets.jsonl:dev --json`);
#   2. chooses the threshold on dev (`triage eval --thresholds`), by the rule: the lowest
#      threshold whose dev accuracy is within 1 point of the large model's dev accuracy. The
#      classifier has learnt the dev rows (it is right on all of them), so a sweep of it on dev
#      says nothing of unseen tickets (shown, flagged learnt_these_rows); the threshold is
#      chosen on dev by cross-fitting instead: the dev families in BENCH_CASCADE_FOLDS folds
#      (default 5), each swept with a classifier trained on the other folds' dev rows, the
#      points summed over the folds (each row answered by a classifier that never saw it);
#   3. on the test split (families never seen in training): `triage eval` of the large model
#      alone, the local classifier alone (the cascade at threshold 0) and the cascade at the
#      chosen threshold, large model first (the paired comparisons are against it); the rules
#      classifier is every report's offline baseline. Prints version, department accuracy
#      [95% CI by family], local share, cost per ticket and per correct triage, the cascade's
#      cost ratio to the large model (target <= 0.6) and its accuracy difference, paired over
#      families with a bootstrap interval (target: within 1 point), and McNemar's test;
#   4. the artefact's size (target <= 5 MB) and the local answer's time per ticket, asked as the
#      worker asks it (shared/examples/local_answer.rs: LocalProvider and the contract; target
#      < 1 ms); and, for reading only (never to choose), the same sweep over the test rows;
#   5. training on BENCH_CASCADE_RESULTS production results (default 100000; --quick 10000)
#      inserted by SQL, their texts the dev rows with variations: `triage train --from
#      results:1`, wall time (target < 60 s).
# It prints numbers and asserts nothing. Files: $out/cascade-*.
# shellcheck shell=bash
# SC2154: variables set by scripts/bench.
# shellcheck disable=SC2154

cascade_set=evals/tickets.jsonl
cascade_rate=${BENCH_CASCADE_ERROR_RATE:-0.1}
cascade_prices=${BENCH_CASCADE_PRICES:-gpt-6-luna=1.25/10}
cascade_results=${BENCH_CASCADE_RESULTS:-$([ -n "$quick" ] && echo 10000 || echo 100000)}
cascade_prompt=triage-v6
cascade_large=gpt-6-luna@medium
cascade_folds=${BENCH_CASCADE_FOLDS:-5}

# `triage` against the database $1 and the fake provider, its other arguments after.
cascade_triage() {
  local url=$1
  shift
  env DATABASE_URL="$url" TRIAGE_PROVIDER=openai TRIAGE_PROVIDER_URL="$provider_url" \
    TRIAGE_PROVIDER_API_KEY=bench TRIAGE_PRICES="$cascade_prices" \
    TRIAGE_PROMPT_VERSION="$cascade_prompt" TRIAGE_CONCURRENCY=16 TRIAGE_BATCH_SIZE=16 \
    "$triage" "$@"
}

# The JSON file $1's value at the Python expression $2 (the document is `d`).
cascade_json() {
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# Production tickets with a model's result each, N of them, their texts the set's dev rows
# with a greeting, a reference and a sign-off (every text distinct), labelled as the set does.
cascade_fill_results() {
  local url=$1 n=$2
  python3 -c '
import csv, json, sys
w = csv.writer(sys.stdout)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["split"] == "dev":
        w.writerow([r["subject"], r["message"], r["department"], "true" if r["is_urgent"] else "false"])
' "$cascade_set" | psql "$url" -c "CREATE TABLE bench_dev (n serial, subject text, message text, department text, is_urgent boolean)" \
    -c "COPY bench_dev (subject, message, department, is_urgent) FROM STDIN WITH (FORMAT csv)"
  psql "$url" -v n="$n" -v prompt="$cascade_prompt" -v model="$cascade_large" <<'SQL'
WITH src AS (
    SELECT md5('bench-cascade-' || g)::uuid AS id, md5('bench-cascade-key-' || g) AS key,
           (ARRAY['', 'Re: ', 'Fwd: ', '[Support] ', 'Question: '])[1 + g % 5] || d.subject AS subject,
           (ARRAY['Hi team, ', 'Hello, ', 'Olá, ', 'Hola, ', ''])[1 + (g / 5) % 5] || d.message
             || E'\n\nRef ' || (g * 7919 % 1000003) || '. '
             || (ARRAY['Thanks.', 'Regards, Ana', 'Obrigado!', 'Gracias.', 'Sent from my phone'])[1 + (g / 25) % 5]
             AS message,
           d.department, d.is_urgent
    FROM generate_series(1, :n) g
    JOIN bench_dev d ON d.n = 1 + g % (SELECT count(*) FROM bench_dev)
), t AS (
    INSERT INTO ticket (id, subject, message) SELECT id, subject, message FROM src
), link AS (
    INSERT INTO ticket_evaluation (ticket_id, idempotency_key, prompt_version, model_version)
    SELECT id, key, :'prompt', :'model' FROM src
)
INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department, urgency_score,
                               model_version, prompt_version, policy_version, answered_by)
SELECT key, id, CASE WHEN is_urgent THEN 0.9 ELSE 0.1 END, department,
       CASE WHEN is_urgent THEN 0.9 ELSE 0.1 END, :'model', :'prompt', 'policy-v1', 'model'
FROM src;
SQL
}

# Writes the dev rows of the set into $out/cascade-fold-K-train.jsonl (every fold but K) and
# $out/cascade-fold-K-dev.jsonl (fold K), K = 0..folds-1, a family's fold a hash of its name;
# and the test rows, marked dev, into $out/cascade-test-as-dev.jsonl (the reading-only sweep).
cascade_write_folds() {
  python3 - "$cascade_set" "$cascade_folds" "$out" <<'PY'
import hashlib, json, sys
path, folds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [json.loads(line) for line in open(path) if line.strip()]
fold = lambda r: int(hashlib.sha256((r.get("family") or r["id"]).encode()).hexdigest()[:8], 16) % folds
for k in range(folds):
    with open(f"{out}/cascade-fold-{k}-train.jsonl", "w") as train, open(f"{out}/cascade-fold-{k}-dev.jsonl", "w") as dev:
        for r in rows:
            if r["split"] == "dev":
                (dev if fold(r) == k else train).write(json.dumps(r, ensure_ascii=False) + "\n")
with open(f"{out}/cascade-test-as-dev.jsonl", "w") as test:
    for r in rows:
        if r["split"] == "test":
            test.write(json.dumps(dict(r, split="dev"), ensure_ascii=False) + "\n")
PY
}

# Prints a sweep's points (the JSON files named, summed over them: rows, local answers, right
# answers and cost add up) with the large model alone above them; $1 the title, $2 the chosen
# threshold or "-", the rest the files.
cascade_print_sweep() {
  python3 - "$@" <<'PY'
import json, sys
title, chosen, files = sys.argv[1], sys.argv[2], sys.argv[3:]
sweeps = [json.load(open(f)) for f in files]
n = sum(s["set"]["rows"] for s in sweeps)
large = sum(s["large"]["department_accuracy"] * s["set"]["rows"] for s in sweeps) / n
large_cost = sum(s["large"]["cost_per_ticket_usd"] * s["set"]["rows"] for s in sweeps) / n
print(f"  {title}: {n} rows; the large model alone: accuracy {large:.3f}, ${large_cost:.6f} per ticket")
print(f"    {'threshold':>9} {'local share':>11} {'accuracy':>8} {'vs large':>8} {'$/ticket':>10} {'$/correct':>10}")
for i, p in enumerate(sweeps[0]["points"]):
    at = [s["points"][i] for s in sweeps]
    assert all(q["threshold"] == p["threshold"] for q in at)
    rows = [s["set"]["rows"] for s in sweeps]
    local = sum(q["local_share"] * r for q, r in zip(at, rows)) / n
    right = sum(q["department_accuracy"] * r for q, r in zip(at, rows))
    cost = sum(q["cost_per_ticket_usd"] * r for q, r in zip(at, rows))
    mark = "  <- chosen" if chosen != "-" and p["threshold"] == float(chosen) else ""
    print(f"    {p['threshold']:>9.2f} {local:>11.3f} {right / n:>8.3f} {right / n - large:>+8.3f} {cost / n:>10.6f} "
          f"{cost / right if right else float('nan'):>10.6f}{mark}")
PY
}

# The rule over the sweeps named (summed as above): the lowest threshold whose accuracy is
# within 1 point of the large model's.
cascade_choose() {
  python3 - "$@" <<'PY'
import json, sys
sweeps = [json.load(open(f)) for f in sys.argv[1:]]
n = sum(s["set"]["rows"] for s in sweeps)
large = sum(s["large"]["department_accuracy"] * s["set"]["rows"] for s in sweeps) / n
chosen = [p["threshold"] for i, p in enumerate(sweeps[0]["points"])
          if sum(s["points"][i]["department_accuracy"] * s["set"]["rows"] for s in sweeps) / n >= large - 0.01]
print(f"{min(chosen):g}")
PY
}

bench_cascade() {
  local url train_url local_version sweep_version chosen started wall learnt
  echo
  echo "== cascade: the shipped set, fake-provider classifier at ${cascade_rate} errors for" \
    "$cascade_large (prompt $cascade_prompt), prices $cascade_prices; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -f "$out"/cascade-*
  url=$(fresh_db bench_cascade)
  start_provider fake-provider-cascade --labels "$cascade_set" --error-rate "$cascade_rate"

  note "cascade: training on the dev split"
  cascade_triage "$url" train --from "set:$cascade_set:dev" --json >"$out/cascade-train.json" \
    2>"$out/cascade-train.log" || { cat "$out/cascade-train.log" >&2; die "triage train failed"; }
  local_version=$(cascade_json "$out/cascade-train.json" 'd["version"]')

  note "cascade: sweeping the threshold on dev"
  sweep_version="$cascade_prompt/cascade($local_version,0.9,$cascade_large)"
  cascade_triage "$url" eval --set "$cascade_set" --thresholds --version "$sweep_version" --json \
    >"$out/cascade-sweep.json" 2>"$out/cascade-sweep.log" \
    || { cat "$out/cascade-sweep.log" >&2; die "triage eval --thresholds failed"; }
  learnt=$(cascade_json "$out/cascade-sweep.json" 'str(d["learnt_these_rows"]).lower()')
  cascade_print_sweep "the classifier swept on the dev rows it learnt (learnt_these_rows: $learnt): no guide" \
    - "$out/cascade-sweep.json"

  note "cascade: choosing the threshold on dev by cross-fitting ($cascade_folds folds by family)"
  cascade_write_folds
  local k fold_local fold_sweeps=()
  for k in $(seq 0 $((cascade_folds - 1))); do
    cascade_triage "$url" train --from "set:$out/cascade-fold-$k-train.jsonl:dev" --json \
      >"$out/cascade-fold-$k-train.json" 2>"$out/cascade-fold-$k.log" \
      || { cat "$out/cascade-fold-$k.log" >&2; die "triage train (fold $k) failed"; }
    fold_local=$(cascade_json "$out/cascade-fold-$k-train.json" 'd["version"]')
    cascade_triage "$url" eval --set "$out/cascade-fold-$k-dev.jsonl" --thresholds \
      --version "$cascade_prompt/cascade($fold_local,0.9,$cascade_large)" --json \
      >"$out/cascade-fold-$k-sweep.json" 2>>"$out/cascade-fold-$k.log" \
      || { cat "$out/cascade-fold-$k.log" >&2; die "triage eval --thresholds (fold $k) failed"; }
    fold_sweeps+=("$out/cascade-fold-$k-sweep.json")
  done
  chosen=$(cascade_choose "${fold_sweeps[@]}")
  cascade_print_sweep "dev, cross-fitted: each fold's rows answered by a classifier trained on the other folds" \
    "$chosen" "${fold_sweeps[@]}"
  echo "  rule: the lowest threshold whose cross-fitted dev accuracy is within 1 point of the large model's: $chosen"

  note "cascade: the test split"
  cascade_triage "$url" eval --set "$cascade_set" --split test \
    --version "$cascade_prompt/$cascade_large" \
    --version "$cascade_prompt/cascade($local_version,0,$cascade_large)" \
    --version "$cascade_prompt/cascade($local_version,$chosen,$cascade_large)" --json \
    >"$out/cascade-test.json" 2>"$out/cascade-test.log" \
    || { cat "$out/cascade-test.log" >&2; die "triage eval on test failed"; }
  # For reading only: the full classifier swept over the test rows (never used to choose).
  cascade_triage "$url" eval --set "$out/cascade-test-as-dev.jsonl" --thresholds \
    --version "$sweep_version" --json >"$out/cascade-test-sweep.json" 2>"$out/cascade-test-sweep.log" \
    || { cat "$out/cascade-test-sweep.log" >&2; die "the test rows' sweep failed"; }
  stop_bg "$provider_pid"
  python3 - "$out/cascade-test.json" <<'PY'
import json, random, sys
d = json.load(open(sys.argv[1]))
runs, baseline = d["runs"], d["baseline"]
large, alone, cascade = runs
names = {id(large): "large model alone", id(alone): "local classifier alone (threshold 0)",
         id(cascade): "cascade at the chosen threshold", id(baseline): "rules classifier (offline)"}
print(f"  test split: {d['set']['rows']} rows, {large['families']} families never seen in training")
row = "    {:<38} {:<56} {:>24} {:>7} {:>10} {:>10}"
print(row.format("", "version", "accuracy [95% CI]", "local", "$/ticket", "$/correct"))
for r in [large, baseline, alone, cascade]:
    lo, hi = r["department"]["accuracy_ci"]
    pc = r["cost_per_correct_usd"]
    print(row.format(names[id(r)], r["version"], f"{r['department']['accuracy']:.3f} [{lo:.3f}, {hi:.3f}]",
                     f"{r['local_share']:.3f}", f"{r['cost_per_ticket_usd']:.6f}",
                     "-" if pc is None else f"{pc:.6f}"))
# Accuracy difference, paired over families: the same families drawn for both (1000 resamples).
fl, fc = large["by_family"], cascade["by_family"]
families = sorted(set(fl) & set(fc))
def diff(sample):
    rows = sum(fl[f]["rows"] for f in sample)
    return (sum(fc[f]["correct"] for f in sample) - sum(fl[f]["correct"] for f in sample)) / rows
rng = random.Random(30)
draws = sorted(diff([rng.choice(families) for _ in families]) for _ in range(1000))
point = diff(families)
ratio = cascade["cost_per_ticket_usd"] / large["cost_per_ticket_usd"]
c = next(c for c in d["comparison"] if c["other"] == cascade["version"])
print(f"  cascade vs large: accuracy {point:+.3f} [{draws[25]:+.3f}, {draws[974]:+.3f}] paired over {len(families)} families "
      f"(target: within 1 point: {'met' if point >= -0.01 else 'MISSED'}); McNemar: right only under the cascade "
      f"{c['only_other_right']}, only under the large model {c['only_baseline_right']}, p = {c['mcnemar_p']:.3g}")
print(f"  cost per ticket: cascade / large = {ratio:.3f} (target <= 0.6: {'met' if ratio <= 0.6 else 'MISSED'}); "
      f"per correct triage {cascade['cost_per_correct_usd'] / large['cost_per_correct_usd']:.3f}")
PY

  figure "cascade: accuracy on test" "$(cascade_json "$out/cascade-test.json" 'round(d["runs"][2]["department"]["accuracy"], 3)')"
  figure "cascade: local share" "$(cascade_json "$out/cascade-test.json" 'round(d["runs"][2]["local_share"], 3)')"
  figure "cascade: cost per ticket / large model" \
    "$(cascade_json "$out/cascade-test.json" 'round(d["runs"][2]["cost_per_ticket_usd"] / d["runs"][0]["cost_per_ticket_usd"], 3)')"
  cascade_print_sweep "for reading only, never to choose: the same classifier swept over the test rows" \
    "$chosen" "$out/cascade-test-sweep.json"

  note "cascade: the artefact and the local answer's time"
  psql "$url" -tAc "SELECT encode(artefact, 'hex') FROM local_model WHERE version = '$local_version'" \
    | python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.stdin.read().strip()))' \
    >"$out/cascade-artefact.bin"
  # The tree under test's own (compare's other release has its own build).
  (cd "$src" && cargo build --profile "$profile" -q -p triage-shared --example local_answer)
  "$src/target/$profile_dir/examples/local_answer" "$out/cascade-artefact.bin" "$cascade_set" 20 \
    >"$out/cascade-answer.json"
  python3 - "$out/cascade-train.json" "$out/cascade-answer.json" <<'PY'
import json, sys
t, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print(f"  artefact {t['version']}: {t['bytes'] / 1e6:.2f} MB (target <= 5 MB: {'met' if t['bytes'] <= 5e6 else 'MISSED'}), "
      f"{t['examples']} dev examples, trained in {t['seconds']:.2f} s")
print(f"  local answer through LocalProvider and the contract: {a['answers']} answers ({a['tickets']} tickets x {a['rounds']}): "
      f"mean {a['mean_us']:.0f} us, p50 {a['p50_us']:.0f} us, p99 {a['p99_us']:.0f} us, max {a['max_us']:.0f} us "
      f"(target < 1 ms: {'met' if a['p99_us'] < 1000 else 'MISSED'} at p99); artefact loaded in {a['load_ms']:.1f} ms")
PY
  figure "cascade: local answer p99 us" "$(cascade_json "$out/cascade-answer.json" 'round(d["p99_us"])')"

  note "cascade: training on $cascade_results results"
  train_url=$(fresh_db bench_cascade_train)
  cascade_fill_results "$train_url" "$cascade_results" >/dev/null
  psql "$train_url" -c "ANALYZE ticket; ANALYZE evaluation_result" >/dev/null
  started=$(date +%s.%N)
  cascade_triage "$train_url" train --from results:1 --json >"$out/cascade-train-results.json" \
    2>"$out/cascade-train-results.log" \
    || { cat "$out/cascade-train-results.log" >&2; die "triage train --from results:1 failed"; }
  wall=$(awk -v s="$started" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }')
  python3 - "$out/cascade-train-results.json" "$wall" <<'PY'
import json, sys
t, wall = json.load(open(sys.argv[1])), float(sys.argv[2])
print(f"  training on {t['examples']} results (triage train --from results:1): {wall:.1f} s wall for the process, "
      f"{t['seconds']:.1f} s from reading the results to the stored artefact, {t['bytes'] / 1e6:.2f} MB "
      f"(target < 60 s: {'met' if wall < 60 else 'MISSED'})")
PY
  figure "cascade: training on $cascade_results results, s" "$wall"
}
