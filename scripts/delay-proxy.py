#!/usr/bin/env python3
"""A TCP proxy that adds latency, for benchmarks: this machine's kernel has no netem (`tc qdisc add ... netem`
says "Specified qdisc kind is unknown"), so a link with a round trip is made here in user space instead.

    delay-proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS

Accepts TCP connections on 127.0.0.1:LISTEN_PORT and connects each to TARGET_HOST:TARGET_PORT. Every piece read
(up to 256 KiB at a time) is written to the other side DELAY_MS/2 after it was read, in order, each way, so a
round trip gains DELAY_MS (timer wake-ups add about 0.3 ms each way: 20.6 ms measured here for 20). A direction
holds at most 64 pieces (16 MiB); past that, and while the far side is slow to take what is written
(writer.drain()), reading stops, so TCP holds the sender back. An end of stream is passed on once what came
before it has been delivered, and the connection is closed when both ways have ended; a reset or a failed write
on either side closes both at once. Prints "listening" once bound; exits on SIGTERM.
"""
import asyncio
import signal
import sys

CHUNK = 256 * 1024
MAX_PIECES = 64


async def main():
    listen, host, port, delay_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    one_way = delay_ms / 2000
    loop = asyncio.get_running_loop()

    async def receive(reader, queue):
        """Stamps each piece with when it is due; None marks the end of stream."""
        while data := await reader.read(CHUNK):
            await queue.put((loop.time() + one_way, data))
        await queue.put(None)

    async def send(queue, writer):
        while (item := await queue.get()) is not None:
            due, data = item
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(host, port, limit=CHUNK)
        except OSError:
            client_writer.close()
            return
        writers = (client_writer, server_writer)
        for w in writers:
            w.transport.set_write_buffer_limits(high=4 * CHUNK)
        up, down = asyncio.Queue(MAX_PIECES), asyncio.Queue(MAX_PIECES)
        tasks = [asyncio.ensure_future(t) for t in (receive(client_reader, up), send(up, server_writer),
                                                   receive(server_reader, down), send(down, client_writer))]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            failed = any(not t.cancelled() and t.exception() is not None for t in done)
        except asyncio.CancelledError:  # the proxy is stopping
            failed = True
        for t in tasks:
            t.cancel()
        for w in writers:
            if failed:
                w.transport.abort()
            else:
                w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen, limit=CHUNK)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("listening", flush=True)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
