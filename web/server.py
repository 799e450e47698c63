"""Static server for the web demo, bound to 127.0.0.1, with the cross-origin
isolation headers (COOP/COEP) that threaded WebAssembly needs.

Serves the repository root, so /web/ is the page, /npm/ the package and
/models/ the local models (symlinks are followed). The same files under
/plain/ come without the isolation headers, as from an ordinary host: the
page then falls back to the single-thread build (the browser test checks)."""

import functools
import http.server
import sys

PLAIN = "/plain"


class IsolatedHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
    }

    def translate_path(self, path):
        self.isolated = not (path == PLAIN or path.startswith(PLAIN + "/"))
        if not self.isolated:
            path = path[len(PLAIN):] or "/"
        return super().translate_path(path)

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
