#!/usr/bin/python3
"""Helpers of tests/e2e_remote.sh (datasets at URLs), every server on 127.0.0.1 only:

    remote_servers.py port                              a free TCP port on 127.0.0.1
    remote_servers.py wait PORT                         until 127.0.0.1:PORT accepts (<= 20 s)
    remote_servers.py upload ENDPOINT BUCKET PREFIX DIR  DIR's files as BUCKET/PREFIX/... (botocore,
                                                        signed with $AWS_ACCESS_KEY_ID/SECRET)
    remote_servers.py faultproxy PORT UPSTREAM SEED RATE LOG
                                                        a GET proxy to http://UPSTREAM that, per
                                                        request, with probability RATE answers 503
                                                        SlowDown and with probability RATE cuts the
                                                        body off halfway; one line per request in LOG
    remote_servers.py sigproxy PORT UPSTREAM KEY SECRET LOG [TOKEN]
                                                        a proxy (GET, PUT, POST, DELETE) to
                                                        http://UPSTREAM that checks each request's
                                                        body against its x-amz-content-sha256 and
                                                        its SigV4 signature as botocore computes
                                                        it (the same canonical request,
                                                        the secret SECRET; the session token TOKEN
                                                        signed when given) and refuses a mismatch
                                                        with 403 SignatureDoesNotMatch; "ok"/"bad"
                                                        per request in LOG
    remote_servers.py writefaults PORT UPSTREAM N LOG    a proxy to http://UPSTREAM (every method)
                                                        that answers 503 SlowDown to every PUT
                                                        after N PUTs went through
    remote_servers.py uploadorder PORT UPSTREAM LOG     a proxy to http://UPSTREAM (every method)
                                                        that records, as JSON in LOG, each shard
                                                        PUT's input_end with the reject positions
                                                        the journal object held as it arrived, and
                                                        the most shard PUTs under way at once (the
                                                        first is held until a second comes, <= 2 s)
    remote_servers.py putthrottle PORT UPSTREAM RATE     a proxy to http://UPSTREAM (every method)
                                                        that reads each PUT's body at most RATE
                                                        bytes/s, each connection on its own
    remote_servers.py throttle PORT UPSTREAM RATE [LOG]  a GET proxy to http://UPSTREAM whose answers
                                                        share one token bucket of RATE bytes/s
                                                        (a link of that rate; scripts/bench-remote.py);
                                                        "STATUS PATH RANGE" per request in LOG
    remote_servers.py cutranges PORT UPSTREAM LOG       a GET proxy to http://UPSTREAM that cuts the
                                                        first answer to a range bounded at both ends
                                                        (bytes=A-B) halfway, as faultproxy cuts, for
                                                        each end B
    remote_servers.py keys ENDPOINT BUCKET PREFIX       the keys under BUCKET/PREFIX, one a line
    remote_servers.py dump ENDPOINT BUCKET PREFIX DIR   the objects under BUCKET/PREFIX/ are DIR's
                                                        files (hidden ones aside), byte for byte
    remote_servers.py epoch LOCAL URL CACHE JSON        a Loader epoch (keywords JSON) from the URL
                                                        equals the one from LOCAL: bytes, labels,
                                                        indices, order
"""
import http.client
import http.server
import json
import os
import random
import re
import socket
import socketserver
import sys
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return 0
        except OSError:
            time.sleep(0.1)
    print(f"nothing listens on 127.0.0.1:{port}", file=sys.stderr)
    return 1


def client(endpoint):
    """a botocore S3 client of ENDPOINT, path-style, with the credentials of the environment"""
    import botocore.session
    from botocore.config import Config
    return botocore.session.get_session().create_client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}))


def keys(endpoint, bucket, prefix):
    """the keys under BUCKET/PREFIX, sorted"""
    c, out = client(endpoint), []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return sorted(out)


def folder_items(src):
    """(path, label) of every image in SRC's class folders, labels by sorted folder name, in
    path order: what `shardc build SRC` lists"""
    return sorted((os.path.join(src, c, f), k) for k, c in enumerate(sorted(os.listdir(src)))
                  for f in os.listdir(os.path.join(src, c)))


