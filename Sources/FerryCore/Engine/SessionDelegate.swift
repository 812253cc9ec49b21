import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// Receives every URLSession callback and routes it by task identifier to the attempt that owns the task.
/// Runs on the session's serial delegate queue (a concurrent one delivers chunks out of order on Linux).
final class SessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private let runs = Mutex<[Int: any TaskRun]>([:])
    private let hostHeaders: [HostHeaders]
    let pool = ConnectionPool()

    init(hostHeaders: [HostHeaders]) {
        self.hostHeaders = hostHeaders
    }

    /// How many tasks are registered (created and not yet completed).
    var registeredCount: Int { runs.withLock { $0.count } }

    func register(_ run: any TaskRun, for task: URLSessionTask) {
        runs.withLock { $0[task.taskIdentifier] = run }
    }

    private func run(for task: URLSessionTask) -> (any TaskRun)? {
        runs.withLock { $0[task.taskIdentifier] }
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
        let (run, sessionIdle) = runs.withLock { ($0.removeValue(forKey: task.taskIdentifier), $0.isEmpty) }
        // A warm-up's connection is taken at once by the transfer it was made for (which is registered
        // already, so the session is never idle here when a warm-up ends).
        if !(run is WarmUpRun) { pool.taskEnded(task, error: error, sessionIdle: sessionIdle) }
        run?.didComplete(error: error)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        // Uploads never follow a redirect: on Linux a 307/308 re-sends the request with an empty body and
        // reports success. Returning nil hands the 3xx to the run as the response. Downloads follow http(s) only.
        let scheme = request.url?.scheme?.lowercased()
        guard !(run(for: task) is UploadRun), scheme == "http" || scheme == "https" else {
            completionHandler(nil)
            return
        }
        // Config headers belong to their host only; credentials do not cross to another host.
        completionHandler(RequestHeaders.forRedirect(request, from: task.originalRequest?.url, hostHeaders: hostHeaders))
    }

    // Called on an internal queue of the session, not the delegate queue; the run builds the stream from
    // Sendable parts, since InputStream itself is not Sendable.
    func urlSession(
        _ session: URLSession, task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        completionHandler(run(for: task)?.makeBodyStream())
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64, totalBytesExpectedToSend: Int64
    ) {
        run(for: task)?.didSend(bytes: bytesSent)
    }
}
