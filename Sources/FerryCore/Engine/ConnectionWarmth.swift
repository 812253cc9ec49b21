import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// URLSession on Linux keeps a core busy while a connection's first transfer waits for data: libcurl asks
/// to watch a new connection for writing while it connects and sends the request, then for reading only,
/// and corelibs never removes the write source it made, so an idle (always writable) socket wakes the
/// dispatch manager thousands of times a second. A connection that served one request before is watched
/// for reading only. Measured on 20 MiB at 2 MiB/s: 9.2 CPU-s on a fresh connection, 0.06 CPU-s on a
/// reused one (README, Performance).
///
/// So before a download opens a connection, ferry sends a HEAD of the same URL on it first (a "warm-up"),
/// and starts the transfer when the HEAD has finished: the transfer then reuses that connection. This
/// holds for one or two transfers at a time; with three or more at once (or the ranges of a segmented
/// download) a connection still ends up with a write source and a core burns, warm-up or not (measured;
/// the cause is inside corelibs' socket registration and was not found). This estimate of the idle connections in URLSession's pool per origin decides when a
/// warm-up is needed: each transfer that ends cleanly leaves one; each start takes one. Connections
/// idle longer than `freshFor` are not counted (servers close idle keep-alive connections, Apache
/// after 5 s), and a wrong guess only costs what it cost before: a busy core for that transfer.
struct ConnectionWarmth {
    static let freshFor: TimeInterval = 4
    /// At most this many idle connections per origin are remembered (libcurl's pool keeps a few per handle).
    static let maxRemembered = 16

    private var idle: [String: [TimeInterval]] = [:]

    /// scheme://host:port, the unit of connection reuse.
    static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }

    /// A connection to `origin` went back to the pool now.
    mutating func connectionIdle(_ origin: String, now: TimeInterval) {
        var list = idle[origin, default: []].filter { now - $0 < Self.freshFor }
        list.append(now)
        if list.count > Self.maxRemembered { list.removeFirst(list.count - Self.maxRemembered) }
        idle[origin] = list
    }

    /// Takes an idle connection for a transfer about to start; false: it would open a new one.
    mutating func takeIdle(_ origin: String, now: TimeInterval) -> Bool {
        var list = idle[origin, default: []].filter { now - $0 < Self.freshFor }
        defer { idle[origin] = list.isEmpty ? nil : list }
        guard !list.isEmpty else { return false }
        list.removeLast()
        return true
    }
}

/// The estimate, shared by the engine (which takes from it) and the session delegate (which fills it).
final class ConnectionPool: Sendable {
    private let warmth = Mutex(ConnectionWarmth())

    private static var now: TimeInterval { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// A task ended: its connection went back to the pool, unless it failed, was cancelled, or the
    /// server said it would close it.
    func taskEnded(_ task: URLSessionTask, error: Error?) {
        guard error == nil, let http = task.response as? HTTPURLResponse, let url = http.url,
              !(http.value(forHTTPHeaderField: "Connection")?.lowercased().contains("close") ?? false),
              let origin = ConnectionWarmth.origin(of: url) else { return }
        warmth.withLock { $0.connectionIdle(origin, now: Self.now) }
    }

    /// True when a transfer to `url` can start at once on a used connection; false: warm one up first.
    func takeIdle(for url: URL) -> Bool {
        guard let origin = ConnectionWarmth.origin(of: url) else { return true }
        return warmth.withLock { $0.takeIdle(origin, now: Self.now) }
    }
}

/// A warm-up: a HEAD whose only purpose is to leave a used connection in the pool. Its answer is ignored;
/// when it ends, however it ends, `then` starts the transfer it was made for.
final class WarmUpRun: TaskRun {
    private let then: @Sendable () -> Void
    private let fired = Atomic<Bool>(false)

    init(then: @escaping @Sendable () -> Void) {
        self.then = then
    }

    var bytesDone: Int64 { 0 }
    var bytesExpected: Int64? { nil }
    func didReceive(response: URLResponse, task: URLSessionTask) {}
    func didReceive(data: Data) {}

    func didComplete(error: Error?) {
        if !fired.exchange(true, ordering: .relaxed) { then() }
    }
}