def upload(endpoint, bucket, prefix, root):
    c = client(endpoint)
    try:
        c.create_bucket(Bucket=bucket)
    except c.exceptions.BucketAlreadyOwnedByYou:
        pass
    except c.exceptions.BucketAlreadyExists:
        pass
    n = 0
    for d, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(d, f)
            key = prefix + "/" + os.path.relpath(p, root)
            with open(p, "rb") as fh:
                c.put_object(Bucket=bucket, Key=key, Body=fh.read())
            n += 1
    print(f"uploaded {n} objects to {bucket}/{prefix}")
    return 0


class FaultHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def draw(self):
        """below rate: a 503; below 2 * rate: the body cut halfway; else relayed whole"""
        with self.server.lock:
            return self.server.rng.random()

    def do_GET(self):
        srv = self.server
        draw = self.draw()
        rng = self.headers.get("Range", "-")
        if draw < srv.rate:
            body = (b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                    b"<Message>Please reduce your request rate.</Message></Error>")
            self.log(f"503 {self.path} {rng}")
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        up = http.client.HTTPConnection(srv.upstream, timeout=10)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        up.request("GET", self.path, headers=headers)
        r = up.getresponse()
        data = r.read()
        up.close()
        cut = draw < 2 * srv.rate and r.status in (200, 206) and len(data) > 1
        self.log(f"{'cut' if cut else r.status} {self.path} {rng}")
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "keep-alive"):
                self.send_header(k, v)
        self.send_header("Connection", "close" if cut else "keep-alive")
        self.end_headers()
        if cut:             # half the body, then the connection is gone
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.wfile.write(data)

    def log(self, line):
        with self.server.lock:
            with open(self.server.logpath, "a") as f:
                f.write(line + "\n")


def relay(handler, upstream, method, body, answered=None):
    """Forward one request (any method, its body) to http://upstream and its answer back;
    answered(status), if given, runs once upstream has answered and before the client hears."""
    up = http.client.HTTPConnection(upstream, timeout=30)
    headers = {k: v for k, v in handler.headers.items()
               if k.lower() not in ("connection", "expect")}
    up.request(method, handler.path, body=body, headers=headers)
    r = up.getresponse()
    data = r.read()
    up.close()
    if answered:
        answered(r.status)
    handler.send_response(r.status)
    for k, v in r.getheaders():
        if k.lower() not in ("connection", "transfer-encoding", "keep-alive", "content-length"):
            handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if method != "HEAD":
        handler.wfile.write(data)
    return r.status


def read_body(handler):
    n = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(n) if n else b""


class WriteFaultHandler(FaultHandler):
    """Forwards every request; after LIMIT uploads (PUTs) answered 2xx, every further PUT gets
    503 SlowDown: a bucket that stops taking objects halfway through a build."""

    def do_PUT(self):
        body = read_body(self)
        srv = self.server
        with srv.lock:
            stop = srv.puts >= srv.limit
        if stop:
            msg = (b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                   b"<Message>Please reduce your request rate.</Message></Error>")
            self.log(f"503 PUT {self.path}")
            self.send_response(503)
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        status = relay(self, srv.upstream, "PUT", body)
        with srv.lock:
            srv.puts += 200 <= status < 300
        self.log(f"{status} PUT {self.path}")

    def do_POST(self):
        relay(self, self.server.upstream, "POST", read_body(self))

    def do_DELETE(self):
        relay(self, self.server.upstream, "DELETE", None)

    def do_GET(self):
        relay(self, self.server.upstream, "GET", None)


