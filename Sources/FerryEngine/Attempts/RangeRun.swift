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

/// One attempt at one byte range of a download, the only kind of download attempt. A single stream is the
/// open-ended range `bytes=N-` (N is what the `.part` file holds, 0 on a first attempt: no Range header at
/// all); a segmented download runs one bounded range `bytes=N-M` per segment into the preallocated file.
/// Every response goes through ResumeRule. Callbacks arrive on the session's serial delegate queue; the lock
/// is there for the compiler and for snapshot readers, so it is uncontended on the per-chunk path.
final class RangeRun: TaskRun {
    struct Start: Sendable {
        var spec: TransferSpec
        /// The name already claimed (its `.part` file exists); nil on a single stream's first attempt.
        var fileName: String?
        /// Where the range begins in the file (a segment's start; 0 for a single stream).
        var rangeStart: Int64
        /// The first byte asked for: the range's start plus what is already on disk.
        var from: Int64
        /// One past the range's last byte; nil for a single stream (to the end of the file).
        var end: Int64?
        /// The size earlier attempts were told; a 206 must agree with it.
        var knownTotal: Int64?
        var validators: Validators
        var bufferSize: Int

        var bounded: Bool { end != nil }
    }

    private struct State {
        var file: PartialFile?
        var fileName: String?
        var gotResponse = false
        var total: Int64?
        var validators = Validators()
        var status: Int?
        var hostKey: String?
        /// Set when the run decided to stop the task itself (bad status, bad range, a local error).
        var verdict: AttemptOutcome?
        var alreadyComplete = false
        var task: URLSessionTask?
        /// Bytes of the range on disk, from the range's start.
        var onDisk: Int64
        /// The accepted response is not told yet (`accepted`): whether the download could be segmented; nil once
        /// told, or with nothing to tell. Its name and validators are the state's.
        var untoldRangeable: Bool?
        /// The answer was the whole file though the attempt asked from an offset: it starts over from zero (told
        /// with `accepted`).
        var startedOver = false
    }

    let start: Start
    private let names: NameClaims
    /// A single stream's accepted response, told with the first piece of body that leaves the file unfinished:
    /// its name, validators and size show while it runs. A body that comes whole with its response (a small
    /// file) is told with its end instead, whose report carries the same (one turn of the engine's lock fewer
    /// on the delegate queue). The name reaches the store before the `.part` file exists either way (`claiming`).
    /// `rangeable`: a whole-file answer from a server that offers byte ranges with a validator (the download
    /// could be segmented).
    /// `startedOver`: the answer was the whole file though the attempt asked from where its `.part` file ended.
    private let accepted: (@Sendable (_ fileName: String, _ validators: Validators, _ rangeable: Bool, _ startedOver: Bool) -> Void)?
    /// Told the name a first attempt claimed once its `.part` file is made: the item knows it from then on (a
    /// remove deletes that file and frees the name, a record keeps it), whenever `accepted` comes.
    private let named: (@Sendable (_ fileName: String) -> Void)?
    /// Told each name about to be claimed, before its `.part` file exists (the queue records it durably).
    private let claiming: (@Sendable (_ fileName: String, _ validators: Validators) -> Void)?
    private let finish: @Sendable (AttemptReport) -> Void
    private let state: Mutex<State>
    /// Bytes of the range done before this attempt's body (0 again after a start over).
    private let base: Atomic<Int64>
    private let received = Atomic<Int64>(0)
    private let expected = Atomic<Int64>(-1)
    /// `State.onDisk` for readers that must not wait for the lock: it is held across write(2) (didReceive,
    /// flushToDisk), and the engine reads this under its own lock for every record it stores.
    private let flushed: Atomic<Int64>

    /// What the time is (a Retry-After date).
    private let clock: any EngineClock

    init(start: Start, names: NameClaims, clock: any EngineClock,
         claiming: (@Sendable (String, Validators) -> Void)? = nil,
         named: (@Sendable (String) -> Void)? = nil,
         accepted: (@Sendable (String, Validators, Bool, Bool) -> Void)? = nil,
         finish: @escaping @Sendable (AttemptReport) -> Void) {
        self.start = start
        self.names = names
        self.clock = clock
        self.claiming = claiming
        self.named = named
        self.accepted = accepted
        self.finish = finish
        var initial = State(onDisk: start.from - start.rangeStart)
        initial.fileName = start.fileName
        initial.total = start.knownTotal
        self.state = Mutex(initial)
        self.base = Atomic(start.from - start.rangeStart)
        self.flushed = Atomic(start.from - start.rangeStart)
        if let total = start.knownTotal { expected.store(total, ordering: .relaxed) }
    }

