#!/usr/bin/env python3
"""A tiny OTLP/HTTP sink over TLS, for the e2e's "Honeycomb without a collector" case.

usage: e2e_https_sink.py CERT KEY PORT_FILE LOG

Listens on 127.0.0.1 (a free port, written to PORT_FILE), answers every POST with 200 and logs
one line per request: the path, the x-honeycomb-team header and the body size. Stops by
itself after 120 s. Standard library only.
"""

import http.server
import ssl
import sys
import threading

cert, key, port_file, log_path = sys.argv[1:5]
log = open(log_path, "a", buffering=1, encoding="utf-8")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        team = self.headers.get("x-honeycomb-team")
        log.write(f"POST {self.path} x-honeycomb-team={team} bytes={len(body)}\n")
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
with open(port_file, "w", encoding="utf-8") as f:
    f.write(str(server.server_address[1]))
threading.Timer(120, server.shutdown).start()
server.serve_forever()
