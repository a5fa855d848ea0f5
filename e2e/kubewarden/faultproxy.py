"""A fault-injecting HTTP proxy between policy-server and fakeapi (Python 3 stdlib only).

policy-server's kubeconfig points at the proxy; the proxy forwards every request to fakeapi,
streaming watches line by line, unless a fault rule matching the request says otherwise:

    proxy = FaultProxy(upstream="http://127.0.0.1:PORT")     # or host.start_fault_proxy(...)
    proxy.add(Fault("status", code=429, retry_after=2, path=r"/api/v1/nodes"))
    proxy.add(Fault("delay", seconds=5, watch=False))
    proxy.add(Fault("gone", path=r"/api/v1/pods", times=1))   # next pod watch: ERROR 410 Expired
    proxy.add(Fault("cut", after_events=0))                   # watches close before any event
    proxy.remember_lists(); ...; proxy.add(Fault("stale"))    # lists answered from the old copy
    proxy.cut_watches()                                       # every open watch closed now
    proxy.down(); proxy.up()                                  # connections refused, then accepted
    proxy.clear()

Fault kinds:
- `delay`: wait `seconds` before forwarding;
- `status`: answer `code` (429, 500, 503 ...) with a Kubernetes Status body and, when given,
  `Retry-After: retry_after`;
- `gone`: a watch is answered 200 with one `ERROR` event holding a 410 `Expired` Status (as
  the API server does when the watch's resourceVersion is too old); the client relists;
- `cut`: a watch is forwarded for `after_events` events, then its connection is closed
  without the chunked stream's end (what a client sees when an API server or a load
  balancer drops it);
- `stale`: a list is answered with the copy taken by the last `remember_lists()` (its old
  items and old `metadata.resourceVersion`), as an API server whose cache lags behind does.

A rule matches on `path` (a regex searched in the path and query), `watch` (True: only
watches, False: only other requests, None: both) and `method`; `times` (None: until
cleared) counts the requests it is applied to. The first matching rule applies. `down()`
closes the listening socket and every open connection, so new connections are refused
(ECONNREFUSED) until `up()` listens again on the same port.

Every request is recorded (`requests()`: method, path, watch, what was done, time), so a test
waits on what the proxy saw instead of sleeping. The same controls are served over HTTP
under /faultproxy/ (GET state, POST fault with the rule as JSON, POST clear, POST cut,
POST remember) for scripts in other processes.
"""

import http.client
import json
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
              "transfer-encoding", "upgrade", "content-length"}
KINDS = ("delay", "status", "gone", "cut", "stale")
REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


@dataclass
class Fault:
    kind: str
    path: str = ""
    watch: object = None
    method: str = "GET"
    times: object = None
    seconds: float = 0.0
    code: int = 500
    retry_after: object = None
    after_events: int = 0
    applied: int = field(default=0)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: one of {', '.join(KINDS)}")
        self._path = re.compile(self.path)

    def matches(self, method, target, watch):
        if self.times is not None and self.applied >= self.times:
            return False
        if self.method and method != self.method:
            return False
        if self.watch is not None and bool(self.watch) != watch:
            return False
        if self.kind in ("gone", "cut") and not watch:
            return False
        if self.kind == "stale" and watch:
            return False
        return bool(self._path.search(target))

    def describe(self):
        fields = {"delay": ("seconds",), "status": ("code", "retry_after"), "cut": ("after_events",)}
        d = {"kind": self.kind}
        d.update((k, getattr(self, k)) for k in ("path", "watch", "times") + fields.get(self.kind, ())
                 if getattr(self, k) not in (None, ""))
        d["applied"] = self.applied
        return d


@dataclass
class Seen:
    method: str
    target: str
    watch: bool
    action: str
    at: float
    events: int = 0
    status: int = 0


def is_watch(target):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
    return query.get("watch", [""])[0] in ("true", "1") or "/watch/" in urllib.parse.urlsplit(target).path


def list_key(target):
    """A list request without its paging and resourceVersion parameters."""
    parts = urllib.parse.urlsplit(target)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
             if k not in ("limit", "continue", "resourceVersion", "resourceVersionMatch")]
    return parts.path + "?" + urllib.parse.urlencode(sorted(query))


def status_body(code, message):
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": REASONS.get(code, "Unknown"), "code": code}).encode()


