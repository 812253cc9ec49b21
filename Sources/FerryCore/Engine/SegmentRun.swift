import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// One attempt at one range of a segmented download: `Range: bytes=from-(end-1)` with If-Range, written
/// with positioned writes into the preallocated `.part` file. Only a 206 for exactly that range of a file
/// of the same size is accepted; a 200 means the server ignored the range or the file changed.
final class SegmentRun: TaskRun {
    struct Start: Sendable {
        var spec: TransferSpec
        var partPath: String
        var index: Int
        /// First byte to fetch (the segment's start plus what is already done).
        var from: Int64
        /// One past the last byte of the segment.
        var end: Int64
        var total: Int64
        var validators: Validators
        var bufferSize: Int
    }

    enum Failure: Error, Sendable {
        /// A 200, or a 206 for another range or size: the segments cannot be trusted; start over as one stream.
        case unusable(String)
        case failed(TransferFailure, progressed: Bool)
    }

    private struct State {
        var file: PartialFile?
        var verdict: Failure?
        var gotResponse = false
        var task: URLSessionTask?
        var flushed: Int64 = 0
    }

    let start: Start
    private let state: Mutex<State>
    private let received = Atomic<Int64>(0)
    private let finish: @Sendable (_ outcome: Result<Void, Failure>?, _ flushed: Int64) -> Void

    /// `finish(nil, _)` means stopped by cancel().
    init(start: Start, finish: @escaping @Sendable (Result<Void, Failure>?, Int64) -> Void) {
        self.start = start
        self.finish = finish
        self.state = Mutex(State())
    }

    /// Bytes of this segment fetched by this attempt (flushed or buffered).
    var bytesDone: Int64 { received.load(ordering: .relaxed) }
    var bytesExpected: Int64? { start.end - start.from }
    /// Bytes of this attempt that are on disk.
    var flushedBytes: Int64 { state.withLock { $0.flushed } }

    func makeRequest(userAgent: String, timeout: TimeInterval, hostHeaders: [HostHeaders]) -> URLRequest {
        var request = RequestHeaders.request(for: start.spec, method: "GET", userAgent: userAgent, timeout: timeout,
                                             hostHeaders: hostHeaders)
        request.setValue("bytes=\(start.from)-\(start.end - 1)", forHTTPHeaderField: "Range")
        if let ifRange = start.validators.ifRange { request.setValue(ifRange, forHTTPHeaderField: "If-Range") }
        return request
    }

    func didReceive(response: URLResponse, task: URLSessionTask) {
        guard let http = response as? HTTPURLResponse, http.statusCode >= 200 else { return }
        let header: (String) -> String? = { http.value(forHTTPHeaderField: $0) }
        let verdict: Failure? = state.withLock { s in
            guard !s.gotResponse else { return nil }
            s.gotResponse = true
            s.task = task
            let status = http.statusCode
            if status == 206 {
                let range = header("Content-Range").flatMap(ResumeRule.ContentRange.init)
                guard let range, range.start == start.from, range.end == start.end - 1, range.total == start.total else {
                    return .unusable("the server answered another range than bytes \(start.from)-\(start.end - 1)")
                }
                do throws(TransferFailure) {
                    s.file = try PartialFile(segmentOf: start.partPath, at: start.from, bufferSize: start.bufferSize)
                } catch {
                    return .failed(error, progressed: false)
                }
                return nil
            }
            if (200..<300).contains(status) { return .unusable("the server ignored the range or the file changed") }
            let retryAfter = header("Retry-After").flatMap { RetryAfter.delay($0, now: Date()) }
            return .failed(.http(status: status, reason: ResumeRule.reasonPhrase(status), retryAfter: retryAfter), progressed: false)
        }
        if let verdict {
            state.withLock { $0.verdict = verdict }
            BoundedDelegateQueue.cancel(task)
        }
    }

    func didReceive(data: Data) {
        let count = Int64(data.count)
        let ok: Bool = state.withLock { s in
            guard s.verdict == nil, let file = s.file else { return false }
            // Never past the segment's end, whatever the server sends.
            let room = (start.end - start.from) - file.size
            let chunk = count > room ? data.prefix(Int(max(0, room))) : data
            do throws(TransferFailure) {
                try file.append(chunk)
                s.flushed = file.written
            } catch {
                s.verdict = .failed(error, progressed: true)
                return false
            }
            return true
        }
        if ok { received.add(count, ordering: .relaxed) }
    }

    func flushToDisk() {
        let task: URLSessionTask? = state.withLock { s in
            guard s.verdict == nil, let file = s.file else { return nil }
            do throws(TransferFailure) {
                try file.flush()
                s.flushed = file.written
                return nil
            } catch {
                s.verdict = .failed(error, progressed: true)
                return s.task
            }
        }
        if let task { BoundedDelegateQueue.cancel(task) }
    }

    func didComplete(error: Error?) {
        let (outcome, flushed) = state.withLock { s -> (Result<Void, Failure>?, Int64) in
            if s.verdict == nil, let file = s.file {
                do throws(TransferFailure) { try file.flush() } catch { s.verdict = .failed(error, progressed: true) }
                s.flushed = file.written
            }
            let progressed = s.flushed > 0
            s.file = nil
            if let verdict = s.verdict { return (.failure(verdict), s.flushed) }
            if let error {
                let ns = error as NSError
                if ns.domain == NSURLErrorDomain, ns.code == NSURLErrorCancelled { return (nil, s.flushed) }
                return (.failure(.failed(.transport(code: ns.code, message: TerminalSafe.sanitize(ns.localizedDescription)),
                                         progressed: progressed)), s.flushed)
            }
            guard s.gotResponse, s.flushed == start.end - start.from else {
                return (.failure(.failed(.protocolViolation("segment \(start.index): received \(s.flushed) of \(start.end - start.from) bytes"),
                                         progressed: progressed)), s.flushed)
            }
            return (.success(()), s.flushed)
        }
        finish(outcome, flushed)
    }
}