    var bytesDone: Int64 { base.load(ordering: .relaxed) + received.load(ordering: .relaxed) }
    var flushedBytes: Int64 { flushed.load(ordering: .relaxed) }
    var bytesExpected: Int64? {
        let e = expected.load(ordering: .relaxed)
        return e >= 0 ? e : nil
    }

    private var partPath: String? {
        start.fileName.map { PartialFile.path(directory: start.spec.directory, name: $0) }
    }

    func makeRequest(userAgent: String, timeout: TimeInterval, credentials: HostCredentials) -> URLRequest {
        var request = RequestHeaders.request(for: start.spec, method: "GET", userAgent: userAgent, timeout: timeout,
                                             credentials: credentials)
        if start.from > 0 || start.bounded {
            request.setValue("bytes=\(start.from)-\(start.end.map { String($0 - 1) } ?? "")", forHTTPHeaderField: "Range")
            if let ifRange = start.validators.ifRange { request.setValue(ifRange, forHTTPHeaderField: "If-Range") }
        }
        return request
    }

    func didReceive(response: URLResponse, task: URLSessionTask) {
        guard let http = response as? HTTPURLResponse else {
            stop(task, .failed(.protocolViolation("not an HTTP response"), progressed: false))
            return
        }
        // Interim 1xx answers (100 Continue) arrive as extra responses on Linux: not the real one.
        if http.statusCode < 200 { return }
        let header: (String) -> String? = { http.value(forHTTPHeaderField: $0) }
        let verdict = ResumeRule.evaluate(status: http.statusCode, header: header, requestedOffset: start.from,
                                          requestedEnd: start.end, knownTotal: start.knownTotal, now: clock.now)
        // A first attempt claims its name (and the queue records it, a store write) before the lock: the lock
        // is taken by snapshot readers under the engine's own lock, which must never wait for the disk.
        let preclaim = claimFirst(verdict, http: http)
        var used = false
        var claimedName: String?
        defer { if !used, case let .success(claim)? = preclaim { release(claim) } }
        let failure: AttemptOutcome? = state.withLock { s in
            guard !s.gotResponse else { return nil }
            s.gotResponse = true
            s.task = task
            s.status = http.statusCode
            s.hostKey = http.value(forHTTPHeaderField: TransferScheme.hostKeyHeader)
            s.validators = Validators(etag: header("ETag"), lastModified: header("Last-Modified"))
            do throws(TransferFailure) {
                if let failure = try apply(verdict, &s) { return failure }
                if s.file == nil {
                    s.file = try openFile(&s, claimed: preclaim)
                    used = preclaim != nil
                    if used { claimedName = s.fileName }
                }
                if !start.bounded { s.file?.expectedSize = s.total }
                s.validators.totalLength = s.total ?? s.validators.totalLength
                return nil
            } catch {
                return .failed(error, progressed: false)
            }
        }
        if let claimedName { named?(claimedName) }
        if let failure {
            stop(task, failure)
            return
        }
        let rangeable = !start.bounded && start.from == 0 && http.statusCode == 200
            && (header("Accept-Ranges")?.lowercased().contains("bytes") ?? false)
        // Asked in ranges, a file that can be is told at once: the engine stops this probe before any of its body
        // is read (an sftp server read 2.5 MiB of an 8 MiB file for a probe told with its first piece).
        let mayBeSplit = (start.spec.segments ?? 1) > 1
        let (complete, announce) = state.withLock { s -> (Bool, (String, Validators, Bool, Bool)?) in
            if !start.bounded, let name = s.fileName {
                s.untoldRangeable = rangeable && s.validators.ifRange != nil && s.validators.totalLength != nil
                if mayBeSplit, s.untoldRangeable == true, !s.alreadyComplete {
                    s.untoldRangeable = nil
                    return (false, (name, s.validators, true, s.startedOver))
                }
            }
            return (s.alreadyComplete, nil)
        }
        if complete { BoundedDelegateQueue.cancel(task) }
        if let (name, validators, rangeable, startedOver) = announce { accepted?(name, validators, rangeable, startedOver) }
    }

