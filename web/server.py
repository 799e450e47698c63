"""Static server for the web demo, bound to 127.0.0.1, with the cross-origin
isolation headers (COOP/COEP) that threaded WebAssembly needs.

Serves the repository root, so /web/ is the page, /npm/ the package and
/models/ the local models (symlinks are followed). The same files under
/plain/ come without the isolation headers, as from an ordinary host: the
page then falls back to the single-thread build (the browser test checks).

Byte ranges are served (206) as model hosts serve them. For the browser
test's downloads, the same files under /flaky/ drop the connection halfway
through the first request for each range but the one from byte 0 (once per
range end of each URL, so the request for the rest of it is answered
whole), and under /slow/ arrive a MiB every 20 ms."""

import functools
import http.server
import os
import re
import socket
import sys
import threading
import time

PLAIN = "/plain"
FLAKY = "/flaky"
SLOW = "/slow"
RANGE = re.compile(r"bytes=(\d+)-(\d*)")
CHUNK = 1 << 20

# (request path with its query, end) of the ranges /flaky/ has cut already.
cut_ranges = set()
cut_lock = threading.Lock()


class IsolatedHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
    }

    def translate_path(self, path):
        def under(prefix):
            return path == prefix or path.startswith(prefix + "/")

        self.isolated, self.flaky, self.slow = not under(PLAIN), under(FLAKY), under(SLOW)
        for prefix in (PLAIN, FLAKY, SLOW):
            if under(prefix):
                path = path[len(prefix):] or "/"
        return super().translate_path(path)

    def do_GET(self):
        match = RANGE.fullmatch(self.headers.get("Range", ""))
        path = self.translate_path(self.path.split("?")[0])
        if match is None or not os.path.isfile(path):
            return super().do_GET()
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = int(match[1])
            end = min(int(match[2]) if match[2] else size - 1, size - 1)
            if start >= size:
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Type", self.guess_type(path))
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            f.seek(start)
            remaining = end - start + 1
            stop_after = remaining
            if self.flaky and start > 0:
                with cut_lock:
                    if (self.path, end) not in cut_ranges:
                        cut_ranges.add((self.path, end))
                        stop_after = remaining // 2
            sent = 0
            while sent < stop_after:
                chunk = f.read(min(CHUNK, stop_after - sent))
                self.wfile.write(chunk)
                sent += len(chunk)
                if self.slow:
                    time.sleep(0.02)
            if stop_after < remaining:
                # The connection drops mid-body, as a network would.
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True


    def end_headers(self):
        if getattr(self, "isolated", True):
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format, *args):
        pass


def main():
    root, port = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8080
    handler = functools.partial(IsolatedHandler, directory=root)
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving {root} on http://127.0.0.1:{port}/web/", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
