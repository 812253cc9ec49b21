import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// One attempt at an upload: one upload task whose body is streamed from a `BodyPlan`.
final class UploadRun: TaskRun {
    private struct State {
        var status: Int?
        var headers: [HTTPHeader] = []
        var body = Data()
        var bodyLength: Int64 = 0
        var verdict: TransferFailure?
    }

    let spec: TransferSpec
    let plan: BodyPlan
    /// Where standard input is read from (a test passes a pipe of its own).
    let standardInputPath: String
    private let finish: @Sendable (AttemptReport) -> Void
    private let state = Mutex(State())
    private let sent = Atomic<Int64>(0)

    init(spec: TransferSpec, plan: BodyPlan, standardInputPath: String,
         finish: @escaping @Sendable (AttemptReport) -> Void) {
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
        let keep = ["Content-Type", "Content-Length", "Location", "ETag", "Last-Modified", "Retry-After", "Server", "Date"]
        let headers = keep.compactMap { name in http.value(forHTTPHeaderField: name).map { HTTPHeader(name: name, value: $0) } }
        state.withLock { s in
            s.status = http.statusCode
            s.headers = headers
            s.body = Data()
            s.bodyLength = 0
            let status = http.statusCode
            if (300..<400).contains(status) {
                // Redirects of uploads are never followed (the platform would re-send an empty body).
                let location = http.value(forHTTPHeaderField: "Location").map { " to \(TerminalSafe.sanitize($0))" } ?? ""
                s.verdict = .http(status: status, reason: ResumeRule.reasonPhrase(status) + "; the upload was redirected\(location) and not re-sent", retryAfter: nil)
            } else if !(200..<300).contains(status) {
                let retryAfter = http.value(forHTTPHeaderField: "Retry-After").flatMap { RetryAfter.delay($0, now: Date()) }
                s.verdict = .http(status: status, reason: ResumeRule.reasonPhrase(status), retryAfter: retryAfter)
            }
        }
    }

    func didReceive(data: Data) {
        state.withLock { s in
            s.bodyLength += Int64(data.count)
            let room = ServerResponse.bodyLimit - s.body.count
            if room > 0 { s.body.append(data.prefix(room)) }
        }
    }

    func didComplete(error: Error?) {
        let (outcome, response) = state.withLock { s -> (AttemptOutcome, ServerResponse?) in
            let response = s.status.map { ServerResponse(status: $0, headers: s.headers, body: s.body, bodyLength: s.bodyLength) }
            if var failure = s.verdict {
                if case let .http(status, reason, retryAfter) = failure, !s.body.isEmpty {
                    // What the server said, as one short clean line (its page whole stays in the item's response).
                    let excerpt = TerminalSafe.excerpt(of: s.body)
                    if !excerpt.isEmpty { failure = .http(status: status, reason: reason + ": " + excerpt, retryAfter: retryAfter) }
                }
                return (.failed(failure, progressed: false), response)
            }
            if let error {
                guard let failure = TransferFailure.from(taskError: error) else { return (.stopped, response) }
                return (.failed(failure, progressed: false), response)
            }
            guard s.status != nil else {
                return (.failed(.protocolViolation("the server sent no response"), progressed: false), response)
            }
            return (.finished(nil), response)
        }
        finish(AttemptReport(outcome: outcome, bytesDone: bytesDone, bytesExpected: plan.length, status: response?.status,
                             response: response))
    }
}
