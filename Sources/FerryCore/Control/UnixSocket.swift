import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The few socket calls the control socket needs: a listening socket only its owner can reach, a
/// connection to it, and the uid of the process at the other end.
package enum UnixSocket {
    /// The address of `path`, or nil when it does not fit (a Unix socket path has at most 107 bytes).
    private static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// Listens on `path` with mode 0600 (the state directory is 0700). A socket file left there by an engine
    /// that died is replaced: the caller holds the engine lock, so nobody else can be listening.
    static func listen(path: String) throws(StateError) -> Int32 {
        guard var address = address(path) else { throw StateError("the state directory's path is too long for a socket: \(path)") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw StateError("cannot make a socket: \(String(cString: strerror(errno)))") }
        unlink(path)
        let previous = umask(0o077)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw StateError("cannot listen on \(path): \(reason)")
        }
        return fd
    }

    /// A blocking connection to `path`; nil when nothing listens there.
    package static func connect(path: String) -> Int32? {
        guard var address = address(path) else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// The uid of the peer (SO_PEERCRED); nil when the kernel does not say.
    static func peerUID(_ fd: Int32) -> uid_t? {
        // struct ucred (pid, uid, gid), which Glibc's module hides behind _GNU_SOURCE.
        struct Credentials {
            var pid: pid_t = 0
            var uid: uid_t = 0
            var gid: gid_t = 0
        }
        var credentials = Credentials()
        var length = socklen_t(MemoryLayout<Credentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return credentials.uid
    }

    /// The next waiting connection, non-blocking and closed on exec; nil when none waits.
    static func accept(_ listenFD: Int32) -> Int32? {
        let fd = Glibc.accept(listenFD, nil, nil)
        guard fd >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }
}
