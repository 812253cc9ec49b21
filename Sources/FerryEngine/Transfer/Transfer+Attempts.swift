import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What happens when attempts report, timers fire and the finisher is done.
extension Transfer {
    /// Segments are never smaller than this.
    static let minimumSegment: Int64 = 1 << 20

    /// A single stream's first attempt made its `.part` file under `fileName`: a remove deletes that file and frees
    /// the name, a record keeps it, before the rest of its answer is told (`accepted`, or its end's report).
    func named(serial: Int, fileName: String) {
        guard live[0]?.serial == serial else { return }
        self.fileName = fileName
    }

    /// A single stream's response was accepted: the name and validators are recorded (and so saved) at once.
    /// When the user asked for segments and the answer shows a file worth splitting, this probe is stopped
    /// and the file is fetched in ranges instead.
    func accepted(serial: Int, fileName: String, validators: Validators, rangeable: Bool, startedOver: Bool = false) -> [Effect]? {
        guard live[0]?.serial == serial else { return nil }
        if startedOver, var attempt = attempts.popLast() {
            // Asked from where the `.part` file ended, it got the whole file: the attempt goes on from zero, and
            // says so once (the progress went back; it said "resuming at" that offset).
            attempt.restartedFrom = attempt.fromOffset
            attempt.fromOffset = 0
            attempts.append(attempt)
        }
        self.fileName = fileName
        if validators != Validators() { self.validators = validators }
        bytesExpected = validators.totalLength ?? bytesExpected
        guard rangeable, stopIntent == nil, let plan = segmentPlan() else { return [] }
        segments = plan
        stopIntent = .split
        return [.stop([serial])]
    }

    /// The ranges for a file whose size is known, when the user asked for more than one and it is big enough.
    private func segmentPlan() -> [SegmentState]? {
        guard let wanted = spec.segments, wanted > 1, !segmentFallback, segments == nil,
              let total = validators.totalLength else { return nil }
        let plan = SegmentState.plan(total: total, count: wanted, minimum: Self.minimumSegment)
        return plan.count > 1 ? plan : nil
    }

    /// A resumable upload's attempt learned where the upload stands on the server: a location, a confirmed
    /// offset, a start over. Not taken (false) once the attempt is over or the item was cancelled (its copy
    /// on the server is being discarded).
    func resumableChanged(serial: Int, _ upload: ResumableUpload) -> [Effect]? {
        guard live[0]?.serial == serial, state != .cancelled else { return nil }
        let before = resumable?.resumptions.last
        // The upload started over (the server forgot it, the file changed, an offset past the length): the
        // copy it leaves on the server is ended, as a cancel ends it.
        let abandoned = resumable.flatMap { old in old.location != nil && old.location != upload.location ? old : nil }
        resumable = upload
        if let resumption = upload.resumptions.last, resumption != before, var attempt = attempts.popLast() {
            // The attempt goes on from the server's offset, as the detail view's list of attempts shows.
            attempt.fromOffset = resumption.offset
            attempts.append(attempt)
        }
        return abandoned.map { [.discardUpload($0)] } ?? []
    }

    /// An sftp or ftp upload's attempt asked the server what it has of the file: the rest goes from `from` (0: sent
    /// whole), and the attempt says so (its progress goes back to there).
    func appending(serial: Int, from: Int64) -> [Effect]? {
        guard live[0]?.serial == serial, var attempt = attempts.popLast() else { return nil }
        attempt.fromOffset = from
        attempt.serverHad = from
        attempts.append(attempt)
        return []
    }

    /// The manager could not make the attempt (an upload body whose file went away).
    func couldNotStart(serial: Int, _ failure: TransferFailure) -> [Effect]? {
        guard close(serial: serial) != nil else { return nil }
        closeAttempt(error: failure.message)
        return fail(ItemFailure(failure))
    }

    /// A file effect failed (the `.part` file could not be prepared): the transfer fails, naming why.
    func fileProblem(_ failure: TransferFailure) -> [Effect] {
        // The attempts opened for the rest of the batch never start.
        live = live.filter { $0.value.task != nil }
        segments = nil
        if state == .running { closeAttempt(error: failure.message) }
        return stopEveryAttempt + fail(ItemFailure(failure))
    }

    /// An attempt ended.
    func ended(serial: Int, _ report: AttemptReport) -> [Effect]? {
        guard let (index, bounded) = close(serial: serial) else { return nil }
        lastStatus = report.status ?? lastStatus
        if let response = report.response { self.response = response }
        if let key = report.hostKey, !attempts.isEmpty { attempts[attempts.count - 1].hostKey = key }
        return bounded ? rangeEnded(index, report) : streamEnded(report)
    }

