import NIOCore
import NIOPosix
import Synchronization

/// The live connections of a test server or proxy, so that shutdown can close them, and how many were
/// accepted. A connection registered after shutdown began is closed at once.
final class ChannelRegistry: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var isShutdown = false
        var accepted = 0
    }

    private let state = Mutex(State())

    /// `accepted`: a connection a client opened (counted), not one the proxy opened to an origin.
    /// The connection's number among those accepted (1 for the first).
    @discardableResult
    func register(_ channel: any Channel, accepted: Bool = true) -> Int {
        let id = ObjectIdentifier(channel)
        let (live, number) = state.withLock { s -> (Bool, Int) in
            if s.isShutdown { return (false, s.accepted) }
            s.channels[id] = channel
            if accepted { s.accepted += 1 }
            return (true, s.accepted)
        }
        if !live {
            channel.close(promise: nil)
            return number
        }
        channel.closeFuture.whenComplete { [self] _ in
            _ = state.withLock { $0.channels.removeValue(forKey: id) }
        }
        return number
    }

    /// Returns the live connections to close, or nil if shutdown already began.
    func beginShutdown() -> [any Channel]? {
        state.withLock { s -> [any Channel]? in
            if s.isShutdown { return nil }
            s.isShutdown = true
            let list = Array(s.channels.values)
            s.channels.removeAll()
            return list
        }
    }

    var connectionsAccepted: Int { state.withLock { $0.accepted } }

    func resetAccepted() { state.withLock { $0.accepted = 0 } }
}

/// Binds `bootstrap` to 127.0.0.1 on a port the system picks; on failure shuts `group` down and throws.
func bindLoopback(_ bootstrap: ServerBootstrap, group: MultiThreadedEventLoopGroup) throws -> (channel: any Channel, port: Int) {
    do {
        let channel = try bootstrap.bind(host: "127.0.0.1", port: 0).wait()
        guard let port = channel.localAddress?.port else {
            try? channel.close().wait()
            throw TestHTTPServerError.noPort
        }
        return (channel, port)
    } catch {
        try? group.syncShutdownGracefully()
        throw error
    }
}
