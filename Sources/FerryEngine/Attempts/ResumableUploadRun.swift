import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// One attempt at a resumable upload: a sequence of requests, each a URLSession task of its own, that ends in
/// one report. The first attempt creates the upload on the server (the IETF protocol: the upload itself,
/// which a server that knows the protocol answers with `104` and the upload's location; tus: a `POST` to
/// the creation endpoint, then a `PATCH` with the bytes). A later attempt asks the server for its offset
/// (`HEAD`) and sends the rest (`PATCH`). What was sent and not confirmed is sent again, never assumed.
///
/// The protocols' words are `ResumableWire`'s; this type is the sequence. It never touches the store or
/// the queue: where the upload stands on the server goes out through `changed` (the engine keeps it with
/// the item, on disk before the bytes go on), the end through `finish`.
final class ResumableUploadRun: TaskRun {
    /// What the run needs from the engine.
    struct Context: Sendable {
        let spec: TransferSpec
        let plan: BodyPlan
        /// The file and its length (a resumable upload is one file, the whole body).
        let path: String
        let length: Int64
        /// How many bytes each append (PATCH) carries: a server that keeps nothing of a cut request then loses
        /// at most one chunk, and those that refuse large PATCHes take it (UploadChunking).
        let chunking: UploadChunking
        /// The server refused a grown chunk (the engine sends its host the start size from then on).
        let refusedGrownChunk: @Sendable () -> Void
        /// The host was seen to speak the IETF draft: the creation carries the first chunk only.
        let speaksDraft: Bool
        /// A `104` with a location came (the engine remembers the host for its later uploads).
        let spokeDraft: @Sendable () -> Void
        /// A request to `url` with the item's headers and the credentials for that URL's host.
        let request: @Sendable (_ method: String, _ url: URL) -> URLRequest
        /// The user's upload request (its method, headers, type and length).
        let uploadRequest: URLRequest
        /// Makes and starts a task for the request, routed to this run; `withBody`: an upload task whose body
        /// the run makes (`makeBody`). Calls `cancelled` instead when the attempt was stopped first.
        let issue: @Sendable (_ run: ResumableUploadRun, _ request: URLRequest, _ withBody: Bool,
                              _ cancelled: @escaping @Sendable () -> Void) -> Void
        /// Where the upload stands on the server changed; the engine keeps it (on disk, before this returns).
        let changed: @Sendable (ResumableUpload) -> Void
        let finish: @Sendable (AttemptReport) -> Void
        /// What the time is (a Retry-After date).
        let clock: any EngineClock
    }

    private typealias Step = ResumableSteps.Step

    private struct State {
        var upload: ResumableUpload
        var step: Step = .create
        var answer = UploadAnswer()
        /// 409s answered by asking for the offset again, and start-overs, in this attempt.
        var conflicts = 0
        var restarts = 0
        /// An append the server answered with success but did not move its offset for: the offset it was sent
        /// from. The query that follows ends the attempt if the server still says that offset (a server that
        /// keeps none of what it is sent would otherwise be sent the rest again and again).
        var stalledAt: Int64?
        /// The body of the request under way (nil for those without one).
        var body: BodyStream?
        var finished = false
        /// The chunks, as they grow; when the append under way was issued, when its last byte was sent and
        /// when its answer came (the wait between the last two is what each chunk costs: UploadChunking).
        var chunking: UploadChunking
        var appendIssued: TimeInterval?
        var appendSent: TimeInterval?
        var appendAnswered: TimeInterval?
    }

    private let context: Context
    private let state: Mutex<State>
    /// The offset the request under way sends from, and the bytes of it handed to the connection.
    private let base = Atomic<Int64>(0)
    private let sent = Atomic<Int64>(0)
    /// Bytes sent in this attempt (all its requests): progress, for the retry budget.
    private let sentInAttempt = Atomic<Int64>(0)
    /// The bytes of the append under way (-1: the request under way is not one).
    private let appendLength = Atomic<Int64>(-1)

    init(context: Context, upload: ResumableUpload) {
        self.context = context
        self.state = Mutex(State(upload: upload, chunking: context.chunking))
        base.store(upload.location == nil ? 0 : upload.confirmedOffset, ordering: .relaxed)
    }

    /// What is confirmed plus what is in flight.
    var bytesDone: Int64 { base.load(ordering: .relaxed) + sent.load(ordering: .relaxed) }
    var bytesExpected: Int64? { context.length }

    /// Starts the attempt's first request (off the caller's thread: a resumption first checks the file).
    func start() {
        DispatchQueue.global().async { [self] in
            let first = state.withLock { s -> Result<Step, TransferFailure> in
                if s.upload.location == nil { return .success(creationStep(s)) }
                if let changed = Self.fileChange(s.upload, path: context.path) {
                    // The server's copy is of another file: it cannot be finished. A retry starts over.
                    s.upload = Self.fresh(s.upload.kind, reason: nil)
                    return .failure(.local(.fileChanged, changed))
                }
                return .success(.query)
            }
            switch first {
            case let .success(step): go(step)
            case let .failure(failure):
                context.changed(state.withLock { $0.upload })
                end(.failed(failure, progressed: false))
            }
        }
    }

