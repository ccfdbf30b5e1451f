#!/usr/bin/env python3
"""A burst of new tickets for `scripts/bench cost`: COUNT POSTs to URL/tickets spread evenly
over SECONDS by the clock (a slow answer delays no later request: a few threads send them),
every body unique. Prints "posted=N failed=M"."""

import json
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

url, count, seconds, nonce = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
lock = threading.Lock()
failed = 0


def post(i):
    global failed
    body = json.dumps({
        "subject": f"Burst ticket {nonce}-{i}",
        "message": f"Refund please, order {nonce}-{i} was charged twice.",
    }).encode()
    request = urllib.request.Request(f"{url}/tickets", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            ok = response.status == 201
    except Exception:  # noqa: BLE001 - any failure is counted, none stops the burst
        ok = False
    if not ok:
        with lock:
            failed += 1


started = time.monotonic()
with ThreadPoolExecutor(max_workers=8) as pool:
    for i in range(count):
        due = started + i * seconds / count
        time.sleep(max(0.0, due - time.monotonic()))
        pool.submit(post, i)
print(f"posted={count - failed} failed={failed}")
