"""Load generator for `endoret serve` (bench/serve_bench.sh), Python standard library only. Every
request is a fresh loopback connection with a timeout; every loop is bounded by --seconds.

  serve_load.py load  --port P --clients N --seconds S (--get PATH | --post PATH --files F1,F2,...)
      N threads send requests back to back for S seconds: requests/s of answered ones (200), the
      503s (busy), failures, and p50 / p99 latency of the 200s.
  serve_load.py bomb  --port P --clients N --seconds S --files BOMB   (each request: 4 copies of BOMB)
  serve_load.py slowloris --port P --conns N --seconds S
      N connections from 127.0.0.2..5 sending one header byte every 3 s (the audit's pattern).
With --probe-every T, a probe thread also GETs / every T seconds and reports its answered share and
worst latency. With --pid, the server's peak resident memory (VmHWM) is printed at the end.
"""
import argparse
import json
import socket
import sys
import threading
import time
import uuid


def request(port, method, path, body=None, ctype=None, timeout=30.0, src="127.0.0.1"):
    """(status, seconds); status 0 on a failure or timeout (a connection closed unanswered)."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(src, 0)) as s:
            head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" % (method, path)
            if body is not None:
                head += "Content-Type: %s\r\nContent-Length: %d\r\n" % (ctype, len(body))
            s.sendall(head.encode() + b"\r\n" + (body or b""))
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else 0
    except (OSError, ValueError, IndexError):
        status = 0
    return status, time.monotonic() - t0


def multipart(files):
    boundary = uuid.uuid4().hex
    parts = []
    for name, data in files:
        parts.append(("--%s\r\nContent-Disposition: form-data; name=\"views\"; filename=\"%s\"\r\n"
                      "Content-Type: application/octet-stream\r\n\r\n" % (boundary, name)).encode() + data + b"\r\n")
    return b"".join(parts) + ("--%s--\r\n" % boundary).encode(), "multipart/form-data; boundary=" + boundary


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def peak_rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class Probe(threading.Thread):
    def __init__(self, port, every, stop):
        super().__init__(daemon=True)
        self.port, self.every, self.stop, self.res = port, every, stop, []

    def run(self):
        while not self.stop.is_set():
            self.res.append(request(self.port, "GET", "/", timeout=10.0))
            self.stop.wait(self.every)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["load", "bomb", "slowloris"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--conns", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--get")
    ap.add_argument("--post")
    ap.add_argument("--files", default="")
    ap.add_argument("--probe-every", type=float, default=0.0)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--addrs", type=int, default=1, help="clients spread over 127.0.0.1..N (the per-address limit is 32)")
    a = ap.parse_args()
    stop = threading.Event()
    probe = Probe(a.port, a.probe_every, stop) if a.probe_every > 0 else None
    out = {"mode": a.mode}
    files = [(p.rsplit("/", 1)[-1], open(p, "rb").read()) for p in a.files.split(",") if p]
    if probe:
        probe.start()
    t_end = time.monotonic() + a.seconds
    if a.mode in ("load", "bomb"):
        if a.mode == "bomb":
            files = files * 4
        body, ctype = multipart(files) if files else (None, None)
        method, path = ("POST", a.post or "/case.json") if body is not None else ("GET", a.get or "/")
        results, lock = [], threading.Lock()

        def client(i):
            src = "127.0.0.%d" % (1 + i % a.addrs)
            while time.monotonic() < t_end:
                r = request(a.port, method, path, body, ctype, timeout=60.0, src=src)
                with lock:
                    results.append(r)
                if r[0] == 503:  # told to come back: as a client honouring Retry-After would, a little later
                    time.sleep(0.05)

        ths = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
        t0 = time.monotonic()
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        wall = time.monotonic() - t0
        ok = [s for st, s in results if st == 200]
        out.update({"method": method, "path": path, "clients": a.clients, "addrs": a.addrs, "seconds": round(wall, 2), "requests": len(results),
                    "ok": len(ok), "busy_503": sum(1 for st, _ in results if st == 503),
                    "other": {str(st): sum(1 for x, _ in results if x == st) for st in set(x for x, _ in results) if st not in (200, 503)},
                    "ok_per_s": round(len(ok) / wall, 2), "p50_ms": round(1e3 * pct(ok, 50), 1), "p99_ms": round(1e3 * pct(ok, 99), 1)})
    else:  # slowloris: the audit's 32-per-address pattern over 127.0.0.2..5
        socks = []
        for i in range(a.conns):
            try:
                s = socket.socket()
                s.bind(("127.0.0.%d" % (2 + i % 4), 0))
                s.settimeout(2.0)
                s.connect(("127.0.0.1", a.port))
                s.send(b"G")
                socks.append(s)
            except OSError:
                pass
        out["opened"] = len(socks)
        closed = 0
        while time.monotonic() < t_end:
            time.sleep(min(3.0, max(0.0, t_end - time.monotonic())))
            for s in list(socks):
                try:
                    s.send(b"E")
                except OSError:  # shut by the server: reopen, as an attacker would
                    closed += 1
                    socks.remove(s)
                    s.close()
                    try:
                        n = socket.socket()
                        n.bind(("127.0.0.%d" % (2 + closed % 4), 0))
                        n.settimeout(2.0)
                        n.connect(("127.0.0.1", a.port))
                        n.send(b"G")
                        socks.append(n)
                    except OSError:
                        pass
        out["closed_by_server"] = closed
        for s in socks:
            s.close()
    stop.set()
    if probe:
        probe.join()
        lat = [s for st, s in probe.res if st == 200]
        out["probe"] = {"sent": len(probe.res), "answered": len(lat), "p50_ms": round(1e3 * pct(lat, 50), 1),
                        "max_ms": round(1e3 * max(lat), 1) if lat else None}
    if a.pid:
        out["server_peak_rss_mb"] = round(peak_rss_mb(a.pid), 1)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