    // MARK: Requests

    /// The request that makes the server's copy: tus's POST; the IETF upload itself, or to a host seen to speak the
    /// draft its first chunk (a server without the protocol would keep a chunk as the whole file).
    private func creationStep(_ s: State) -> Step {
        guard s.upload.kind == .ietf else { return .tusCreate }
        let first = s.chunking.count(from: 0, of: context.length)
        return context.speaksDraft && first < context.length ? .createChunk(count: first) : .create
    }

    /// Makes the step's request and issues it.
    private func go(_ step: Step) {
        let (request, withBody) = state.withLock { s -> (URLRequest, Bool) in
            s.step = step
            s.answer = UploadAnswer()
            // A new copy on the server is made from the file as it is now.
            if step.creates { s.upload = identified(s.upload) }
            s.appendSent = nil
            s.appendAnswered = nil
            if case .append = step { s.appendIssued = monotonicSeconds() }
            return makeRequest(step, s.upload)
        }
        if case let .append(_, count) = step { appendLength.store(count, ordering: .relaxed) } else { appendLength.store(-1, ordering: .relaxed) }
        switch step {
        case .create, .createChunk, .tusCreate, .plain: base.store(0, ordering: .relaxed)
        case let .append(from, _): base.store(from, ordering: .relaxed)
        case .query: break
        }
        sent.store(0, ordering: .relaxed)
        context.issue(self, request, withBody) { [self] in end(.stopped) }
    }

    private func makeRequest(_ step: Step, _ upload: ResumableUpload) -> (URLRequest, Bool) {
        let wire = ResumableWire(kind: upload.kind)
        let location = upload.location.flatMap(URL.init(string:)) ?? context.spec.url
        switch step {
        case .create:
            return (wire.creation(context.uploadRequest), true)
        case let .createChunk(count):
            return (wire.creation(context.uploadRequest, firstChunk: count, of: context.length), true)
        case .tusCreate:
            return (wire.tusCreation(context.request("POST", context.spec.url), length: context.length,
                                     fileName: (context.path as NSString).lastPathComponent,
                                     contentType: context.plan.contentType), false)
        case .query:
            return (wire.offsetRequest(context.request("HEAD", location)), false)
        case let .append(from, count):
            return (wire.append(context.request("PATCH", location), offset: from, length: count,
                                last: from + count == context.length), true)
        case .plain:
            return (context.uploadRequest, true)
        }
    }

    /// The next chunk from `offset` (the rest when it is smaller, or when chunks are off).
    private func append(from offset: Int64) {
        go(.append(from: offset, count: state.withLock { $0.chunking.count(from: offset, of: context.length) }))
    }

    /// The upload with the file's identity as it is now (taken when the server's copy begins).
    private func identified(_ upload: ResumableUpload) -> ResumableUpload {
        var upload = upload
        if let print = FileDigest.fingerprint(path: context.path) {
            upload.fileSize = print.size
            upload.fileModified = print.modified
            upload.fileFingerprint = print.hash
        }
        return upload
    }

    /// Why the file is not the one the server's copy was made from, or nil.
    static func fileChange(_ upload: ResumableUpload, path: String) -> String? {
        let name = TerminalSafe.sanitize(path)
        guard let now = FileDigest.fingerprint(path: path) else { return "\(name) cannot be read to resume its upload" }
        if let size = upload.fileSize, size != now.size {
            return "\(name) changed since its upload began (\(size) bytes then, \(now.size) now); retry to start it over"
        }
        if let modified = upload.fileModified, abs(modified - now.modified) > 0.000_001 {
            return "\(name) changed since its upload began (modified since); retry to start it over"
        }
        if let hash = upload.fileFingerprint, hash != now.hash {
            return "\(name) changed since its upload began (its first or last MiB differs); retry to start it over"
        }
        return nil
    }

    private static func fresh(_ kind: ResumableProtocol, reason: String?) -> ResumableUpload {
        var upload = ResumableUpload(kind: kind)
        upload.restartReason = reason
        return upload
    }

    // MARK: TaskRun

    /// The bytes of the upload (from the start) or of an append (from its offset); nil for the requests that
    /// carry none (asked for every task: a HEAD given a body would go out chunked and wait for ever).
    func makeBody() -> TransportBody? {
        let body = state.withLock { s -> BodyStream? in
            switch s.step {
            case .create, .plain: s.body = BodyStream(plan: context.plan)
            case let .createChunk(count): s.body = BodyStream(plan: context.plan, skipping: 0, count: count)
            case let .append(offset, count): s.body = BodyStream(plan: context.plan, skipping: offset, count: count)
            case .tusCreate, .query: s.body = nil
            }
            return s.body
        }
        return body.map { .stream($0) }
    }

    func didSend(bytes: Int64) {
        let total = sent.add(bytes, ordering: .relaxed).newValue
        sentInAttempt.add(bytes, ordering: .relaxed)
        if total == appendLength.load(ordering: .relaxed) {
            let now = monotonicSeconds()
            state.withLock { $0.appendSent = now }
        }
    }

