import FerryModel
import FerryTransport
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The requests a tree's walk and a tree's upload make themselves (listings, HEADs, MKCOLs), not as items of
/// the queue: through ferry's transport (FerryURLProtocol, as every item is), with the items' own headers
/// (`-H`), user agent and netrc login, and the engine's proxies and trusted CAs (`transport`).
public struct TreeRequests: Sendable {
    public struct Answer: Sendable {
        public var response: HTTPURLResponse
        public var body: Data
        public var status: Int { response.statusCode }
    }

    let headers: [HTTPHeader]
    let userAgent: String
    let timeout: TimeInterval
    let netrc: Netrc?
    /// sftp, scp: the asking session's ssh-agent (TransferSpec.sshAgent).
    let sshAgent: String?
    let transport: TransportSettings

    public init(headers: [HTTPHeader], netrcFile: String?, sshAgent: String? = nil, userAgent: String, timeout: TimeInterval,
                transport: TransportSettings) {
        self.headers = headers
        self.transport = transport
        self.userAgent = userAgent
        self.timeout = timeout
        self.sshAgent = sshAgent
        netrc = netrcFile.flatMap(NetrcFiles().netrc(at:))
    }

    /// One session for the process's tree requests, never released: each request's timeout is its own. Its
    /// delegate gathers each task's body piece by piece. Not a completion handler: corelibs' protocol client
    /// keeps only the last piece a URLProtocol hands over for one (`properties[.responseData] = data`), and a
    /// listing sent in pieces (rclone's chunked PROPFIND answers, an sftp listing line by line) came back as its
    /// last piece alone. Not a session per walk: corelibs' URLSession with a delegate, released after its tasks
    /// ended, crashed the process now and then (a release of freed memory as `put -r` ended).
    private static let shared: (session: URLSession, gatherer: Gatherer) = {
        let configuration = URLSessionConfiguration.keepingNothing
        configuration.protocolClasses = [FerryURLProtocol.self]
        let gatherer = Gatherer()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        return (URLSession(configuration: configuration, delegate: gatherer, delegateQueue: queue), gatherer)
    }()

    /// Each task's settings are its walk's (one process may run engines with different ones: the tests do).
    final class Gatherer: NSObject, URLSessionDataDelegate, TransportSettingsSource, @unchecked Sendable {
        private struct Asked {
            var body = Data()
            let done: CheckedContinuation<(Data, URLResponse?, Error?), Never>
            let settings: TransportSettings
        }
        private let tasks = Mutex<[Int: Asked]>([:])

        func start(_ task: URLSessionTask, settings: TransportSettings, _ done: CheckedContinuation<(Data, URLResponse?, Error?), Never>) {
            tasks.withLock { $0[task.taskIdentifier] = Asked(done: done, settings: settings) }
            task.resume()
        }

        func transportSettings(for task: URLSessionTask) -> TransportSettings {
            tasks.withLock { $0[task.taskIdentifier]?.settings } ?? TransportSettings()
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            tasks.withLock { $0[dataTask.taskIdentifier]?.body.append(data) }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            guard let asked = tasks.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
            asked.done.resume(returning: (asked.body, task.response, error))
        }
    }

    /// `method` of `url` with no body; `extra` headers beside the items' own. The answer, or why there is none
    /// (the transport's words: a refused connection, a timeout).
    public func send(_ url: URL, method: String, extra: [String: String] = [:]) async -> Result<Answer, TreeRequestFailure> {
        var spec = TransferSpec(download: url, directory: "/")
        spec.headers = headers
        spec.takeAgent(sshAgent)
        var request = RequestHeaders.request(for: spec, method: method, userAgent: userAgent, timeout: timeout,
                                             credentials: HostCredentials(netrc: netrc))
        for (name, value) in extra { request.setValue(value, forHTTPHeaderField: name) }
        // A walk held or removed cancels its listings under way (a hung one would hold its next run back).
        let task = Self.shared.session.dataTask(with: request)
        let answer: (Data?, URLResponse?, Error?) = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                Self.shared.gatherer.start(task, settings: transport, continuation)
            }
        } onCancel: {
            task.cancel()
        }
        if let error = answer.2 {
            return .failure(TreeRequestFailure(reason: error.localizedDescription, missing: (error as? URLError)?.code == .fileDoesNotExist))
        }
        guard let response = answer.1 as? HTTPURLResponse else { return .failure(TreeRequestFailure(reason: "no HTTP answer")) }
        return .success(Answer(response: response, body: answer.0 ?? Data()))
    }
}

public struct TreeRequestFailure: Error, Sendable {
    public var reason: String
    /// The server says there is no such file or directory (sftp, ftp: their answers are errors, not statuses).
    public var missing = false
}