    /// A single stream's or an upload's attempt ended.
    private func streamEnded(_ report: AttemptReport) -> [Effect] {
        bytesDone = report.bytesDone
        bytesExpected = report.bytesExpected ?? bytesExpected
        if let name = report.fileName { fileName = name }
        if report.validators != Validators() { validators = report.validators }
        let intent = stopIntent
        stopIntent = nil
        var effects: [Effect] = []
        var attemptError: String?
        switch (report.outcome, intent) {
        case let (.finished(.some(handover)), intent) where intent != .cancel:
            // Finished (even a probe that got the whole file before it could be stopped): check and rename.
            segments = nil
            closeAttempt(error: nil)
            return beginFinishing(handover)
        case (.finished(.none), _):
            // An upload the server accepted: done, whatever was asked meanwhile.
            state = .completed
            lastFailure = nil
        case (_, .split):
            // The probe of a segmented download ended: the ranges start from a preallocated file.
            effects += prepareRanges()
        case let (outcome, .some(intent)):
            // Stopped on purpose: pause and cancel already set the state; a shutdown leaves it queued. A split
            // that was under way is dropped: the next start resumes the stream from what it wrote.
            if intent == .shutdown || intent == .restart { state = .queued }
            restartsInPlace = intent == .restart
            segments = nil
            if case let .failed(failure, _) = outcome { attemptError = failure.message } else { attemptError = "stopped" }
        case (.finished, .none):
            break  // handled by the first case
        case (.stopped, .none):
            // Nobody asked for it: treat it like a lost connection.
            attemptError = "stopped unexpectedly"
            effects += retryOrFail(.transport(code: NSURLErrorCancelled, kind: .connectionLost, message: "stopped unexpectedly"), progressed: false)
        case let (.failed(failure, _), .none) where failure.movedForLimit:
            // Off an HTTP/2 stream for its limit: queued at once to go on from where it was, no retry spent.
            attemptError = failure.message
            state = .queued
        case let (.failed(failure, progressed), .none):
            attemptError = failure.message
            effects += retryOrFail(failure, progressed: progressed)
        case let (.unusable(reason), .none):
            attemptError = reason
            effects += retryOrFail(.protocolViolation(reason), progressed: false)
        }
        closeAttempt(error: attemptError)
        return effects
    }

    /// After the probe: an empty `.part` file of the full size, every range still to fetch.
    private func prepareRanges() -> [Effect] {
        state = .queued
        guard fileName != nil, let total = validators.totalLength, let ranges = segments else {
            segments = nil
            return []
        }
        segments = ranges.map { SegmentState(start: $0.start, end: $0.end) }
        return [.preallocate(total)]
    }

    /// One range's attempt ended. A failed range is retried alone; a range the server will not serve exactly
    /// turns the download back into one stream from zero.
    private func rangeEnded(_ index: Int, _ report: AttemptReport) -> [Effect] {
        guard var ranges = segments else { return [] }
        ranges[index].done = min(ranges[index].end - ranges[index].start, report.bytesDone)
        segments = ranges
        var effects: [Effect] = []
        switch report.outcome {
        case .stopped:
            break  // stopped on purpose: settled below once every range has drained
        case .finished:
            rangeRetries[index] = 0
            if ranges.allSatisfy(\.isComplete), state == .running, stopIntent == nil { effects += finishRanges() }
        case let .unusable(reason):
            lastFailure = ItemFailure(FailureCause(.protocol), reason)
            segmentFallback = true
            restartFromZero = true
            if stopIntent == nil { stopIntent = .split }
            effects += stopEveryAttempt
        case let .failed(failure, progressed):
            if progressed { rangeRetries[index] = 0 }
            // While a pause, cancel or fallback drains the ranges, a failing one just stops.
            guard state == .running, stopIntent == nil else { break }
            // Off an HTTP/2 stream for its limit: the range goes on at once on a connection of its own.
            guard !failure.movedForLimit else {
                effects.append(.wakeRange(index: index, after: 0, token: generation))
                break
            }
            let spent = rangeRetries[index] ?? 0
            switch policy.decide(failure, retries: spent) {
            case let .retry(after):
                // Only this range waits and goes again; the others carry on.
                rangeRetries[index] = spent + 1
                lastFailure = ItemFailure(failure)
                effects.append(.wakeRange(index: index, after: after, token: generation))
            case .giveUp:
                stopIntent = .cancel
                state = .failed
                lastFailure = ItemFailure(failure)
                effects += stopEveryAttempt
            }
        }
        if live.isEmpty, let intent = stopIntent { settleRanges(intent) }
        return effects
    }

