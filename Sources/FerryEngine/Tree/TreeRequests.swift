import FerryModel
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The requests a tree's walk and a tree's upload make themselves (listings, HEADs, MKCOLs), not as items of
/// the queue: through ferry's transport (FerryURLProtocol, as every item is), with the items' own headers
/// (`-H`), user agent and netrc login.
public struct TreeRequests: Sendable {
    public struct Answer: Sendable {
        public var status: Int
        public var response: HTTPURLResponse
        public var body: Data
    }

    let headers: [HTTPHeader]
    let userAgent: String
    let timeout: TimeInterval
    let netrc: Netrc?
    private let session: URLSession

    public init(headers: [HTTPHeader], netrcFile: String?, userAgent: String, timeout: TimeInterval) {
        self.headers = headers
        self.userAgent = userAgent
        self.timeout = timeout
        netrc = netrcFile.flatMap(NetrcFiles().netrc(at:))
        let configuration = URLSessionConfiguration.keepingNothing
        configuration.protocolClasses = [FerryURLProtocol.self]
        configuration.timeoutIntervalForRequest = timeout
        session = URLSession(configuration: configuration)
    }

    /// `method` of `url` with no body; `extra` headers beside the items' own. The answer, or why there is none
    /// (the transport's words: a refused connection, a timeout).
    public func send(_ url: URL, method: String, extra: [String: String] = [:]) async -> Result<Answer, TreeRequestFailure> {
        var spec = TransferSpec(download: url, directory: "/")
        spec.headers = headers
        var request = RequestHeaders.request(for: spec, method: method, userAgent: userAgent, timeout: timeout,
                                             credentials: HostCredentials(netrc: netrc))
        for (name, value) in extra { request.setValue(value, forHTTPHeaderField: name) }
        let answer: (Data?, URLResponse?, Error?) = await withCheckedContinuation { continuation in
            session.dataTask(with: request) { data, response, error in
                continuation.resume(returning: (data, response, error))
            }.resume()
        }
        if let error = answer.2 { return .failure(TreeRequestFailure(reason: error.localizedDescription)) }
        guard let response = answer.1 as? HTTPURLResponse else { return .failure(TreeRequestFailure(reason: "no HTTP answer")) }
        return .success(Answer(status: response.statusCode, response: response, body: answer.0 ?? Data()))
    }

    /// Ends the session (its connections); once done with it.
    public func close() {
        session.finishTasksAndInvalidate()
    }
}

public struct TreeRequestFailure: Error, Sendable {
    public var reason: String
}
