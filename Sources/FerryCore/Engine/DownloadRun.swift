import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// One attempt at a download: one data task, bytes written straight into the `.part` file.
/// Its callbacks all arrive on the session's serial delegate queue; the lock is only there for
/// the compiler and for snapshot readers, so it is uncontended on the per-chunk path.
final class DownloadRun: TaskRun {
    struct Start: Sendable {
        var spec: TransferSpec
        /// The name already claimed by an earlier attempt (its `.part` file exists), if any.
        var fileName: String?
        /// Offset asked for with Range (the `.part` file's length), 0 for the whole file.
        var offset: Int64
        var knownTotal: Int64?
        var bufferSize: Int
    }

    private struct State {
        var file: PartialFile?
        var fileName: String?
        var gotResponse = false
        var total: Int64?
        var validators = Validators()
        var status: Int?
        /// Set when the run decided to stop the task itself (bad status, bad range, local error).
        var verdict: TransferFailure?
        var alreadyComplete = false
        var bodyBytes: Int64 = 0
        var task: URLSessionTask?
    }

    let start: Start
    private let names: NameClaims
    /// Called once the response is accepted and the `.part` file exists: the name and validators must reach
    /// the store now, not when the attempt ends, or a crash would orphan the `.part` file.
    /// `rangeable`: a whole-file answer from a server that offers byte ranges with a validator (could be segmented).
    private let accepted: @Sendable (_ fileName: String, _ validators: Validators, _ rangeable: Bool) -> Void
    private let finish: @Sendable (RunOutcome, _ validators: Validators, _ status: Int?, _ fileName: String?) -> Void
    private let state: Mutex<State>
    private let done = Atomic<Int64>(0)
    private let expected = Atomic<Int64>(-1)

    init(
        start: Start, names: NameClaims,
        accepted: @escaping @Sendable (String, Validators, Bool) -> Void,
        finish: @escaping @Sendable (RunOutcome, Validators, Int?, String?) -> Void
    ) throws(TransferFailure) {
        self.start = start
        self.names = names
        self.accepted = accepted
        self.finish = finish
        var initial = State()
        initial.fileName = start.fileName
        initial.total = start.knownTotal
        if let name = start.fileName {
            // A later attempt: reopen the existing `.part` file at its end.
            initial.file = try PartialFile(openingOrCreating: PartialFile.path(directory: start.spec.directory, name: name),
                                           bufferSize: start.bufferSize)
        }
        self.state = Mutex(initial)
        done.store(start.offset, ordering: .relaxed)
        if let total = start.knownTotal { expected.store(total, ordering: .relaxed) }
    }

    var bytesDone: Int64 { done.load(ordering: .relaxed) }
    var bytesExpected: Int64? {
        let e = expected.load(ordering: .relaxed)
        return e >= 0 ? e : nil
    }

    /// The request for this attempt: Range + If-Range when resuming.
    func makeRequest(validators: Validators, userAgent: String, timeout: TimeInterval, hostHeaders: [HostHeaders]) -> URLRequest {
        var request = RequestHeaders.request(for: start.spec, method: "GET", userAgent: userAgent, timeout: timeout,
                                             hostHeaders: hostHeaders)
        if start.offset > 0 {
            request.setValue("bytes=\(start.offset)-", forHTTPHeaderField: "Range")
            if let ifRange = validators.ifRange { request.setValue(ifRange, forHTTPHeaderField: "If-Range") }
        }
        return request
    }

