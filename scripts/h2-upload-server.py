# An HTTP/2 server (TLS, ALPN h2; the h2 protocol library hypercorn is built on) for one IETF resumable upload,
# for scripts/h2-resume-interop: the creation is answered with 104 and a Location, then the connection is cut
# after CUT bytes; a HEAD at the location says the offset; the PATCH that follows completes it. Logs each request.
import socket, ssl, sys, threading, hashlib
import h2.connection, h2.config, h2.events
# usage: h2-upload-server.py PORT CUT LOG CERT KEY
PORT = int(sys.argv[1]); CUT = int(sys.argv[2]); LOG = open(sys.argv[3], "a", buffering=1)
stored = bytearray(); state = {"cut": False, "complete": False}
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[4], sys.argv[5])
ctx.set_alpn_protocols(["h2"])
def serve(sock):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    conn.initiate_connection(); sock.sendall(conn.data_to_send())
    streams = {}
    try:
        while True:
            data = sock.recv(65536)
            if not data: return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    h = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v for k, v in ev.headers}
                    LOG.write(f"{h[':method']} {h[':path']} offset={h.get('upload-offset')} complete={h.get('upload-complete')} interop={h.get('upload-draft-interop-version')}\n")
                    streams[ev.stream_id] = h
                    if h[':method'] in ("POST", "PUT") and h.get('upload-draft-interop-version'):
                        conn.send_headers(ev.stream_id, [(":status", "104"), ("location", f"https://127.0.0.1:{PORT}/up/1"),
                                                         ("upload-draft-interop-version", h['upload-draft-interop-version'])])
                    if h[':method'] == "HEAD":
                        conn.send_headers(ev.stream_id, [(":status", "204"), ("upload-offset", str(len(stored))),
                                                         ("upload-complete", "?1" if state["complete"] else "?0"),
                                                         ("upload-draft-interop-version", h.get('upload-draft-interop-version', '6')),
                                                         ("cache-control", "no-store")], end_stream=True)
                elif isinstance(ev, h2.events.DataReceived):
                    stored.extend(ev.data); conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    if not state["cut"] and len(stored) >= CUT:
                        state["cut"] = True; LOG.write(f"cut at {len(stored)}\n"); sock.close(); return
                elif isinstance(ev, h2.events.StreamEnded):
                    h = streams.get(ev.stream_id, {})
                    if h.get(':method') in ("POST", "PUT", "PATCH"):
                        state["complete"] = True
                        LOG.write(f"complete {len(stored)} sha256 {hashlib.sha256(stored).hexdigest()}\n")
                        conn.send_headers(ev.stream_id, [(":status", "201"), ("upload-complete", "?1"), ("content-length", "0")], end_stream=True)
            sock.sendall(conn.data_to_send())
    except Exception as e:
        LOG.write(f"connection ended: {e!r}\n")
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", PORT)); s.listen(8)
while True:
    c, _ = s.accept()
    try: t = ctx.wrap_socket(c, server_side=True)
    except Exception as e: LOG.write(f"tls: {e!r}\n"); continue
    LOG.write(f"connection alpn={t.selected_alpn_protocol()}\n")
    threading.Thread(target=serve, args=(t,), daemon=True).start()
