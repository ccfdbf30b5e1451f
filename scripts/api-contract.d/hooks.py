"""Schemathesis hooks for scripts/api-contract (loaded through SCHEMATHESIS_HOOKS).

One: every schema-valid `Idempotency-Key` sent is fresh. The API answers a key already used
with another subject or message with 422 (openapi.yaml, IETF httpapi draft), state that a
generator cannot see: it draws short keys ("0", "A") again and again with other bodies, and
`positive_data_acceptance` would call each such 422 a valid request rejected. A fresh key per
call (this run's prefix and a count, appended) keeps the generated form (quoted or bare, its
characters, within 255) and makes any 422 on a valid request a real finding. Keys the schema
calls invalid are sent as generated.
"""

import itertools
import re
import secrets

import schemathesis

# openapi.yaml's pattern for the header (components.parameters.IdempotencyKey).
VALID_KEY = re.compile(r'^(?!""$)(?![\t ]*$)("[\t\x20-\x7E]{1,255}"|[\t\x20-\x7E]{1,255})$')
MAX_KEY = 255
# Keys are remembered for 24 hours: a run's own prefix keeps them apart from earlier runs'.
run = secrets.token_hex(4)
calls = itertools.count()


@schemathesis.hook
def before_call(context, case, kwargs):
    if not case.headers:
        return
    key = case.headers.get("Idempotency-Key")
    if not isinstance(key, str) or not VALID_KEY.match(key):
        return
    suffix = f"~{run}.{next(calls):x}"
    quoted = len(key) >= 2 and key.startswith('"') and key.endswith('"')
    inner = key[1:-1] if quoted else key
    inner = inner[: MAX_KEY - len(suffix)] + suffix
    case.headers["Idempotency-Key"] = f'"{inner}"' if quoted else inner
