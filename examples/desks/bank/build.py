#!/usr/bin/env python3
"""Regenerates the bank desk's files from the upstream data sets (stdlib only, deterministic).

    python3 examples/desks/bank/build.py --banking77 DIR --clinc DIR [--check]

--banking77: a checkout of PolyAI-LDN/task-specific-datasets (its banking_data/ is read);
--clinc: a checkout of clinc/oos-eval (its data/ is read). Each upstream file must have the
SHA-256 pinned below, so the output is a function of the pinned inputs and intents.py alone.
--check compares instead of writing and exits 1 when a file would change.

Writes, beside this script: taxonomy.json, banking77.jsonl (the labelled set: the official
train split as `dev`, the official test split as `test`), ood.jsonl (queries the desk was not
built for, from CLINC150) and to-policy-v1.json (each intent's built-in department).
"""

import argparse
import csv
import io
import json
import re
import sys
from collections import Counter, defaultdict
from hashlib import sha256
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the data
from intents import INTENTS, URGENT, URGENT_THRESHOLD

HERE = Path(__file__).resolve().parent

UPSTREAM = {
    "banking77": {
        "commit": "57ec275d8078af65b7731c2a98be812d844a6d6b",
        "banking_data/train.csv": "b06e26ac675513959a63135f11b94ea7786ed02da65db93a5650d8838cbc664b",
        "banking_data/test.csv": "d12d6e3bc4c3103966ae786dc435913c0c563dfa328f5a3646d0e62cfeeb474d",
        "banking_data/categories.json": "53261da888122daf2d120d925458631d9619e15d82e56052e7a42e535ce32b63",
    },
    "clinc": {
        "commit": "828f8093932c8fe6ca7936c3d2e52903b1c523de",
        "data/data_full.json": "36923c3705a59e08fe9c3883d8bc2dd966ef93e22cb78ac41171782a698d56e0",
        "data/domains.json": "b947b579d3b8e74b06f93b01083d8efaff2888b43a3e362533bd88a6e1211b3a",
    },
}

# Banking77 queries have no subject and triage's sets require one: the channel, the same on
# every row, so it carries no label.
SUBJECT = "In-app chat"

# CLINC150's in-scope domains a bank's desk would call its own, and the intents of other
# domains that are banking in another guise: left out of the out-of-domain set.
BANK_DOMAINS = {"banking", "credit_cards"}
BANK_LIKE_INTENTS = {
    "exchange_rate", "travel_notification", "direct_deposit", "payday", "income", "taxes",
    "rollover_401k", "find_phone",
}

# CLINC150's out-of-scope queries include some about money (an overdraft fee, a wire
# transfer): tagged `near-bank`, so a measure can count them apart. A keyword heuristic.
NEAR_BANK = re.compile(
    r"\b(bank|banks|banking|card|cards|credit|debit|account|accounts|money|transfer|transfers|"
    r"pin|atm|loan|loans|payment|payments|balance|deposit|cash|fee|fees|overdraft|mortgage|"
    r"cheque|check|checks|checking|currency|exchange|refund|charge|charged|transaction|"
    r"transactions|savings|interest|wallet|paypal|venmo|wire)\b"
)

DEPARTMENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
TAXONOMY_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
BUILT_IN = {"billing", "technical", "account", "sales", "general"}


def department_name(intent):
    """Banking77's names as triage allows them: `Refund_not_showing_up` and
    `reverted_card_payment?` are the two that change."""
    return re.sub(r"[^a-z0-9_]", "", intent.lower())


def read_pinned(root, source):
    files = {}
    for rel, want in UPSTREAM[source].items():
        if rel == "commit":
            continue
        data = (root / rel).read_bytes()
        got = sha256(data).hexdigest()
        if got != want:
            sys.exit(f"{root / rel}: SHA-256 {got}, expected {want} "
                     f"(commit {UPSTREAM[source]['commit']})")
        files[rel] = data
    return files


def check_taxonomy(t):
    """shared/SPEC.md's rules for a taxonomy file; triage's own validator is the authority."""
    assert set(t) <= {"name", "departments", "urgent", "urgent_threshold"}, set(t)
    assert TAXONOMY_NAME.match(t["name"]), t["name"]
    deps = t["departments"]
    assert 2 <= len(deps) <= 300, len(deps)
    names = [d["name"] for d in deps]
    assert len(set(names)) == len(names), "duplicate department"
    for d in deps:
        assert set(d) <= {"name", "description", "zendesk_group_id"}, d
        assert DEPARTMENT_NAME.match(d["name"]), d["name"]
        assert 1 <= len(d["description"]) <= 300 and "\n" not in d["description"], d["name"]
    assert isinstance(t["urgent"], str) and t["urgent"].strip()
    assert 0.0 <= t["urgent_threshold"] <= 1.0