    func didReceive(response: URLResponse, task: URLSessionTask) {
        guard let http = response as? HTTPURLResponse else {
            stop(task, .protocolViolation("not an HTTP response"))
            return
        }
        // Interim 1xx answers (100 Continue) arrive as extra responses on Linux: not the real one.
        if http.statusCode < 200 { return }
        let header: (String) -> String? = { http.value(forHTTPHeaderField: $0) }
        let verdict = ResumeRule.evaluate(status: http.statusCode, header: header,
                                          requestedOffset: start.offset, knownTotal: start.knownTotal)
        let failure: TransferFailure? = state.withLock { s -> TransferFailure? in
            guard !s.gotResponse else { return nil }
            s.gotResponse = true
            s.task = task
            s.status = http.statusCode
            var validators = Validators(etag: header("ETag"), lastModified: header("Last-Modified"))
            do throws(TransferFailure) {
                switch verdict {
                case let .failure(f):
                    return f
                case .alreadyComplete:
                    s.alreadyComplete = true
                    validators.totalLength = start.offset
                    s.validators = validators
                    return nil
                case let .discardAndRestart(reason):
                    try s.file?.truncate()
                    done.store(0, ordering: .relaxed)
                    return .protocolViolation(reason)
                case let .append(_, total):
                    validators.totalLength = total
                    s.total = total
                case let .startOver(total):
                    validators.totalLength = total
                    s.total = total
                    try s.file?.truncate()
                    done.store(0, ordering: .relaxed)
                }
                s.validators = validators
                expected.store(s.total ?? -1, ordering: .relaxed)
                if s.file == nil {
                    let name = FileNaming.chooseName(explicit: start.spec.fileName,
                                                     contentDisposition: header("Content-Disposition"),
                                                     url: http.url ?? start.spec.url)
                    let claim = try names.claim(directory: start.spec.directory, name: name)
                    s.fileName = claim.name
                    s.file = PartialFile(path: PartialFile.path(directory: start.spec.directory, name: claim.name), fd: claim.fd,
                                         bufferSize: start.bufferSize)
                }
                return nil
            } catch {
                return error
            }
        }
        if let failure {
            stop(task, failure)
            return
        }
        let (complete, name, validators) = state.withLock { ($0.alreadyComplete, $0.fileName, $0.validators) }
        if complete { BoundedDelegateQueue.cancel(task) }
        let rangeable = start.offset == 0 && http.statusCode == 200 && validators.ifRange != nil && validators.totalLength != nil
            && (header("Accept-Ranges")?.lowercased().contains("bytes") ?? false)
        if let name { accepted(name, validators, rangeable) }
    }

    private func stop(_ task: URLSessionTask, _ failure: TransferFailure) {
        state.withLock { s in if s.verdict == nil { s.verdict = failure } }
        BoundedDelegateQueue.cancel(task)
    }

    /// Writes out what the buffer holds. Called about once a second by the engine, so a stalled or slow
    /// transfer does not keep received bytes only in memory (a crash would lose them).
    func flushToDisk() {
        let task: URLSessionTask? = state.withLock { s in
            guard s.verdict == nil, let file = s.file else { return nil }
            do throws(TransferFailure) {
                try file.flush()
                return nil
            } catch {
                s.verdict = error
                return s.task
            }
        }
        if let task { BoundedDelegateQueue.cancel(task) }
    }

    func didReceive(data: Data) {
        let failed: Bool = state.withLock { s in
            guard s.verdict == nil, !s.alreadyComplete, let file = s.file else { return false }
            do throws(TransferFailure) {
                try file.append(data)
            } catch {
                s.verdict = error
                return true
            }
            s.bodyBytes += Int64(data.count)
            return false
        }
        if failed { return }  // the task is cancelled at completion; nothing more is written
        done.add(Int64(data.count), ordering: .relaxed)
    }

    func didComplete(error: Error?) {
        let (outcome, validators, status, name) = state.withLock { s -> (RunOutcome, Validators, Int?, String?) in
            let outcome = conclude(&s, error: error)
            return (outcome, s.validators, s.status, s.fileName)
        }
        finish(outcome, validators, status, name)
    }

    private func conclude(_ s: inout State, error: Error?) -> RunOutcome {
        let progressed = s.bodyBytes > 0
        var failure = s.verdict
        if failure == nil, let file = s.file {
            do throws(TransferFailure) { try file.flush() } catch { failure = error }
        }
        if let failure {
            s.file = nil
            return .failed(failure, progressed: progressed)
        }
        if s.alreadyComplete, let file = s.file, let name = s.fileName {
            s.file = nil
            return .finished(FileHandover(file: file, fileName: name, total: file.size))
        }
        if let error {
            s.file = nil
            let ns = error as NSError
            if ns.domain == NSURLErrorDomain, ns.code == NSURLErrorCancelled { return .stopped }
            // -1 is what a mid-body close looks like on Linux ("transfer closed with N bytes remaining").
            return .failed(.transport(code: ns.code, message: TerminalSafe.sanitize(ns.localizedDescription)),
                           progressed: progressed)
        }
        guard s.gotResponse, let file = s.file, let name = s.fileName else {
            s.file = nil
            return .failed(.protocolViolation("the server sent no usable response"), progressed: progressed)
        }
        s.file = nil
        if let total = s.total, file.size != total {
            return .failed(.protocolViolation("received \(file.size) of \(total) bytes"), progressed: progressed)
        }
        return .finished(FileHandover(file: file, fileName: name, total: s.total))
    }
}
