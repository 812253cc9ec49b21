import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// Receives every URLSession callback and routes it by task identifier to the attempt that owns the task.
/// Runs on the session's serial delegate queue (a concurrent one delivers chunks out of order on Linux).
/// It also answers the transport's questions (FerryURLProtocol): redirects, bodies, bytes sent.
final class SessionDelegate: NSObject, URLSessionDataDelegate, TransportDelegate, Sendable {
    private let runs = Mutex<[Int: (run: any TaskRun, limits: LimitMembership?)]>([:])
    private let hostHeaders: [HostHeaders]
    let netrcFiles: NetrcFiles
    private let transportSettings: TransportSettings
    let transportDelegateQueue: OperationQueue?
    /// The hosts answering over HTTP/2, as the transport found them (the scheduler reads it).
    let multiplexed = MultiplexedHosts()
    /// Called when a host starts or stops answering over HTTP/2 (the engine schedules again).
    let multiplexingChanged = Mutex<(@Sendable () -> Void)?>(nil)

    init(hostHeaders: [HostHeaders], netrcFiles: NetrcFiles, transportSettings: TransportSettings, delegateQueue: OperationQueue) {
        self.hostHeaders = hostHeaders
        self.netrcFiles = netrcFiles
        self.transportSettings = transportSettings
        self.transportDelegateQueue = delegateQueue
    }

    func transportSettings(for task: URLSessionTask) -> TransportSettings { transportSettings }

    /// `limits`: the bandwidth limits the task answers to, as which item and in which direction.
    func register(_ run: any TaskRun, for task: URLSessionTask, limits: LimitMembership? = nil) {
        runs.withLock { $0[task.taskIdentifier] = (run, limits) }
    }

    private func run(for task: URLSessionTask) -> (any TaskRun)? {
        runs.withLock { $0[task.taskIdentifier]?.run }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        // The disposition is ignored on Linux (.cancel does not cancel): runs call task.cancel() themselves.
        run(for: dataTask)?.didReceive(response: response, task: dataTask)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        run(for: dataTask)?.didReceive(data: data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let run = runs.withLock { $0.removeValue(forKey: task.taskIdentifier)?.run }
        run?.didComplete(error: error)
    }

    // MARK: TransportDelegate (FerryURLProtocol asks on the task's work queue or the transport's thread)

    func transportRedirect(for task: URLSessionTask, response: HTTPURLResponse, to request: URLRequest) -> URLRequest? {
        // Uploads never follow a redirect (re-sending a body the user did not aim there); the 3xx reaches
        // the run as the response. Downloads follow http(s) only.
        let scheme = request.url?.scheme?.lowercased()
        guard let run = run(for: task) as? RangeRun, scheme == "http" || scheme == "https" else { return nil }
        // Config headers and netrc logins belong to their host only; credentials do not cross to another host.
        return RequestHeaders.forRedirect(request, previous: response.url ?? task.currentRequest?.url,
                                          credentials: credentials(for: run.start.spec))
    }

    /// The config's host headers and the item's netrc file (read again when it changed).
    func credentials(for spec: TransferSpec) -> HostCredentials {
        HostCredentials(hostHeaders: hostHeaders, netrc: spec.netrcFile.flatMap(netrcFiles.netrc(at:)))
    }

    func transportBody(for task: URLSessionTask) -> TransportBody? {
        run(for: task)?.makeBody()
    }

    func transportLimits(for task: URLSessionTask) -> LimitMembership? {
        runs.withLock { $0[task.taskIdentifier]?.limits }
    }

    func transportDidSend(for task: URLSessionTask, bytes: Int64) {
        run(for: task)?.didSend(bytes: bytes)
    }

    func transportInformational(for task: URLSessionTask, response: HTTPURLResponse) {
        run(for: task)?.didReceive(informational: response)
    }

    func transportAfterSessionCalls(_ then: @escaping @Sendable () -> Void) {
        BoundedDelegateQueue.afterCalls(then)
    }

    func transportAnswered(for task: URLSessionTask, url: URL, multiplexed: Bool) {
        // Items are scheduled by the host they were queued for: an answer from the host a redirect led to
        // says nothing of it.
        guard let host = url.host?.lowercased(), host == task.originalRequest?.url?.host?.lowercased(),
              self.multiplexed.record(host, multiplexed: multiplexed) else { return }
        multiplexingChanged.withLock { $0 }?()
    }
}
