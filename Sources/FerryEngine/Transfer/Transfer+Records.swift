import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// A transfer as the store keeps it and as front ends see it.
extension Transfer {
    /// An item from the store. One that was running (the engine stopped or crashed) is queued again and will
    /// resume where its `.part` file ends.
    convenience init(stored: StoredTransfer, policy: RetryPolicy, retryUploads: Bool, clock: any EngineClock = SystemClock.shared) {
        let state = stored.state.atRest
        self.init(id: stored.id, spec: stored.spec, state: state, policy: policy, retryUploads: retryUploads, clock: clock)
        fileName = stored.fileName
        savedPath = stored.savedPath
        validators = stored.validators
        bytesDone = stored.bytesDone
        bytesExpected = stored.bytesExpected
        highWater = stored.bytesDone
        countedBytes = stored.bytesDone  // what it had before this engine's count of bytes moved began
        retries = stored.retries
        attempts = stored.attempts
        lastFailure = ItemFailure(message: stored.lastError, cause: stored.failure)
        segments = stored.segments
        rateLimit = stored.rateLimit
        batch = stored.batch
        response = stored.response
        resumable = stored.resumable
        rank = stored.position
    }

    /// Bytes done: the ranges' or the single stream's, including what running attempts hold.
    var currentBytes: Int64 {
        guard let segments else { return live[0]?.run?.bytesDone ?? bytesDone }
        return ranges(segments, counting: \.bytesDone).reduce(0) { $0 + $1.done }
    }

    /// The ranges with what their running attempts hold (buffered or not).
    var liveSegments: [SegmentState]? { segments.map { ranges($0, counting: \.bytesDone) } }

    /// The ranges with what is on disk now (what a record may claim).
    private var flushedSegments: [SegmentState]? { segments.map { ranges($0, counting: \.flushedBytes) } }

    private func ranges(_ segments: [SegmentState], counting progress: KeyPath<any TaskRun, Int64>) -> [SegmentState] {
        segments.enumerated().map { index, segment in
            var range = segment
            // Only a range's own attempt counts (a single-stream probe may still be draining).
            if let attempt = live[index], attempt.bounded, let run = attempt.run { range.done = min(segment.end - segment.start, max(segment.done, run[keyPath: progress])) }
            return range
        }
    }

    func snapshot() -> TransferSnapshot {
        let done = currentBytes
        let expected = segments != nil ? validators.totalLength
            : live[0]?.run?.bytesExpected ?? bytesExpected ?? validators.totalLength
        let rate = state == .running ? rate.bytesPerSecond : nil
        let eta = state == .running ? expected.flatMap { self.rate.eta(remaining: max(0, $0 - done)) } : nil
        var snapshot = TransferSnapshot(
            id: id, spec: spec, state: state, bytesDone: done, bytesExpected: expected,
            fileName: fileName, savedPath: savedPath, bytesPerSecond: rate, eta: eta,
            retries: retries, maxRetries: policy.budget(retries: retries, dnsRetries: dnsRetries, afterDNS: lastFailureWasDNS), nextRetryAt: nextRetryAt, lastError: lastError,
            failure: lastFailure?.cause,
            attempts: attempts, validators: validators, lastStatus: lastStatus, response: response,
            rateHistory: rateHistory, segments: liveSegments)
        snapshot.rateLimit = rateLimit
        snapshot.batch = batch
        snapshot.resumable = resumable
        return snapshot
    }

    /// What the store keeps. A save leaves the item's rank as it is: a move writes ranks (saveRanks).
    func record() -> StoredTransfer {
        var stored = StoredTransfer(id: id, position: rank, spec: spec, state: state)
        stored.fileName = fileName
        stored.savedPath = savedPath
        stored.validators = validators
        stored.bytesDone = currentBytes
        stored.segments = flushedSegments
        stored.bytesExpected = live[0]?.run?.bytesExpected ?? bytesExpected
        stored.retries = retries
        stored.attempts = Array(attempts.suffix(20))
        stored.lastError = lastError
        stored.failure = lastFailure?.cause
        stored.rateLimit = rateLimit
        stored.batch = batch
        stored.response = response
        stored.resumable = resumable
        return stored
    }
}
