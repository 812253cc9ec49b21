import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// An sftp upload that an earlier attempt began, resumed as lftp's `put -c` does: the server is asked how much of
/// the file it has (a HEAD: the remote file's size), the last MiB of that is read back and compared with the same
/// bytes of the file, and only then is the rest written from there. It never appends to a stranger's file: a
/// remote file whose bytes differ, or that is longer than this one, is written again whole (and the item says
/// why). A first attempt, and scp (which cannot write at an offset), write the file whole (UploadRun).
/// Its requests are tasks of the session one after another under one handle, as a resumable upload's are.
final class RemoteAppendRun: TaskRun {
    /// How much of what the server has is read back and compared before the rest is appended.
    static let checkedTail: Int64 = 1 << 20

    struct Context: Sendable {
        /// What the item had sent when this attempt began: its progress until the server says what it has.
        let sentBefore: Int64
        let plan: BodyPlan
        /// The file and its length (the whole body).
        let path: String
        let length: Int64
        /// The user's upload request (its headers, its length), made again for each step.
        let uploadRequest: URLRequest
        /// Makes and starts a task for the request, routed to this run; `withBody`: an upload task whose body the
        /// run makes. Calls `cancelled` instead when the attempt was stopped first.
        let issue: @Sendable (_ run: RemoteAppendRun, _ request: URLRequest, _ withBody: Bool,
                              _ cancelled: @escaping @Sendable () -> Void) -> Void
        /// The server was asked and the rest goes from `from` (0: the file whole).
        let appending: @Sendable (_ from: Int64) -> Void
        let finish: @Sendable (AttemptReport) -> Void
        let clock: any EngineClock
    }

    private enum Step: Equatable {
        /// The remote file's size.
        case stat
        /// The last bytes the server has, read back: `size` is what it has.
        case check(size: Int64)
        /// The file from `from` on (0: whole, truncating what is there).
        case append(from: Int64)
    }

    private struct State {
        var step = Step.stat
        var status: Int?
        var size: Int64?
        var tail = Data()
        var answer = UploadAnswer()
        var done = false
    }

    private let context: Context
    private let state = Mutex(State())
    /// Where the append began (the server's bytes kept), and what went out since.
    private let base = Atomic<Int64>(0)
    private let sent = Atomic<Int64>(0)

    init(context: Context) {
        self.context = context
        base.store(context.sentBefore, ordering: .relaxed)
    }

    var bytesDone: Int64 { base.load(ordering: .relaxed) + sent.load(ordering: .relaxed) }
    var bytesExpected: Int64? { context.length }

    func start() {
        issue(.stat)
    }

    private func issue(_ step: Step) {
        state.withLock {
            $0.step = step
            $0.status = nil
            $0.answer = UploadAnswer()
        }
        var request = context.uploadRequest
        request.setValue(nil, forHTTPHeaderField: "Content-Type")
        switch step {
        case .stat:
            request.httpMethod = "HEAD"
            request.setValue(nil, forHTTPHeaderField: "Content-Length")
        case let .check(size):
            request.httpMethod = "GET"
            request.setValue(nil, forHTTPHeaderField: "Content-Length")
            request.setValue("bytes=\(size - min(size, Self.checkedTail))-\(size - 1)", forHTTPHeaderField: "Range")
        case let .append(from):
            base.store(from, ordering: .relaxed)
            sent.store(0, ordering: .relaxed)
            context.appending(from)
            request.httpMethod = "PUT"
            request.setValue(String(context.length - from), forHTTPHeaderField: "Content-Length")
            if from > 0 { request.setValue("bytes \(from)-*/\(context.length)", forHTTPHeaderField: "Content-Range") }
        }
        let withBody: Bool
        if case .append = step { withBody = true } else { withBody = false }
        context.issue(self, request, withBody) { [self] in end(.stopped) }
    }

    func makeBody() -> TransportBody? {
        let from = base.load(ordering: .relaxed)
        return .stream(BodyStream(plan: context.plan, skipping: from))
    }

    func didSend(bytes: Int64) {
        sent.add(bytes, ordering: .relaxed)
    }

    func didReceive(response: URLResponse, task: URLSessionTask) {
        guard let http = response as? HTTPURLResponse else { return }
        let now = context.clock.now
        state.withLock { s in
            s.status = http.statusCode
            switch s.step {
            case .stat: s.size = http.value(forHTTPHeaderField: "Content-Length").flatMap { Int64($0) }
            case .check: s.tail = Data()
            case .append: s.answer.begin(http, now: now)
            }
        }
    }

    func didReceive(data: Data) {
        state.withLock { s in
            switch s.step {
            case .check: if Int64(s.tail.count) < Self.checkedTail { s.tail.append(data) }
            case .append: s.answer.append(data)
            case .stat: break
            }
        }
    }

    func didComplete(error: Error?) {
        let (step, status, size, tail) = state.withLock { ($0.step, $0.status, $0.size, $0.tail) }
        switch step {
        case .stat:
            if let error { return end(Self.outcome(error)) }
            // No file there (404): nothing to keep.
            guard status == 200, let size, size > 0 else { return issue(.append(from: 0)) }
            guard size <= context.length else { return issue(.append(from: 0)) }
            issue(.check(size: size))
        case let .check(size):
            if let error { return end(Self.outcome(error)) }
            let count = min(size, Self.checkedTail)
            guard status == 206, Int64(tail.count) == count, tail == localBytes(at: size - count, count: Int(count)) else {
                // Not the start of this file (or it could not be read back): written again, whole.
                return issue(.append(from: 0))
            }
            if size == context.length {
                return end(.finished(nil))
            }
            issue(.append(from: size))
        case .append:
            let outcome = state.withLock { $0.answer.outcome(error: error, progressed: false) }
            end(outcome)
        }
    }

    /// The file's bytes at `offset` (nil when they cannot be read: then nothing is appended).
    private func localBytes(at offset: Int64, count: Int) -> Data? {
        let fd = open(context.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data = Data(count: count)
        let read = data.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        return read == count ? data : nil
    }

    private static func outcome(_ error: Error) -> AttemptOutcome {
        guard let failure = TransferFailure.from(taskError: error) else { return .stopped }
        return .failed(failure, progressed: false)
    }

    private func end(_ outcome: AttemptOutcome) {
        guard state.withLock({ s in defer { s.done = true }; return !s.done }) else { return }
        var outcome = outcome
        if case .finished = outcome { base.store(context.length, ordering: .relaxed); sent.store(0, ordering: .relaxed) }
        if case let .failed(failure, _) = outcome { outcome = .failed(failure, progressed: sent.load(ordering: .relaxed) > 0) }
        context.finish(AttemptReport(outcome: outcome, bytesDone: bytesDone, bytesExpected: context.length))
    }
}