class FaultProxy:
    def __init__(self, upstream, port=0, log=None):
        parts = urllib.parse.urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.log = log
        self.lock = threading.Lock()
        self.faults = []
        self.seen = []
        self.last_lists = {}
        self.remembered = {}
        self.streams = {}  # client socket -> upstream socket, for every watch being streamed
        self.server = None
        self.port = port
        self.up()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    # -- control -------------------------------------------------------------------------

    def add(self, fault):
        with self.lock:
            self.faults.append(fault)
        self._log(f"fault on: {fault.describe()}")
        return fault

    def clear(self):
        with self.lock:
            self.faults.clear()
        self._log("faults cleared")

    def remember_lists(self):
        """The list answers seen so far become the old copies `stale` serves."""
        with self.lock:
            self.remembered = dict(self.last_lists)
            return len(self.remembered)

    def requests(self, since=0.0):
        with self.lock:
            return [s for s in self.seen if s.at >= since]

    def cut_watches(self):
        """Closes every watch being streamed now; returns how many."""
        with self.lock:
            streams = list(self.streams.items())
        for client, upstream in streams:
            _close(client)
            _close(upstream)
        self._log(f"cut {len(streams)} watches")
        return len(streams)

    def open_watches(self):
        with self.lock:
            return len(self.streams)

    def down(self):
        """Stops listening (new connections are refused) and closes every open connection."""
        server, self.server = self.server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            with self.lock:
                conns = list(server.open_connections)
            for sock in conns:
                _close(sock)
        self.cut_watches()
        self._log("down: connections refused")

    def up(self):
        if self.server is not None:
            return
        last = None
        for _ in range(100):  # the old socket's port may take a moment to be free again
            try:
                server = _Server(("127.0.0.1", self.port), _Handler)
                break
            except OSError as e:
                last = e
                time.sleep(0.05)
        else:
            raise OSError(f"faultproxy cannot listen on 127.0.0.1:{self.port}: {last}")
        server.proxy = self
        server.open_connections = set()
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._log(f"up on {self.url}")

    def close(self):
        self.down()

    def _log(self, text):
        if self.log is not None:
            self.log(f"faultproxy: {text}")

    # -- the request path ----------------------------------------------------------------

    def _choose(self, method, target, watch):
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, target, watch):
                    fault.applied += 1
                    return fault
        return None

    def _record(self, seen):
        with self.lock:
            self.seen.append(seen)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def process_request(self, request, client_address):
        with self.proxy.lock:
            self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.proxy.lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)


def _close(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    @property
    def proxy(self):
        return self.server.proxy

    def do_GET(self):
        self._handle()

    def do_POST(self):
        self._handle()

    def do_PUT(self):
        self._handle()

    def do_DELETE(self):
        self._handle()

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else None

    def _reply(self, code, body, headers=()):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _handle(self):
        if self.path.startswith("/faultproxy/"):
            return self._control()
        proxy = self.proxy
        body = self._body()
        watch = is_watch(self.path)
        seen = Seen(self.command, self.path, watch, "forward", time.monotonic())
        proxy._record(seen)  # recorded now, completed in place: open watches are seen too
        fault = proxy._choose(self.command, self.path, watch)
        try:
            if fault is not None:
                seen.action = fault.kind
                if fault.kind == "delay":
                    time.sleep(fault.seconds)
                elif fault.kind == "status":
                    seen.status = fault.code
                    headers = [("Retry-After", str(fault.retry_after))] if fault.retry_after is not None else []
                    return self._reply(fault.code, status_body(fault.code, f"faultproxy: HTTP {fault.code}"), headers)
                elif fault.kind == "gone":
                    seen.status = 200
                    return self._gone()
                elif fault.kind == "stale":
                    old = proxy.remembered.get(list_key(self.path))
                    if old is not None:
                        seen.status = 200
                        return self._reply(200, old)
                    seen.action = "forward (no old copy)"
            self._forward(body, watch, seen, fault if fault is not None and fault.kind == "cut" else None)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _gone(self):
        line = json.dumps({"type": "ERROR", "object": json.loads(status_body(410, "faultproxy: too old resource version"))
                           | {"reason": "Expired"}}).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(line), line))

    def _forward(self, body, watch, seen, cut):
        proxy = self.proxy
        conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=None if watch else 60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "host"}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        seen.status = resp.status
        try:
            if resp.getheader("Transfer-Encoding", "").lower() != "chunked":
                data = resp.read()
                if resp.status == 200 and not watch and self.command == "GET":
                    with proxy.lock:
                        proxy.last_lists[list_key(self.path)] = data
                return self._reply(resp.status, data, [(k, v) for k, v in resp.getheaders()
                                                      if k.lower() not in HOP_BY_HOP and k.lower() != "content-type"])
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            upstream_sock = conn.sock
            with proxy.lock:
                proxy.streams[self.connection] = upstream_sock
            try:
                while True:
                    if cut is not None and seen.events >= cut.after_events:
                        seen.action = f"cut after {seen.events} events"
                        _close(upstream_sock)
                        self.close_connection = True
                        _close(self.connection)
                        return
                    line = resp.readline()
                    if not line:
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                    seen.events += 1
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            finally:
                with proxy.lock:
                    proxy.streams.pop(self.connection, None)
        finally:
            conn.close()

    def _control(self):
        proxy = self.proxy
        path = urllib.parse.urlsplit(self.path).path
        body = self._body()
        if self.command == "GET" and path == "/faultproxy/state":
            with proxy.lock:
                state = {"faults": [f.describe() for f in proxy.faults], "requests": len(proxy.seen),
                         "openWatches": len(proxy.streams)}
            return self._reply(200, json.dumps(state).encode())
        if self.command == "POST" and path == "/faultproxy/fault":
            try:
                fault = Fault(**json.loads(body or b"{}"))
            except (TypeError, ValueError) as e:
                return self._reply(400, json.dumps({"error": str(e)}).encode())
            proxy.add(fault)
            return self._reply(200, json.dumps(fault.describe()).encode())
        if self.command == "POST" and path == "/faultproxy/clear":
            proxy.clear()
            return self._reply(200, b"{}")
        if self.command == "POST" and path == "/faultproxy/cut":
            return self._reply(200, json.dumps({"cut": proxy.cut_watches()}).encode())
        if self.command == "POST" and path == "/faultproxy/remember":
            return self._reply(200, json.dumps({"lists": proxy.remember_lists()}).encode())
        return self._reply(404, json.dumps({"error": f"no control {self.command} {path}"}).encode())