class UploadOrderHandler(WriteFaultHandler):
    """Forwards every request, and records how a build's uploads went: for each shard PUT (whole
    object, raw shards), its header's input_end and the reject positions of the journal object as
    it stood when the PUT arrived; the journal PUTs' bodies; and the most shard PUTs under way at
    once. The first shard PUT is held until a second one is under way (at most 2 s), so that
    concurrent uploads show whatever the timing. All of it as JSON in LOG when each PUT ends."""

    def do_PUT(self):
        body = read_body(self)
        srv = self.server
        path = self.path.split("?")[0]
        shard = re.search(r"/shard-[0-9]+\.raw$", path) and "partNumber=" not in self.path
        if shard:
            input_end = int.from_bytes(body[104:112], "little")
            with srv.lock:
                srv.flight += 1
                srv.most = max(srv.most, srv.flight)
                srv.shards.append({"name": path, "input_end": input_end,
                                   "journal": sorted(journal_positions(srv.journal))})
                first = not srv.held
                srv.held = True
            if first:
                end = time.monotonic() + 2.0
                while time.monotonic() < end:
                    with srv.lock:
                        if srv.flight > 1:
                            break
                    time.sleep(0.01)
        def answered(status):
            # the journal as the bucket holds it from now on, recorded before the client hears
            # (it PUTs the shard at once, maybe on another connection)
            if path.endswith("/.rejects.journal") and 200 <= status < 300:
                with srv.lock:
                    srv.journal = body
                    srv.journals.append(sorted(journal_positions(body)))

        relay(self, srv.upstream, "PUT", body, answered)
        with srv.lock:
            if shard:
                srv.flight -= 1
            with open(srv.logpath, "w") as f:
                json.dump({"most": srv.most, "shards": srv.shards, "journals": srv.journals}, f)


class PutThrottleHandler(WriteFaultHandler):
    """Forwards every request; each PUT's body is read at most RATE bytes/s, each connection on
    its own (an object store's per-connection upload rate; scripts/bench-upload.py)."""

    def do_PUT(self):
        n = int(self.headers.get("Content-Length") or 0)
        t0, got, parts = time.monotonic(), 0, []
        while got < n:
            b = self.rfile.read(min(65536, n - got))
            if not b:
                break
            parts.append(b)
            got += len(b)
            ahead = got / self.server.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        relay(self, self.server.upstream, "PUT", b"".join(parts))


def journal_positions(body):
    """the input positions of a journal's rejects (its lines "<pos>\tpath\treason")"""
    return {int(ln.split(b"\t")[0]) for ln in body.splitlines() if ln[:1].isdigit()}


