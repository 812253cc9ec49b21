import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// URLSession on Linux keeps a core busy while a connection's transfer waits for data, when that
/// connection's socket still has the write source corelibs made for it: libcurl asks to watch a new
/// connection for writing while it connects and sends, then for reading only, and corelibs never removes
/// a source it made (an idle socket is always writable, so the dispatch manager wakes thousands of times
/// a second). The sources go only when libcurl gives up the socket, and strace shows it does that for a
/// finished transfer's connection only when no other transfer is running (else the socket stays
/// registered, write source and all, and the next transfer on it burns a core as well). Measured on
/// 20 MiB at 2 MiB/s: 9.2 CPU-s on a fresh connection, 0.06 CPU-s on one whose sources were dropped.
///
/// So a download that starts while nothing else runs and has no clean idle connection sends a HEAD of the
/// same URL first (a "warm-up"), alone in the session, and starts on that connection when the HEAD has
/// finished. This estimate of the clean idle connections per origin decides: a transfer that ends cleanly
/// while others run leaves a dirty one, which becomes clean when the session next has nothing running;
/// a start takes a clean one. Connections idle longer than `freshFor` are not counted (servers close idle
/// keep-alive connections, Apache after 5 s). A wrong guess costs what it cost before: a busy core.
struct ConnectionWarmth {
    static let freshFor: TimeInterval = 4
    /// At most this many idle connections per origin are remembered (libcurl's pool keeps a few per handle).
    static let maxRemembered = 16

    private var clean: [String: [TimeInterval]] = [:]
    private var dirty: [String: [TimeInterval]] = [:]

    /// scheme://host:port, the unit of connection reuse.
    static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }

    /// A task ended; `origin` when its connection went back to the pool; `sessionIdle` when no other task runs.
    mutating func taskEnded(leavingIdle origin: String?, sessionIdle: Bool, now: TimeInterval) {
        if let origin {
            Self.add(now, to: &dirty[origin, default: []], now: now)
        }
        guard sessionIdle else { return }
        for (origin, times) in dirty {
            for time in times { Self.add(time, to: &clean[origin, default: []], now: now) }
        }
        dirty.removeAll()
    }

    private static func add(_ time: TimeInterval, to list: inout [TimeInterval], now: TimeInterval) {
        list.removeAll { now - $0 >= freshFor }
        list.append(time)
        list.sort()
        if list.count > maxRemembered { list.removeFirst(list.count - maxRemembered) }
    }

    /// Takes a clean idle connection for a transfer about to start; false: it would get another one.
    mutating func takeClean(_ origin: String, now: TimeInterval) -> Bool {
        var list = clean[origin, default: []].filter { now - $0 < Self.freshFor }
        defer { clean[origin] = list.isEmpty ? nil : list }
        guard !list.isEmpty else { return false }
        list.removeLast()
        // A dirty one may be picked by the pool instead of the clean one: count one fewer of those too.
        if var others = dirty[origin], !others.isEmpty {
            others.removeLast()
            dirty[origin] = others
        }
        return true
    }
}

/// The estimate, shared by the engine (which takes from it) and the session delegate (which fills it).
final class ConnectionPool: Sendable {
    private let warmth = Mutex(ConnectionWarmth())

    private static var now: TimeInterval { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// A task ended: its connection went back to the pool unless it failed, was cancelled, or the server
    /// said it would close it. `sessionIdle`: no other task is registered with the session.
    func taskEnded(_ task: URLSessionTask, error: Error?, sessionIdle: Bool) {
        var origin: String?
        if error == nil, let http = task.response as? HTTPURLResponse, let url = http.url,
           !(http.value(forHTTPHeaderField: "Connection")?.lowercased().contains("close") ?? false) {
            origin = ConnectionWarmth.origin(of: url)
        }
        warmth.withLock { $0.taskEnded(leavingIdle: origin, sessionIdle: sessionIdle, now: Self.now) }
    }

    /// True when a transfer to `url` can start at once on a clean idle connection.
    func takeClean(for url: URL) -> Bool {
        guard let origin = ConnectionWarmth.origin(of: url) else { return false }
        return warmth.withLock { $0.takeClean(origin, now: Self.now) }
    }
}

/// A warm-up: a HEAD whose only purpose is to leave a used connection in the pool. Its answer is ignored;
/// when it ends, however it ends, or when it takes too long, `then` starts the transfer it was made for.
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
        start()
    }

    /// Starts the transfer now if the HEAD's end has not (the HEAD took too long). True when it did.
    @discardableResult
    func start() -> Bool {
        guard !fired.exchange(true, ordering: .relaxed) else { return false }
        then()
        return true
    }
}
