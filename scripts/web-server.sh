# Starts web/server.py (COOP/COEP) on a free port for the browser scripts and
# stops it on exit; sets WEB_URL. Sourced, not run.
web_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 web/server.py "$(pwd)" "$web_port" >/dev/null 2>&1 &
web_server=$!
trap 'kill $web_server 2>/dev/null' EXIT
for _ in $(seq 50); do
  curl -fs -o /dev/null "http://127.0.0.1:$web_port/web/" && break
  sleep 0.1
done
WEB_URL="http://127.0.0.1:$web_port/web/"