    /// Applies ResumeRule's verdict; the outcome to stop with, if any.
    private func apply(_ verdict: ResumeRule.Verdict, _ s: inout State) throws(TransferFailure) -> AttemptOutcome? {
        switch verdict {
        case let .failure(failure):
            return .failed(failure, progressed: false)
        case let .discardAndRestart(reason):
            if start.bounded { return .unusable(reason) }
            startOver(&s)
            return .failed(.protocolViolation(reason), progressed: false)
        case let .startOver(total):
            if start.bounded { return .unusable("the server ignored the range or the file changed") }
            startOver(&s)
            s.startedOver = start.from > 0
            s.total = total
        case .alreadyComplete:
            s.alreadyComplete = true
            s.total = start.from
        case let .append(_, total):
            s.total = total
        }
        expected.store(start.bounded ? -1 : s.total ?? -1, ordering: .relaxed)
        return nil
    }

    /// A single stream whose answer is the whole file (or unusable): what is on disk goes.
    private func startOver(_ s: inout State) {
        if let path = partPath { _ = truncate(path, 0) }
        s.onDisk = 0
        flushed.store(0, ordering: .relaxed)
        base.store(0, ordering: .relaxed)
    }

    /// The range's file: the preallocated one at `from` (bounded), the `.part` file at its end, or on a first
    /// attempt the one claimed before the lock (claimFirst).
    private func openFile(_ s: inout State, claimed: Result<(name: String, fd: Int32), TransferFailure>?) throws(TransferFailure) -> PartialFile {
        if let path = partPath {
            // A range shares the transport's in-flight bound with the others, so its pieces are smaller:
            // half the buffer is enough to gather them (8 ranges held 2 MiB of buffers).
            if start.bounded { return try PartialFile(segmentOf: path, at: start.from, bufferSize: start.bufferSize / 2) }
            return try PartialFile(openingOrCreating: path, bufferSize: bufferSize(s))
        }
        guard let claim = try claimed?.get() else { throw .local(.other, "no file to write for \(start.spec.url.lastPathComponent)") }
        s.fileName = claim.name
        return PartialFile(path: PartialFile.path(directory: start.spec.directory, name: claim.name), fd: claim.fd,
                           bufferSize: bufferSize(s))
    }

    /// No larger than what is left of the body, when its length is known: a small file's body, handed over in
    /// one piece, is then written at once, never copied into a buffer (64 of them at once held 16 MiB).
    private func bufferSize(_ s: State) -> Int {
        guard let total = s.total else { return start.bufferSize }
        return Int(min(Int64(start.bufferSize), max(0, total - start.from)))
    }

    /// On a first attempt whose answer will be written, the name claimed (its `.part` file created) after
    /// the queue has recorded it; nil when this attempt writes into a file it already has, or writes nothing.
    private func claimFirst(_ verdict: ResumeRule.Verdict, http: HTTPURLResponse) -> Result<(name: String, fd: Int32), TransferFailure>? {
        guard partPath == nil, !start.bounded else { return nil }
        let total: Int64?
        switch verdict {
        case let .startOver(t): total = t
        case let .append(_, t): total = t
        case .alreadyComplete, .discardAndRestart, .failure: return nil
        }
        guard !state.withLock({ $0.gotResponse }) else { return nil }
        let name = FileNaming.chooseName(explicit: start.spec.fileName,
                                         contentDisposition: http.value(forHTTPHeaderField: "Content-Disposition"),
                                         url: http.url ?? start.spec.url)
        let validators = Validators(etag: http.value(forHTTPHeaderField: "ETag"),
                                    lastModified: http.value(forHTTPHeaderField: "Last-Modified"), totalLength: total)
        do throws(TransferFailure) {
            return .success(try names.claim(directory: start.spec.directory, name: name,
                                            replacing: start.spec.replacing) { candidate in
                claiming?(candidate, validators)
            })
        } catch {
            return .failure(error)
        }
    }

    /// A claim made but not used (the attempt ended another way): its empty `.part` file and its name go.
    private func release(_ claim: (name: String, fd: Int32)) {
        close(claim.fd)
        unlink(PartialFile.path(directory: start.spec.directory, name: claim.name))
        names.release(directory: start.spec.directory, name: claim.name)
    }

    private func stop(_ task: URLSessionTask, _ outcome: AttemptOutcome) {
        state.withLock { s in if s.verdict == nil { s.verdict = outcome } }
        BoundedDelegateQueue.cancel(task)
    }

    /// Bytes of the range on disk once `file` is flushed.
    private func onDisk(_ file: PartialFile) -> Int64 {
        start.bounded ? start.from - start.rangeStart + file.written : file.written
    }

