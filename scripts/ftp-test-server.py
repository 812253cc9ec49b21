#!/usr/bin/python3
# An FTP server for ferry's tests (Tests/TestHTTPServer/TestFTPServer.swift), on 127.0.0.1: pyftpdlib (Debian's
# python3-pyftpdlib), a real, widely used FTP server library, with one user. It prints "PORT n" once it
# listens, and logs each transfer's end to stderr as `DONE <RETR|STOR> <path> <bytes>`: what a resume asked for,
# in the server's own words.
# A file stored as `lossy-NAME` loses all but its first 112 KiB the first time it is stored, and the server still
# answers 226: what pyftpdlib did to an ftps upload whose data connection libcurl < 8.9 reset (curl/curl#6149).
# With `--tls CERTFILE` (a PEM holding the certificate and its key) it speaks explicit TLS (AUTH TLS, pyftpdlib's
# TLS_FTPHandler over Debian's python3-openssl) and requires it for the login and every data connection.
#   ftp-test-server.py ROOT USER PASSWORD [--tls CERTFILE]
import logging
import os
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer

root, user, password = sys.argv[1:4]
tls = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--tls" else None
if tls:
    from pyftpdlib.handlers import TLS_DTPHandler, TLS_FTPHandler as FTPHandler

    class DataHandler(TLS_DTPHandler):
        # pyftpdlib 1.5.7 closes a data connection that is readable before its transfer command (DTPHandler.readable),
        # so a client that starts the data connection's TLS handshake at once, as libcurl does, is cut off (lftp,
        # which starts it after the command, gets through): the handshake is let through first.
        def readable(self):
            return True if self._ssl_accepting else super().readable()

lossy_cut = set()
authorizer = DummyAuthorizer()
authorizer.add_user(user, password, root, perm="elradfmwMT")

class Handler(FTPHandler):
    authorizer = authorizer
    banner = "ferry test ftp"
    if tls:
        certfile = tls
        dtp_handler = DataHandler
        tls_control_required = True
        tls_data_required = True
    passive_ports = None
    permit_foreign_addresses = False

    def on_file_sent(self, path):
        self.report("RETR", path)

    def on_file_received(self, path):
        self.report("STOR", path)
        if os.path.basename(path).startswith("lossy-") and path not in lossy_cut:
            lossy_cut.add(path)
            os.truncate(path, min(os.path.getsize(path), 112 << 10))

    def on_incomplete_file_sent(self, path):
        self.report("RETR", path)

    def on_incomplete_file_received(self, path):
        self.report("STOR", path)

    def report(self, what, path):
        sys.stderr.write("DONE %s %s %d\n" % (what, path, self.data_channel.tot_bytes_sent if what == "RETR" and self.data_channel
                                             else self.data_channel.tot_bytes_received if self.data_channel else -1))
        sys.stderr.flush()


logging.basicConfig(level=logging.WARNING)
server = FTPServer(("127.0.0.1", 0), Handler)
print("PORT %d" % server.socket.getsockname()[1], flush=True)
server.serve_forever()