class SigHandler(FaultHandler):
    """Forwards only requests whose signature botocore's signer reproduces."""

    def refuse(self, code, message):
        body = (f"<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>{message}</Message>"
                f"</Error>").encode()
        self.log(f"bad {self.path} {code}")
        self.send_response(403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.checked("GET", None)

    def do_PUT(self):
        self.checked("PUT", read_body(self))

    def do_POST(self):
        self.checked("POST", read_body(self))

    def do_DELETE(self):
        self.checked("DELETE", None)

    def checked(self, method, body):
        import hashlib
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        srv = self.server
        auth = self.headers.get("Authorization", "")
        fields = dict(kv.strip().split("=", 1) for kv in
                      auth.replace("AWS4-HMAC-SHA256 ", "", 1).split(",") if "=" in kv)
        try:
            key, date, region, service, _ = fields["Credential"].split("/")
            signed = fields["SignedHeaders"].split(";")
            amzdate = self.headers["X-Amz-Date"]
        except (KeyError, ValueError):
            return self.refuse("AccessDenied", "no SigV4 Authorization")
        if key != srv.key:
            return self.refuse("InvalidAccessKeyId", "unknown key")
        if srv.token and (self.headers.get("X-Amz-Security-Token") != srv.token or
                          "x-amz-security-token" not in signed):
            return self.refuse("InvalidToken", "the session token is missing or unsigned")
        # the body is the one whose hash was signed (botocore signs the header's value)
        sha = self.headers.get("X-Amz-Content-SHA256", "")
        if sha != hashlib.sha256(body or b"").hexdigest():
            return self.refuse("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256'"
                               " header does not match what was computed.")
        req = AWSRequest(method=method, url=f"http://{self.headers['Host']}{self.path}",
                         headers={h: self.headers[h] for h in signed if h in self.headers})
        req.context["timestamp"] = amzdate
        signer = S3SigV4Auth(Credentials(srv.key, srv.secret, srv.token or None), service, region)
        want = signer.signature(signer.string_to_sign(req, signer.canonical_request(req)), req)
        if want != fields.get("Signature") or not date == amzdate[:8]:
            return self.refuse("SignatureDoesNotMatch", "The request signature we calculated "
                               "does not match the signature you provided.")
        self.log(f"ok {method} {self.path}" if method != "GET" else f"ok {self.path}")
        srv.rate = 0.0
        if method != "GET":
            return relay(self, srv.upstream, method, body)
        return FaultHandler.do_GET(self)


class CutRangesHandler(FaultHandler):
    """FaultHandler cutting, deterministically, the first request for each range bounded at both
    ends (bytes=A-B) halfway; every other request (the rest of a cut range: bytes=C-B) is relayed
    whole."""

    def draw(self):
        srv = self.server
        m = re.fullmatch(r"bytes=\d+-(\d+)", self.headers.get("Range", ""))
        with srv.lock:
            first = m is not None and m.group(1) not in srv.seen
            if m:
                srv.seen.add(m.group(1))
        return 1.5 * srv.rate if first else 1.0


class ThrottleHandler(FaultHandler):
    """Relays GETs, streaming each body through the server's token bucket: every connection
    together gets at most RATE bytes/s. The bucket holds BURST_S of the rate (at least a chunk):
    with one chunk's depth (2.6 ms at 100 MB/s, under Python's 5 ms thread switch) the tokens
    that came while every relaying thread was between chunks were lost, and the link moved
    about 0.9 of its rate however many transfers ran; a link's queue keeps them."""
    CHUNK = 256 * 1024
    BURST_S = 0.02

    def take(self, n):
        srv = self.server
        while True:
            with srv.lock:
                t = time.monotonic()
                srv.tokens = min(max(self.CHUNK, srv.rate * self.BURST_S),
                                 srv.tokens + (t - srv.last) * srv.rate)
                srv.last = t
                if srv.tokens >= n:
                    srv.tokens -= n
                    return
                wait = (n - srv.tokens) / srv.rate
            time.sleep(wait)

    def do_GET(self):
        up = http.client.HTTPConnection(self.server.upstream, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        up.request("GET", self.path, headers=headers)
        r = up.getresponse()
        if self.server.logpath:
            self.log(f"{r.status} {self.path} {self.headers.get('Range', '-')}")
        self.send_response(r.status)
        chunked = r.getheader("Content-Length") is None
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "keep-alive"):
                self.send_header(k, v)
        if chunked:             # an unknown length: read it whole first
            data = r.read()
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if chunked:
            for i in range(0, len(data), self.CHUNK):
                self.take(len(data[i:i + self.CHUNK]))
                self.wfile.write(data[i:i + self.CHUNK])
        else:
            while True:
                data = r.read(self.CHUNK)
                if not data:
                    break
                self.take(len(data))
                self.wfile.write(data)
        up.close()


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    # socketserver's backlog of 5 dropped the SYNs of a reader opening several connections at
    # once (its ranges of one object), and each dropped one waited out TCP's 1 s retransmission:
    # an object server's backlog is far larger
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # a client that gives up on a transfer (the reader abandons the rest after an error)
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def faultproxy(port, upstream, seed, rate, log):
    srv = ThreadingServer(("127.0.0.1", int(port)), FaultHandler)
    srv.upstream = upstream
    srv.rng = random.Random(int(seed))
    srv.rate = float(rate)
    srv.lock = threading.Lock()
    srv.logpath = log
    srv.serve_forever()


def cutranges(port, upstream, log):
    srv = ThreadingServer(("127.0.0.1", int(port)), CutRangesHandler)
    srv.upstream = upstream
    srv.rate = 0.5
    srv.seen = set()
    srv.lock = threading.Lock()
    srv.logpath = log
    srv.serve_forever()


def sigproxy(port, upstream, key, secret, log, token=""):
    srv = ThreadingServer(("127.0.0.1", int(port)), SigHandler)
    srv.upstream = upstream
    srv.rng = random.Random(0)
    srv.rate = 0.0
    srv.lock = threading.Lock()
    srv.logpath = log
    srv.key, srv.secret, srv.token = key, secret, token
    srv.serve_forever()


def writefaults(port, upstream, limit, log):
    srv = ThreadingServer(("127.0.0.1", int(port)), WriteFaultHandler)
    srv.upstream = upstream
    srv.rng = random.Random(0)
    srv.rate = 0.0
    srv.lock = threading.Lock()
    srv.logpath = log
    srv.limit, srv.puts = int(limit), 0
    srv.serve_forever()


def uploadorder(port, upstream, log):
    srv = ThreadingServer(("127.0.0.1", int(port)), UploadOrderHandler)
    srv.upstream = upstream
    srv.lock = threading.Lock()
    srv.logpath = log
    srv.flight = srv.most = 0
    srv.held = False
    srv.journal = b""
    srv.shards, srv.journals = [], []
    srv.serve_forever()


def putthrottle(port, upstream, rate):
    srv = ThreadingServer(("127.0.0.1", int(port)), PutThrottleHandler)
    srv.upstream = upstream
    srv.rate = float(rate)
    srv.lock = threading.Lock()
    srv.serve_forever()


def throttle(port, upstream, rate, log=None):
    srv = ThreadingServer(("127.0.0.1", int(port)), ThrottleHandler)
    srv.upstream = upstream
    srv.logpath = log
    srv.rate = float(rate)
    srv.tokens, srv.last = 0.0, time.monotonic()
    srv.lock = threading.Lock()
    srv.serve_forever()


def dump(endpoint, bucket, prefix, root):
    """Every object under BUCKET/PREFIX/ equals the file of its name under ROOT, and every
    file under ROOT but hidden ones is an object."""
    c = client(endpoint)
    names = [k[len(prefix) + 1:] for k in keys(endpoint, bucket, prefix + "/")]
    files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                   for f in fs if not f.startswith("."))
    if names != files:
        print(f"objects {names}\nfiles   {files}", file=sys.stderr)
        return 1
    for n in names:
        got = c.get_object(Bucket=bucket, Key=prefix + "/" + n)["Body"].read()
        with open(os.path.join(root, n), "rb") as f:
            if got != f.read():
                print(f"{n}: the object differs from the file", file=sys.stderr)
                return 1
    print(f"{len(names)} objects equal the files")
    return 0


