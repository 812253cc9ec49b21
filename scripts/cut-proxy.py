#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 for interop scripts: it forwards to a server, counts the bytes each way, can cut
the connection under way once the client has sent a given number of bytes in all (once), and can delay every piece each
way (a link with latency, where netem is not there).

    cut-proxy.py LISTEN_PORT TARGET_PORT STATS_FILE [--cut-after BYTES] [--delay-ms MS]

STATS_FILE is rewritten as JSON ({"up": bytes client->server, "down": ..., "cuts": n}) after every piece.
"""
import asyncio
import json
import os
import socket
import struct
import sys
import time


def main():
    args = sys.argv[1:]
    listen, target, stats_path = int(args[0]), int(args[1]), args[2]
    cut_after = None
    delay = 0.0
    rest = args[3:]
    while rest:
        if rest[0] == "--cut-after":
            cut_after = int(rest[1])
        elif rest[0] == "--delay-ms":
            delay = float(rest[1]) / 1000
        else:
            sys.exit(f"unknown option {rest[0]}")
        rest = rest[2:]
    stats = {"up": 0, "down": 0, "cuts": 0}
    state = {"cut_after": cut_after, "last_write": 0.0}

    def save():
        now = time.monotonic()
        # At most every 20 ms, and at once after a cut.
        if now - state["last_write"] < 0.02 and stats["cuts"] == 0:
            return
        state["last_write"] = now
        with open(stats_path + ".tmp", "w") as f:
            json.dump(stats, f)
        os.replace(stats_path + ".tmp", stats_path)

    async def pipe(reader, writer, key, seen, cut):
        """Copies one direction; with a delay, each piece leaves `delay` after it arrived, in order. At most 64
        pieces (4 MiB) wait in the proxy, as a link's buffers are bounded: a sender is held back by a slow
        receiver (a proxy that read on without bound let a client put a whole refused request into it)."""
        queue = asyncio.Queue(maxsize=64)

        async def send():
            """Writes the pieces in order; None ends with a clean end of stream, "reset" with none (a cut)."""
            while True:
                item = await queue.get()
                if item is None or item == "reset":
                    break
                due, data = item
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            if item is None:
                try:
                    writer.write_eof()
                except Exception:
                    pass

        sender = asyncio.ensure_future(send())
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if cut is not None and key == "up" and state["cut_after"] is not None \
                        and stats["up"] + len(data) >= state["cut_after"]:
                    keep = state["cut_after"] - stats["up"]
                    state["cut_after"] = None
                    stats[key] += keep
                    stats["cuts"] += 1
                    # What came before the cut arrives, in order; then the connection is reset (no clean end of body).
                    await queue.put((time.monotonic() + delay, data[:keep]))
                    await queue.put("reset")
                    try:
                        await sender
                    except Exception:
                        pass
                    save()
                    cut()
                    return
                seen[0] += len(data)
                stats[key] += len(data)
                save()
                await queue.put((time.monotonic() + delay, data))
        except (ConnectionError, asyncio.CancelledError):
            pass
        await queue.put(None)
        try:
            await sender
        except Exception:
            pass

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_writer.close()
            return
        seen = [0]
        tasks = []

        def cut():
            for w in (client_writer, server_writer):
                try:
                    # A reset, as a dropped link or a killed peer's kernel sends it.
                    w.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    w.transport.abort()
                except Exception:
                    pass
            for t in tasks:
                t.cancel()

        tasks.append(asyncio.ensure_future(pipe(client_reader, server_writer, "up", seen, cut)))
        tasks.append(asyncio.ensure_future(pipe(server_reader, client_writer, "down", seen, None)))
        await asyncio.gather(*tasks, return_exceptions=True)
        for w in (client_writer, server_writer):
            try:
                w.close()
            except Exception:
                pass
        state["last_write"] = 0
        save()

    async def run():
        server = await asyncio.start_server(handle, "127.0.0.1", listen)
        async with server:
            await server.serve_forever()

    save()
    asyncio.run(run())


if __name__ == "__main__":
    main()