def jsonl(rows):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def build(banking, clinc):
    table = {name: (five, urgent, text) for name, five, urgent, text in INTENTS}
    upstream = json.loads(banking["banking_data/categories.json"])
    renamed = {i: department_name(i) for i in upstream}
    assert sorted(renamed.values()) == sorted(table), "intents.py must name every intent once"
    assert {five for five, _, _ in table.values()} == BUILT_IN

    taxonomy = {
        "name": "bank",
        "departments": [{"name": n, "description": table[n][2]} for n in sorted(table)],
        "urgent": URGENT,
        "urgent_threshold": URGENT_THRESHOLD,
    }
    check_taxonomy(taxonomy)
    mapping = {n: table[n][0] for n in sorted(table)}

    splits = {}
    for split, rel in (("dev", "banking_data/train.csv"), ("test", "banking_data/test.csv")):
        text = banking[rel].decode("utf-8")
        splits[split] = list(csv.DictReader(io.StringIO(text, newline="")))

    def norm(text):
        return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())

    # The official split keeps some texts in both halves (case and punctuation apart): tagged,
    # so a measure can leave them out. The rows stay: the split is the published one.
    seen = {split: {norm(r["text"]) for r in rows} for split, rows in splits.items()}
    both = seen["dev"] & seen["test"]

    rows = []
    for split, upstream_split in (("dev", "train"), ("test", "test")):
        for number, r in enumerate(splits[split], start=1):
            message = r["text"].strip()
            assert message, f"{upstream_split}.csv row {number} is empty"
            department = renamed[r["category"]]
            tags = ["lang:en", "source:banking77"]
            if norm(message) in both:
                tags.append("dup:cross-split")
            rows.append({
                "id": f"banking77-{upstream_split}-{number:05d}",
                "subject": SUBJECT,
                "message": message,
                "department": department,
                "is_urgent": table[department][1],
                "split": split,
                "tags": tags,
            })

    data = json.loads(clinc["data/data_full.json"])
    domain_of = {i: d for d, ids in json.loads(clinc["data/domains.json"]).items() for i in ids}
    ood = []
    for key, split in (("oos_train", "dev"), ("oos_val", "dev"), ("oos_test", "test")):
        for number, (query, _) in enumerate(data[key], start=1):
            tags = ["lang:en", "source:clinc150", "ood:out-of-scope"]
            if NEAR_BANK.search(query.lower()):
                tags.append("near-bank")
            ood.append({"id": f"clinc150-{key.replace('_', '-')}-{number:04d}",
                        "subject": SUBJECT, "message": query, "split": split, "tags": tags})
    for number, (query, intent) in enumerate(data["test"], start=1):
        if domain_of[intent] in BANK_DOMAINS or intent in BANK_LIKE_INTENTS:
            continue
        ood.append({"id": f"clinc150-test-{number:04d}", "subject": SUBJECT, "message": query,
                    "split": "test",
                    "tags": ["lang:en", "source:clinc150", "ood:other-domain",
                             f"clinc-domain:{domain_of[intent]}", f"clinc-intent:{intent}"]})

    return {
        "taxonomy.json": json.dumps(taxonomy, indent=2, ensure_ascii=False) + "\n",
        "to-policy-v1.json": json.dumps(mapping, indent=2) + "\n",
        "banking77.jsonl": jsonl(rows),
        "ood.jsonl": jsonl(ood),
    }, rows, ood, mapping


def report(rows, ood, mapping):
    for split in ("dev", "test"):
        part = [r for r in rows if r["split"] == split]
        urgent = sum(r["is_urgent"] for r in part)
        dup = sum("dup:cross-split" in r["tags"] for r in part)
        print(f"banking77.jsonl {split}: {len(part)} rows, {urgent} urgent "
              f"({urgent / len(part):.1%}), {dup} with a twin in the other split")
    kinds = Counter((r["split"], r["tags"][2], "near-bank" in r["tags"]) for r in ood)
    for (split, kind, near), n in sorted(kinds.items()):
        print(f"ood.jsonl {split} {kind}{' near-bank' if near else ''}: {n}")
    by_five = defaultdict(list)
    for intent, five in mapping.items():
        by_five[five].append(intent)
    for five in sorted(by_five):
        print(f"to-policy-v1 {five}: {len(by_five[five])} intents")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--banking77", type=Path, required=True)
    p.add_argument("--clinc", type=Path, required=True)
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    out, rows, ood, mapping = build(read_pinned(a.banking77, "banking77"),
                                    read_pinned(a.clinc, "clinc"))
    stale = []
    for name, text in out.items():
        path = HERE / name
        if a.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    report(rows, ood, mapping)
    if stale:
        sys.exit(f"out of date: {', '.join(stale)} (run without --check)")


if __name__ == "__main__":
    main()
