# `scripts/bench compare REV [ingest|worker|cascade ...]` (sourced by scripts/bench, which
# provides the benchmarks, `figure`, $triage, $src, $profile, $profile_dir, $out, $selected,
# note and die): a previous release (a tag, or any revision) beside the working tree, on the
# same machine in one run, so that a slower release is seen on a noisy machine before it lands.
#   - REV is checked out in a git worktree, target/compare/SHA, and built there (its own target
#     dir, seeded once from this tree's build of the same profile, so that only what differs is
#     compiled); it stays for the next comparison (`git worktree remove` to drop it).
#   - Each round runs the named benchmarks (default all three) on REV and on this tree, REV
#     first in odd rounds and this tree first in even ones (a machine that gets busier or
#     quieter during the run weighs on both); BENCH_COMPARE_ROUNDS rounds (default 3; 1 with
#     --quick). Each side runs its own `triage` (its migrations, its API, its worker) and its
#     own statements in the pgbench baselines (rust_sql from its tree); the fake provider, the
#     loads and the shipped set are this tree's, the same for both.
#   - It prints every figure the benchmarks record (`figure`) side by side: median and range over
#     the rounds for each, and this tree's median over REV's. Each run's full report:
#     $out/compare-{previous,this}-ROUND.txt.
# shellcheck shell=bash
# shellcheck disable=SC2154

compare_rounds=${BENCH_COMPARE_ROUNDS:-$([ -n "$quick" ] && echo 1 || echo 3)}

# Checks out and builds SHA in target/compare/SHA; prints the worktree's absolute path.
compare_build() {
  local sha=$1 tree=target/compare/$1
  if [ ! -e "$tree/.git" ]; then
    mkdir -p target/compare
    git worktree add -q --detach "$tree" "$sha" >&2
  fi
  if [ ! -d "$tree/target/$profile_dir" ] && [ -d "target/$profile_dir/deps" ]; then
    note "compare: seeding $tree/target/$profile_dir from this tree's build"
    mkdir -p "$tree/target/$profile_dir"
    cp -a "target/$profile_dir/deps" "target/$profile_dir/build" "target/$profile_dir/.fingerprint" \
      "$tree/target/$profile_dir/"
  fi
  (cd "$tree" && cargo build --profile "$profile" -q -p triage-cli) >&2 \
    || die "building $sha in $tree failed"
  echo "$PWD/$tree"
}

# Runs the selected benchmarks once as SIDE (previous or this), its report in its own file.
compare_side() {
  local side=$1 round=$2
  figures_file="$out/compare-$side.tsv"
  note "compare: round $round, $side"
  {
    echo "scripts/bench compare, round $round, $side: $src ($triage); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    if wants ingest; then bench_ingest; fi
    if wants worker; then bench_worker; fi
    if wants cascade; then bench_cascade; fi
  } >"$out/compare-$side-$round.txt"
  figures_file=""
}

bench_compare() {
  local sha tree round this_triage=$triage
  sha=$(git rev-parse --short=7 "$compare_rev^{commit}" 2>/dev/null) || die "no revision $compare_rev"
  if wants cascade; then source scripts/bench.d/cascade.bash; fi
  note "compare: building $compare_rev ($sha) in target/compare/$sha"
  tree=$(compare_build "$sha")
  rm -f "$out"/compare-*
  echo
  echo "== 13. compare: $compare_rev ($sha) beside this tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' with uncommitted changes'))," \
    "${selected[*]}, $compare_rounds round(s) alternating; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for round in $(seq "$compare_rounds"); do
    local order=(previous this)
    [ $((round % 2)) = 1 ] || order=(this previous)
    local side
    for side in "${order[@]}"; do
      if [ "$side" = previous ]; then
        triage=$tree/target/$profile_dir/triage src=$tree
      else
        triage=$this_triage src=.
      fi
      compare_side "$side" "$round"
    done
  done
  triage=$this_triage src=.
  python3 - "$out/compare-previous.tsv" "$out/compare-this.tsv" "$compare_rev" <<'PY'
import statistics, sys
order, values = [], {}
for side, path in (("previous", sys.argv[1]), ("this", sys.argv[2])):
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        name, value = line.split("\t", 1)
        if name not in order:
            order.append(name)
        try:
            values.setdefault((side, name), []).append(float(value))
        except ValueError:
            pass  # n/a: not counted

def cell(side, name):
    v = values.get((side, name), [])
    if not v:
        return "n/a", None
    m = statistics.median(v)
    return (f"{m:g} [{min(v):g}-{max(v):g}]" if len(v) > 1 else f"{m:g}"), m

row = "  {:<52} {:>26} {:>26} {:>9}"
print(row.format("figure (median [range] over the rounds)", sys.argv[3], "this tree", "this/prev"))
for name in order:
    (p, pm), (t, tm) = cell("previous", name), cell("this", name)
    print(row.format(name, p, t, f"{tm / pm:.2f}" if pm and tm is not None else "-"))
PY
  echo "  each run's report: $out/compare-{previous,this}-ROUND.txt"
}
