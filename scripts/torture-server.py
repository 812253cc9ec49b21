#!/usr/bin/env python3
"""A hostile HTTP/1.1 server for scripts/torture, written against the socket API so it can break every rule.

Usage: torture-server.py PORT DIR   (serves until killed; uploads land in DIR; prints READY when listening)

GET  /long          Content-Length 1000, then 2000 bytes (the 1000 declared are "A", the rest "X")
GET  /short-once    Content-Length 100000; the first answer sends 40000 bytes and keeps the connection
                    open; a ranged retry gets the rest (ETag "v1", Accept-Ranges bytes)
GET  /loop          302 to itself
GET  /bigheader     a 1 MiB header line
GET  /huge          Content-Length 1048576, then bytes without end (until the client goes)
GET  /trickle       Content-Length 1000, one byte a second
GET  /gzip          Content-Encoding: gzip despite Accept-Encoding: identity (the body is the gzip bytes)
GET  /baddisp       Content-Disposition with invalid UTF-8 and a path: filename="..\\xff\\xfe/evil\\x1b[2J.txt"
GET  /ok            1000 bytes of "ok" (for IPv6 and credential checks)
PUT  /up/NAME       the body stored as DIR/NAME (a new file each time: NAME, NAME.1, ...)
POST /form/NAME     the same, for multipart bodies (stored raw with their Content-Type in NAME.type)
Every request line and its headers go to DIR/requests.log (one JSON object per line).
"""
import gzip
import json
import os
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
DIR = sys.argv[2]
LOCK = threading.Lock()
SHORT = bytes((i * 7 + 3) % 256 for i in range(100000))
GZ = gzip.compress(b"compressed body " * 1000)


def log(entry):
    with LOCK, open(os.path.join(DIR, "requests.log"), "a") as f:
        f.write(json.dumps(entry) + "\n")


def read_request(conn, buf):
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return (method, path, headers), buf


def read_body(conn, buf, headers):
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(buf) < n:
            chunk = conn.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf[:n], buf[n:]
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            while b"\r\n" not in buf:
                buf += conn.recv(65536)
            size_line, buf = buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < size + 2:
                chunk = conn.recv(65536)
                if not chunk:
                    return body, b""
                buf += chunk
            body += buf[:size]
            buf = buf[size + 2:]
            if size == 0:
                return body, buf
    return b"", buf


def store(name, body, ctype):
    name = os.path.basename(name) or "body"
    with LOCK:
        path = os.path.join(DIR, name)
        n = 0
        while os.path.exists(path):
            n += 1
            path = os.path.join(DIR, f"{name}.{n}")
        with open(path, "wb") as f:
            f.write(body)
        if ctype:
            with open(path + ".type", "w") as f:
                f.write(ctype)


def send(conn, status, headers, body=b""):
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    conn.sendall(head.encode("latin-1") + body)


def handle(conn):
    buf = b""
    try:
        while True:
            req, buf = read_request(conn, buf)
            if req is None:
                return
            method, path, headers = req
            log({"method": method, "path": path, "headers": headers, "at": time.time()})
            if method in ("PUT", "POST"):
                if headers.get("expect", "").lower() == "100-continue":
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                body, buf = read_body(conn, buf, headers)
                store(path.split("/")[-1], body, headers.get("content-type") if method == "POST" else None)
                send(conn, "201 Created", [("Content-Length", "0")])
                continue
            if path == "/long":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"A" * 1000 + b"X" * 1000)
                return
            if path == "/short-once":
                rng = headers.get("range")
                common = [("ETag", '"v1"'), ("Accept-Ranges", "bytes")]
                if rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    part = SHORT[start:]
                    send(conn, "206 Partial Content", common + [("Content-Length", str(len(part))),
                         ("Content-Range", f"bytes {start}-{len(SHORT) - 1}/{len(SHORT)}")], part)
                    continue
                send(conn, "200 OK", common + [("Content-Length", str(len(SHORT)))], SHORT[:40000])
                time.sleep(3600)  # the connection stays open with the rest never sent
                return
            if path == "/loop":
                send(conn, "302 Found", [("Location", "/loop"), ("Content-Length", "0")])
                continue
            if path == "/bigheader":
                send(conn, "200 OK", [("X-Big", "b" * (1 << 20)), ("Content-Length", "2")], b"ok")
                continue
            if path == "/huge":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n")
                block = b"H" * 65536
                sent = 0
                while sent < 10 << 30:
                    conn.sendall(block)
                    sent += len(block)
                return
            if path == "/trickle":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
                for _ in range(1000):
                    conn.sendall(b"t")
                    time.sleep(1)
                return
            if path == "/gzip":
                send(conn, "200 OK", [("Content-Encoding", "gzip"), ("Content-Length", str(len(GZ)))], GZ)
                continue
            if path == "/baddisp":
                head = (b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n"
                        b'Content-Disposition: attachment; filename="..\xff\xfe/evil\x1b[2J.txt"\r\n\r\nbody')
                conn.sendall(head)
                continue
            if path.startswith("/ok"):
                send(conn, "200 OK", [("Content-Length", "1000")], b"ok" * 500)
                continue
            send(conn, "404 Not Found", [("Content-Length", "0")])
    except (BrokenPipeError, ConnectionResetError, OSError):
        pass
    finally:
        conn.close()


def serve(family, host):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, PORT))
    s.listen(128)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


threading.Thread(target=serve, args=(socket.AF_INET, "127.0.0.1"), daemon=True).start()
try:
    threading.Thread(target=serve, args=(socket.AF_INET6, "::1"), daemon=True).start()
except OSError:
    pass
print("READY", flush=True)
while True:
    time.sleep(3600)