    /// Every range has stopped after a pause, cancel, shutdown, failure or fallback: the state follows.
    private func settleRanges(_ intent: StopIntent) {
        stopIntent = nil
        closeAttempt(error: state == .failed ? lastError : "stopped")
        switch intent {
        case .shutdown: state = .queued
        case .restart:
            state = .queued
            restartsInPlace = true
        case .split:
            // Back to a single stream.
            segments = nil
            state = .queued
        case .pause, .cancel: break  // the command already set the state
        }
    }

    /// All ranges are on disk: the same last steps as a single stream.
    func finishRanges() -> [Effect] {
        closeAttempt(error: nil)
        return beginFinishing(nil)
    }

    /// A range's retry is due.
    func rangeRetryDue(index: Int, token: Int) -> [Effect]? {
        guard token == generation, state == .running, stopIntent == nil, live[index] == nil,
              let range = segments?[index], !range.isComplete else { return nil }
        return [startRange(index)]
    }

    /// The wait before a retry is over: back in the queue (unless paused or cancelled meanwhile).
    func retryDue(token: Int) -> [Effect]? {
        guard token == generation, state == .waiting else { return nil }
        state = .queued
        return []
    }

    /// The finisher is done: the published name and the file's size, or why the file did not check out.
    func finished(token: Int, _ result: Result<(name: String, size: Int64), TransferFailure>) -> [Effect]? {
        guard token == generation, finishing else { return nil }
        endFinishing()
        switch result {
        case let .success((name, size)):
            return foundFinished(name: name, size: size)
        case let .failure(failure):
            if case .integrity = failure { restartFromZero = true }
            if var attempt = attempts.popLast() {
                attempt.error = failure.message
                attempts.append(attempt)
            }
            if cancelAfterFinish {
                state = .cancelled
                lastFailure = .cancelled("cancelled (\(failure.message))")
                return []
            }
            return retryOrFail(failure, progressed: false)
        }
    }

    /// The file was finished before the engine stopped (renamed from its `.part`, the store not yet told):
    /// the item is complete as it is, nothing is fetched again and no second copy is made.
    /// (Also the end of every successful finish.)
    func foundFinished(name: String, size: Int64) -> [Effect] {
        fileName = name
        savedPath = spec.directory + "/" + name
        state = .completed
        lastFailure = nil
        bytesDone = size
        if validators.totalLength == nil { validators.totalLength = size }
        return []
    }

    /// After a failed attempt: wait and go again, or give up.
    func retryOrFail(_ failure: TransferFailure, progressed: Bool) -> [Effect] {
        if progressed, bytesDone > highWater {
            // Progress was made: a flaky link that keeps moving should not run out of retries.
            highWater = bytesDone
            retries = 0
            dnsRetries = 0
            failingSince = nil
        }
        // The run of failures began with the first since the last progress (RetryPolicy.patience).
        let since = failingSince ?? clock.now
        failingSince = since
        lastFailureWasDNS = policy.isDNS(failure)
        var idempotent = true
        if let upload = spec.upload {
            guard retryUploads else { return fail(ItemFailure(failure)) }
            guard upload.isRepeatable else { return fail(ItemFailure(failure.cause, failure.message + " (standard input cannot be sent again)")) }
            // A POST whose upload the server keeps at a location goes on there, not again at the endpoint.
            idempotent = upload.method.uppercased() != "POST" || resumable?.location != nil
        }
        switch policy.decide(failure, retries: retries, dnsRetries: dnsRetries, idempotent: idempotent,
                             failingFor: clock.now.timeIntervalSince(since)) {
        case .giveUp:
            return fail(ItemFailure(failure))
        case let .retry(after):
            retries += 1
            if lastFailureWasDNS { dnsRetries += 1 }
            state = .waiting
            lastFailure = ItemFailure(failure)
            nextRetryAt = clock.now.addingTimeInterval(after)
            return [.wake(after: after, token: generation)]
        }
    }

    func fail(_ failure: ItemFailure) -> [Effect] {
        state = .failed
        lastFailure = failure
        return []
    }

    /// Closes the record of the attempt under way with its end, status and error.
    private func closeAttempt(error: String?) {
        guard var attempt = attempts.popLast() else { return }
        attempt.endedAt = clock.now
        attempt.status = lastStatus
        attempt.error = error
        attempts.append(attempt)
    }
}
