import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// The server's answer to one request of an upload, as it arrives: kept for the detail view (its headers of
/// note, the first `ServerResponse.bodyLimit` bytes of its body) and judged (a 3xx is never followed, other
/// statuses outside 2xx fail with what the server said).
struct UploadAnswer {
    /// The headers of the server's answer kept for the detail view.
    static let keptHeaders = ["Content-Type", "Content-Length", "Location", "ETag", "Last-Modified", "Retry-After", "Server",
                              "Date", "Upload-Offset", "Upload-Complete", "Upload-Incomplete", "Upload-Length", "Tus-Resumable",
                              "Upload-Draft-Interop-Version"]

    var status: Int?
    var headers: [HTTPHeader] = []
    var body = Data()
    var bodyLength: Int64 = 0
    var verdict: TransferFailure?
    /// The answer stands for a file protocol's (sftp, scp, ftp: the transport answers in HTTP's terms, FileWire):
    /// no server's response to keep.
    var fileProtocol = false
    /// Over SSH: the host key the connection was checked with.
    var hostKey: String?

    /// `now`: for a Retry-After date.
    mutating func begin(_ http: HTTPURLResponse, now: Date) {
        fileProtocol = TransferScheme(http.url)?.isHTTP == false
        status = http.statusCode
        hostKey = http.value(forHTTPHeaderField: TransferScheme.hostKeyHeader)
        headers = Self.keptHeaders.compactMap { name in http.value(forHTTPHeaderField: name).map { HTTPHeader(name: name, value: $0) } }
        body = Data()
        bodyLength = 0
        verdict = nil
        let status = http.statusCode
        if (300..<400).contains(status) {
            // Redirects of uploads are never followed (the platform would re-send an empty body).
            let location = http.value(forHTTPHeaderField: "Location").map { " to \(TerminalSafe.sanitize($0))" } ?? ""
            verdict = .http(status: status, reason: ResumeRule.reasonPhrase(status) + "; the upload was redirected\(location) and not re-sent", retryAfter: nil)
        } else if !(200..<300).contains(status) {
            let retryAfter = http.value(forHTTPHeaderField: "Retry-After").flatMap { RetryAfter.delay($0, now: now) }
            verdict = .http(status: status, reason: ResumeRule.reasonPhrase(status), retryAfter: retryAfter)
        }
    }

    mutating func append(_ data: Data) {
        bodyLength += Int64(data.count)
        let room = ServerResponse.bodyLimit - body.count
        if room > 0 { body.append(data.prefix(room)) }
    }

    func value(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    var response: ServerResponse? { fileProtocol ? nil : status.map { ServerResponse(status: $0, headers: headers, body: body, bodyLength: bodyLength) } }

    /// How the request ended: the answer's failure (with what the server said, as one short clean line),
    /// the task's error, no answer at all, or success.
    func outcome(error: Error?, progressed: Bool) -> AttemptOutcome {
        if var failure = verdict {
            if case let .http(status, reason, retryAfter) = failure, !body.isEmpty {
                // Its page whole stays in the item's response.
                let excerpt = TerminalSafe.excerpt(of: body)
                if !excerpt.isEmpty { failure = .http(status: status, reason: reason + ": " + excerpt, retryAfter: retryAfter) }
            }
            return .failed(failure, progressed: progressed)
        }
        if let error {
            guard let failure = TransferFailure.from(taskError: error) else { return .stopped }
            return .failed(failure, progressed: progressed)
        }
        guard status != nil else { return .failed(.protocolViolation("the server sent no response"), progressed: progressed) }
        return .finished(nil)
    }
}

/// One attempt at an upload: one upload task whose body is streamed from a `BodyPlan`.
final class UploadRun: TaskRun {
    let spec: TransferSpec
    let plan: BodyPlan
    /// Where standard input is read from (a test passes a pipe of its own).
    let standardInputPath: String
    private let finish: @Sendable (AttemptReport) -> Void
    private let answer = Mutex(UploadAnswer())
    private let sent = Atomic<Int64>(0)

    private let clock: any EngineClock

    init(spec: TransferSpec, plan: BodyPlan, standardInputPath: String, clock: any EngineClock,
         finish: @escaping @Sendable (AttemptReport) -> Void) {
        self.clock = clock
        self.spec = spec
        self.plan = plan
        self.standardInputPath = standardInputPath
        self.finish = finish
    }

    var bytesDone: Int64 { sent.load(ordering: .relaxed) }
    var bytesExpected: Int64? { plan.length }
    /// Standard input is read on a thread of its own (PipeBodySource) and sent chunked: its length is unknown.
    var readsStandardInput: Bool { plan.pieces == [.standardInput] }

    func makeRequest(userAgent: String, timeout: TimeInterval, credentials: HostCredentials) -> URLRequest {
        Self.request(spec: spec, plan: plan, userAgent: userAgent, timeout: timeout, credentials: credentials)
    }

    /// The upload's request: the user's method and headers, the body's type and length.
    static func request(spec: TransferSpec, plan: BodyPlan, userAgent: String, timeout: TimeInterval,
                        credentials: HostCredentials) -> URLRequest {
        var request = RequestHeaders.request(for: spec, method: spec.upload?.method ?? "PUT", userAgent: userAgent,
                                             timeout: timeout, credentials: credentials)
        if request.value(forHTTPHeaderField: "Content-Type") == nil { request.setValue(plan.contentType, forHTTPHeaderField: "Content-Type") }
        // A known length goes out as Content-Length (many endpoints refuse chunked bodies); standard input,
        // whose length is unknown, goes out chunked (CurlTransfer).
        if let length = plan.length { request.setValue(String(length), forHTTPHeaderField: "Content-Length") }
        return request
    }

    /// A fresh body for each attempt: the file parts read with pread, or standard input on a thread of its own.
    func makeBody() -> TransportBody? {
        readsStandardInput ? .pipe(path: standardInputPath) : .stream(BodyStream(plan: plan))
    }

    func didSend(bytes: Int64) {
        sent.add(bytes, ordering: .relaxed)
    }

    func didReceive(response: URLResponse, task: URLSessionTask) {
        guard let http = response as? HTTPURLResponse else { return }
        let now = clock.now
        answer.withLock { $0.begin(http, now: now) }
    }

    func didReceive(data: Data) {
        answer.withLock { $0.append(data) }
    }

    func didComplete(error: Error?) {
        let (outcome, response, hostKey) = answer.withLock { ($0.outcome(error: error, progressed: false), $0.response, $0.hostKey) }
        finish(AttemptReport(outcome: outcome, bytesDone: bytesDone, bytesExpected: plan.length, status: response?.status,
                             hostKey: hostKey, response: response))
    }
}
