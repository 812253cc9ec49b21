import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// What a session's delegate tells the transport about a task (corelibs' URLProtocol client has no way to
/// ask the delegate about redirects or bodies, and no way to report bytes sent).
package protocol TransportDelegate: TransportSettingsSource {
    /// The session's delegate queue: a transfer's bytes count as in flight until the delegate has had them.
    var transportDelegateQueue: OperationQueue? { get }
    /// The body of an upload task, made anew for each attempt; nil for none.
    func transportBody(for task: URLSessionTask) -> TransportBody?
    /// A 3xx with a Location arrived: the next request, or nil to hand the 3xx to the delegate as the response.
    func transportRedirect(for task: URLSessionTask, response: HTTPURLResponse, to request: URLRequest) -> URLRequest?
    /// Bytes of the body handed to the connection (called on the transport's thread).
    func transportDidSend(for task: URLSessionTask, bytes: Int64)
    /// The bandwidth limits the task answers to, and as which item; nil for none.
    func transportLimits(for task: URLSessionTask) -> LimitMembership?
    /// A final response's head arrived from `url`, over HTTP/2 (`multiplexed`: the connection carries other
    /// transfers to that host as streams) or HTTP/1.x (called on the transport's thread).
    func transportAnswered(for task: URLSessionTask, url: URL, multiplexed: Bool)
    /// An interim (1xx) response arrived before the final one, such as `104 Upload Resumption Supported`
    /// (URLSession's `didReceiveInformationalResponse` on Apple's systems; called on the transport's thread).
    func transportInformational(for task: URLSessionTask, response: HTTPURLResponse)
    /// Runs `then` once the calls into the session the delegate has asked for so far are made (the engine makes
    /// them on a queue of its own, without waiting: a cancel asked for while it had a response). The transport
    /// waits so before it reads for a task on (Courier.afterHandover): a cancel then reaches it first.
    func transportAfterSessionCalls(_ then: @escaping @Sendable () -> Void)
}

/// Where a task's proxies, trusted CAs and ssh settings come from: the session's delegate (the engine's, for the
/// items; the tree's requests', for the listings, HEADs and MKCOLs a tree makes itself). A session whose delegate
/// names none sends with `TransportSettings()`: no proxy, the system's CAs.
package protocol TransportSettingsSource: AnyObject, Sendable {
    func transportSettings(for task: URLSessionTask) -> TransportSettings
}

extension TransportDelegate {
    package func transportAnswered(for task: URLSessionTask, url: URL, multiplexed: Bool) {}
    package func transportInformational(for task: URLSessionTask, response: HTTPURLResponse) {}
    package func transportAfterSessionCalls(_ then: @escaping @Sendable () -> Void) { then() }
}

/// ferry's transport under URLSession: every http(s), sftp, scp and ftp task of a session whose configuration lists
/// this class is carried on the transport's thread (CurlTransport): sftp over OpenSSH's client (SFTPTransfer), the
/// others on libcurl (CurlTransfer). URLSession still makes the tasks, cancels them and calls the delegate.
public final class FerryURLProtocol: URLProtocol {
    private enum Carried {
        case curl(CurlTransfer)
        case sftp(SFTPTransfer)
    }
    private let transfer = Mutex<Carried?>(nil)

    override public class func canInit(with request: URLRequest) -> Bool {
        TransferScheme(request.url) != nil
    }

    override public class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    // On the task's work queue.
    override public func startLoading() {
        guard let task, let client, let queue = TaskWorkQueue.of(task) else {
            client?.urlProtocol(self, didFailWithError: URLError(.unknown, userInfo: [
                NSLocalizedDescriptionKey: "ferry's transport cannot reach this Foundation's task queue"]))
            return
        }
        let delegate = task.delegate as? TransportDelegate
        let settings = (task.delegate as? TransportSettingsSource)?.transportSettings(for: task) ?? TransportSettings()
        let delivery = Courier.Delivery(urlProtocol: self, client: client, queue: queue)
        let request = task.currentRequest ?? request
        if let unavailable = CurlTransport.shared.unavailable {
            client.urlProtocol(self, didFailWithError: URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: unavailable]))
            return
        }
        if let sftp = SFTPTransfer(request: request, task: task, delegate: delegate, settings: settings, delivery: delivery, transport: CurlTransport.shared) {
            transfer.withLock { $0 = .sftp(sftp) }
            CurlTransport.shared.submit(.startSFTP(sftp))
            return
        }
        let curl = CurlTransfer(request: request, task: task, delegate: delegate, settings: settings, delivery: delivery, transport: CurlTransport.shared)
        transfer.withLock { $0 = .curl(curl) }
        CurlTransport.shared.submit(.start(curl))
    }

    // On the task's work queue (a cancel): nothing reaches the client after this.
    override public func stopLoading() {
        switch transfer.withLock({ t -> Carried? in defer { t = nil }; return t }) {
        case let .curl(curl):
            curl.delivery.end()
            CurlTransport.shared.submit(.stop(curl))
        case let .sftp(sftp):
            sftp.delivery.end()
            CurlTransport.shared.submit(.stopSFTP(sftp))
        case nil:
            break
        }
    }
}