def epoch(local, url, cache, kwargs):
    import numpy as np
    import shardread
    kw = json.loads(kwargs)
    a = shardread.Loader(local, return_indices=True, **kw)
    b = shardread.Loader(url, return_indices=True, cache=cache, **kw)
    n = 0
    for (xa, ya, ia), (xb, yb, ib) in zip(a, b):
        if not (np.array_equal(np.asarray(xa), np.asarray(xb)) and
                np.array_equal(np.asarray(ya), np.asarray(yb)) and
                np.array_equal(np.asarray(ia), np.asarray(ib))):
            print(f"batch {n} differs", file=sys.stderr)
            return 1
        n += 1
    if n == 0 or n != len(a):
        print(f"{n} batches compared, the epoch has {len(a)}", file=sys.stderr)
        return 1
    print(f"{n} batches equal")
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == "port":
        print(free_port())
        return 0
    if cmd == "wait":
        return wait(int(argv[2]))
    if cmd == "upload":
        return upload(*argv[2:6])
    if cmd == "faultproxy":
        faultproxy(*argv[2:7])
        return 0
    if cmd == "sigproxy":
        sigproxy(*argv[2:8])
        return 0
    if cmd == "writefaults":
        writefaults(*argv[2:6])
        return 0
    if cmd == "uploadorder":
        uploadorder(*argv[2:5])
        return 0
    if cmd == "putthrottle":
        putthrottle(*argv[2:5])
        return 0
    if cmd == "throttle":
        throttle(*argv[2:6])
        return 0
    if cmd == "cutranges":
        cutranges(*argv[2:5])
        return 0
    if cmd == "keys":
        print("\n".join(keys(*argv[2:5])))
        return 0
    if cmd == "dump":
        return dump(*argv[2:6])
    if cmd == "epoch":
        return epoch(*argv[2:6])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
