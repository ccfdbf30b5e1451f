#!/usr/bin/env python3
"""The arrivals of `scripts/soak`: POST /tickets at RATE a second for MINUTES minutes from
START (epoch seconds, on the clock this process sees), PEAK times that in every tenth minute
from PEAK_FIRST on (minutes counted from 0), every body unique. Requests are due by the clock
(a slow answer delays no later one: a pool of threads with a kept-alive connection each sends
them); a request refused or failed is not retried (the caller's problem, counted).

Writes in DIR: `acknowledged` (the id of every 201, one a line, appended as it goes) and
`totals` (so far: "sent acknowledged status503 other_status errors", rewritten every second;
the soak's minutes are differences of it).

    python3 day-load.py URL START MINUTES RATE PEAK PEAK_FIRST DIR
"""

import http.client
import os
import json
import queue
import sys
import threading
import time
import urllib.parse

url, start, minutes = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rate, peak, peak_first, out = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
target = urllib.parse.urlsplit(url)
SENDERS = 32

lock = threading.Lock()
totals = [0, 0, 0, 0, 0]  # sent, acknowledged, 503, other, errors
acknowledged = open(f"{out}/acknowledged", "a", buffering=1)
due = queue.Queue(maxsize=10000)


def rate_in(minute):
    return rate * (peak if minute >= peak_first and (minute - peak_first) % 10 == 0 else 1)


def count(column):
    with lock:
        totals[column] += 1


def sender():
    connection = None
    while True:
        item = due.get()
        if item is None:
            return
        n = item
        body = json.dumps({
            "subject": f"Day ticket {start:.0f}-{n}",
            "message": f"Refund please, order {start:.0f}-{n} was charged twice.",
        })
        count(0)
        try:
            if connection is None:
                connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            connection.request("POST", "/tickets", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException):
            count(4)
            connection = None
            continue
        if response.status == 201:
            count(1)
            acknowledged.write(json.loads(answer)["id"] + "\n")
        else:
            count(2 if response.status == 503 else 3)


def write_totals():
    with lock:
        row = " ".join(map(str, totals))
    with open(f"{out}/totals.new", "w") as f:
        f.write(row + "\n")
    os.replace(f"{out}/totals.new", f"{out}/totals")


def report(stop):
    while not stop.wait(1):
        write_totals()


threads = [threading.Thread(target=sender, daemon=True) for _ in range(SENDERS)]
for thread in threads:
    thread.start()

stopped = threading.Event()
threading.Thread(target=report, args=(stopped,), daemon=True).start()
n = 0
for minute in range(minutes):
    per_minute = int(round(rate_in(minute) * 60))
    begin = start + minute * 60
    for i in range(per_minute):
        wait = begin + i * 60 / per_minute - time.time()
        if wait > 0:
            time.sleep(wait)
        due.put(n)
        n += 1
for _ in threads:
    due.put(None)
for thread in threads:
    thread.join()
stopped.set()
write_totals()
