#!/usr/bin/python3
# An FTP server for ferry's tests (Tests/TestHTTPServer/TestFTPServer.swift), on 127.0.0.1: pyftpdlib (Debian's
# python3-pyftpdlib), a real, widely used FTP server library, with one user. It prints "PORT n" once it
# listens, and logs each transfer's end to stderr as `DONE <RETR|STOR> <path> <bytes>`: what a resume asked for,
# in the server's own words.
#   ftp-test-server.py ROOT USER PASSWORD
import logging
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer

root, user, password = sys.argv[1:4]

authorizer = DummyAuthorizer()
authorizer.add_user(user, password, root, perm="elradfmwMT")

class Handler(FTPHandler):
    authorizer = authorizer
    banner = "ferry test ftp"
    passive_ports = None
    permit_foreign_addresses = False

    def on_file_sent(self, path):
        self.report("RETR", path)

    def on_file_received(self, path):
        self.report("STOR", path)

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
