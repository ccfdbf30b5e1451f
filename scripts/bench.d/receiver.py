"""A webhook receiver for `scripts/bench delivery`: answers every POST with 204 after DELAY
seconds, on 127.0.0.1:PORT, many requests at once (a thread each).

    python3 receiver.py PORT DELAY
"""
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay = 0.0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.delay:
            time.sleep(self.delay)
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    Receiver.delay = float(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver)
    server.daemon_threads = True
    print(f"http://127.0.0.1:{sys.argv[1]}/hook", flush=True)
    server.serve_forever()
