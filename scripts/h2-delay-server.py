"""An HTTP/2 server over TLS for scripts/bench (run under hypercorn): every answer waits DELAY seconds
(a link's round trip) before its head, then sends the file under ROOT named by the path. Each new client
connection (by the client's port) is appended to CONNECTIONS, so the bench can say how many a tool opened.
    ROOT=... DELAY=0.02 CONNECTIONS=file hypercorn --certfile c.pem --keyfile k.pem -b 127.0.0.1:PORT h2-delay-server:app
"""
import asyncio
import os

ROOT = os.environ["ROOT"]
DELAY = float(os.environ.get("DELAY", "0.02"))
CONNECTIONS = os.environ["CONNECTIONS"]
seen = set()
cache = {}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    client = scope.get("client")
    if client and client not in seen:
        seen.add(client)
        with open(CONNECTIONS, "a") as f:
            f.write(f"{client[0]}:{client[1]} {scope.get('http_version')}\n")
    await asyncio.sleep(DELAY)
    path = os.path.normpath(scope["path"]).lstrip("/")
    full = os.path.join(ROOT, path)
    if ".." in path or not os.path.isfile(full):
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    body = cache.get(full)
    if body is None:
        with open(full, "rb") as f:
            body = f.read()
        cache[full] = body
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/octet-stream")]})
    await send({"type": "http.response.body", "body": body})