    func didReceive(informational response: HTTPURLResponse) {
        // 104 Upload Resumption Supported: the server keeps what arrives at this location.
        guard response.statusCode == 104, let value = response.value(forHTTPHeaderField: "Location"),
              let url = ResumableWire.resolve(value, against: response.url ?? context.spec.url) else { return }
        context.spokeDraft()
        let upload = state.withLock { s -> ResumableUpload? in
            guard s.step.offersDraft, s.upload.location != url.absoluteString else { return nil }
            s.upload.location = url.absoluteString
            s.upload.confirmedOffset = 0
            return s.upload
        }
        if let upload { context.changed(upload) }
    }

    func didReceive(response: URLResponse, task: URLSessionTask) {
        guard let http = response as? HTTPURLResponse else { return }
        let now = context.clock.now
        let answered = monotonicSeconds()
        state.withLock { s in
            s.answer.begin(http, now: now)
            if s.appendAnswered == nil { s.appendAnswered = answered }
        }
    }

    func didReceive(data: Data) {
        state.withLock { $0.answer.append(data) }
    }

    func didComplete(error: Error?) {
        let (step, answer, facts) = state.withLock { s -> (Step, UploadAnswer, ResumableSteps.Facts) in
            let facts = ResumableSteps.Facts(
                kind: s.upload.kind, length: context.length, located: s.upload.location != nil,
                locationName: s.upload.displayLocation ?? "its location", url: context.spec.url,
                stalledAt: s.stalledAt, conflicts: s.conflicts, grownChunk: s.chunking.grown,
                fileChanged: s.body?.fileChanged.load(ordering: .acquiring) ?? false,
                progressed: sentInAttempt.load(ordering: .relaxed) > 0)
            // A query that follows an append the server took none of reads that once, whatever its answer is.
            if s.step == .query { s.stalledAt = nil }
            return (s.step, s.answer, facts)
        }
        apply(ResumableSteps.after(step, answer: answer, error: error, facts: facts))
    }

    /// Keeps what the rule took from the answer, then goes on as it says.
    private func apply(_ decision: ResumableSteps.Decision) {
        let changed = state.withLock { s -> ResumableUpload? in
            if decision.refusedGrownChunk { _ = s.chunking.refused() }
            if let count = decision.measuredChunk, let issued = s.appendIssued, let sent = s.appendSent, let answered = s.appendAnswered {
                s.chunking.sent(count, in: answered - issued, waited: answered - sent, of: context.length)
            }
            if decision.conflict { s.conflicts += 1 }
            if let stalled = decision.stalledAt { s.stalledAt = stalled }
            if let reason = decision.freshUploadReason {
                s.upload = Self.fresh(s.upload.kind, reason: reason)
                return s.upload
            }
            if let location = decision.location {
                s.upload.location = location
                s.upload.confirmedOffset = 0
                return s.upload
            }
            return nil
        }
        if decision.refusedGrownChunk { context.refusedGrownChunk() }
        if let changed { context.changed(changed) }
        if let offset = decision.confirmed { confirm(offset) }
        switch decision.next {
        case let .request(step): go(step)
        case let .append(from): append(from: from)
        case let .startOver(reason): startOver(reason)
        case let .end(outcome): end(outcome)
        }
    }

    /// The server confirmed `offset`: kept (the detail view lists resumptions) and shown as done.
    private func confirm(_ offset: Int64) {
        let upload = state.withLock { s -> ResumableUpload in
            if s.step == .query { s.upload.noteResumption(at: offset) } else { s.upload.confirmedOffset = offset }
            return s.upload
        }
        base.store(offset, ordering: .relaxed)
        sent.store(0, ordering: .relaxed)
        context.changed(upload)
    }

    /// The server's copy is gone or unusable: from zero, once per attempt, with the reason kept.
    private func startOver(_ reason: String) {
        let again = state.withLock { s -> (ResumableUpload, Step)? in
            s.restarts += 1
            s.stalledAt = nil
            guard s.restarts <= 1 else { return nil }
            s.upload = Self.fresh(s.upload.kind, reason: TerminalSafe.sanitize(reason))
            return (s.upload, creationStep(s))
        }
        guard let (upload, creation) = again else {
            // The fresh copy is no better: a retry would make a third and send the file again (a server that
            // claimed more than the file got it 12 times over 6 attempts). Not retried.
            return end(.failed(.integrity(.protocol, TerminalSafe.sanitize(reason) + " (again, after starting over)"), progressed: false))
        }
        context.changed(upload)
        go(creation)
    }

    private func end(_ outcome: AttemptOutcome) {
        let (response, first) = state.withLock { s -> (ServerResponse?, Bool) in
            defer { s.finished = true }
            return (s.answer.response, !s.finished)
        }
        guard first else { return }
        var done = bytesDone
        if case .finished = outcome { done = context.length }
        context.finish(AttemptReport(outcome: outcome, bytesDone: done, bytesExpected: context.length,
                                     status: response?.status, response: response))
    }
}