    func didReceive(data: Data) {
        var failed: URLSessionTask?
        let (count, announce): (Int64?, (String, Validators, Bool, Bool)?) = state.withLock { s in
            guard s.verdict == nil, !s.alreadyComplete, let file = s.file else { return (nil, nil) }
            // A bounded range never writes past its end, whatever the server sends.
            let room = start.end.map { $0 - start.from - file.size } ?? Int64(data.count)
            let chunk = Int64(data.count) > room ? data.prefix(Int(max(0, room))) : data
            do throws(TransferFailure) {
                try file.append(chunk)
            } catch {
                // The transfer ends now (it went on taking the whole body and dropping it: a download onto a
                // full disk said "running" at 0 B/s until the server was done).
                s.verdict = .failed(error, progressed: true)
                failed = s.task
                return (nil, nil)
            }
            // The body goes on: the accepted response is told now.
            guard let rangeable = s.untoldRangeable, let name = s.fileName, s.total.map({ file.size < $0 }) ?? true else {
                return (Int64(chunk.count), nil)
            }
            s.untoldRangeable = nil
            return (Int64(chunk.count), (name, s.validators, rangeable, s.startedOver))
        }
        if let failed { BoundedDelegateQueue.cancel(failed) }
        if let count { received.add(count, ordering: .relaxed) }
        if let (name, validators, rangeable, startedOver) = announce { accepted?(name, validators, rangeable, startedOver) }
    }

    /// Writes out what the buffer holds. Called about once a second by the engine, so a stalled or slow
    /// transfer does not keep received bytes only in memory (a crash would lose them).
    func flushToDisk() {
        let task: URLSessionTask? = state.withLock { s in
            guard s.verdict == nil, let file = s.file else { return nil }
            do throws(TransferFailure) {
                try file.flush()
                s.onDisk = onDisk(file)
                flushed.store(s.onDisk, ordering: .relaxed)
                return nil
            } catch {
                s.verdict = .failed(error, progressed: true)
                return s.task
            }
        }
        if let task { BoundedDelegateQueue.cancel(task) }
    }

    func didComplete(error: Error?) {
        let report = state.withLock { s -> AttemptReport in
            let outcome = conclude(&s, error: error)
            return AttemptReport(outcome: outcome, bytesDone: s.onDisk, bytesExpected: start.bounded ? nil : s.total,
                                 fileName: s.fileName, validators: s.validators, status: s.status, hostKey: s.hostKey)
        }
        finish(report)
    }

    private func conclude(_ s: inout State, error: Error?) -> AttemptOutcome {
        let progressed = received.load(ordering: .relaxed) > 0
        defer { s.file = nil }
        if s.verdict == nil, let file = s.file {
            // A whole file, all of it received, is handed over as it is: the finisher writes out what is left as
            // it syncs the file, off the delegate queue (a small file's body, one piece, is written there;
            // PartialFile). The report counts what is on disk (a finisher that cannot write the rest fails, and
            // the item shows what it has). Anything else is on disk before it is judged.
            let whole = error == nil && !s.alreadyComplete && s.gotResponse && start.end == nil && s.fileName != nil
                && (s.total.map { file.size == $0 } ?? true)
            do throws(TransferFailure) {
                if !whole { try file.flush() }
                s.onDisk = onDisk(file)
                flushed.store(s.onDisk, ordering: .relaxed)
            } catch {
                s.verdict = .failed(error, progressed: progressed)
            }
        }
        if let verdict = s.verdict { return verdict }
        if s.alreadyComplete, let file = s.file, let name = s.fileName {
            return .finished(FileHandover(file: file, fileName: name, total: file.size))
        }
        if let error {
            guard let failure = TransferFailure.from(taskError: error) else { return .stopped }
            return .failed(failure, progressed: progressed)
        }
        guard s.gotResponse, let file = s.file, let name = s.fileName else {
            return .failed(.protocolViolation("the server sent no usable response"), progressed: progressed)
        }
        if let end = start.end {
            let length = end - start.from
            guard file.written == length else {
                return .failed(.protocolViolation("range \(start.from)-\(end - 1): received \(file.written) of \(length) bytes"),
                               progressed: progressed)
            }
            return .finished(nil)
        }
        if let total = s.total, file.size != total {
            return .failed(.protocolViolation("received \(file.size) of \(total) bytes"), progressed: progressed)
        }
        return .finished(FileHandover(file: file, fileName: name, total: s.total))
    }
}
