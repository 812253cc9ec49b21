import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Segmented downloads: after a probe shows a large file on a server that offers byte ranges with a
/// validator, the file is preallocated and fetched as N disjoint ranges at once, each written in place.
/// A failed range is retried alone; a range the server will not serve exactly (a 200, another size) turns
/// the download back into one stream from zero. The ranges' progress is stored, so pause and restart
/// fetch only what is missing.
extension TransferManager {
    /// Segments are never smaller than this.
    static let minimumSegment: Int64 = 1 << 20

    /// Bytes done: the ranges' or the single stream's, including what running attempts hold.
    static func currentBytes(_ item: Item) -> Int64 {
        guard let segments = item.segments else { return item.run?.bytesDone ?? item.bytesDone }
        return segments.enumerated().reduce(Int64(0)) { sum, pair in
            let (index, segment) = pair
            return sum + min(segment.end - segment.start, segment.done + (item.segmentRuns[index]?.bytesDone ?? 0))
        }
    }

    static func liveSegments(_ item: Item) -> [SegmentState]? {
        item.segments.map { segments in
            segments.enumerated().map { index, segment in
                var live = segment
                live.done = min(segment.end - segment.start, segment.done + (item.segmentRuns[index]?.bytesDone ?? 0))
                return live
            }
        }
    }

    /// The ranges for a file whose size is known, when the user asked for more than one and it is big enough.
    func segmentPlan(for item: Item) -> [SegmentState]? {
        guard let wanted = item.spec.segments, wanted > 1, !item.segmentFallback, item.segments == nil,
              let total = item.validators.totalLength else { return nil }
        let plan = SegmentState.plan(total: total, count: wanted, minimum: Self.minimumSegment)
        return plan.count > 1 ? plan : nil
    }

    /// After the probe: an empty `.part` file of the full size, every range still to fetch.
    func prepareSegments(_ item: Item) -> [Effect] {
        guard let name = item.fileName, let total = item.validators.totalLength else {
            item.segments = nil
            item.state = .queued
            return []
        }
        let path = PartialFile.path(directory: item.spec.directory, name: name)
        guard truncate(path, 0) == 0, truncate(path, off_t(total)) == 0 else {
            item.segments = nil
            return fail(item, "cannot prepare \(path): \(String(cString: strerror(errno)))")
        }
        item.segments = item.segments?.map { SegmentState(start: $0.start, end: $0.end) }
        item.state = .queued
        return []
    }

    /// Starts every unfinished range that has no attempt yet. A `.part` file that does not have the full
    /// size cannot hold what the stored ranges claim: start over as one stream.
    func launchSegments(_ item: Item) -> [Effect] {
        guard let segments = item.segments, let name = item.fileName, let total = item.validators.totalLength else {
            item.segments = nil
            return []
        }
        let path = PartialFile.path(directory: item.spec.directory, name: name)
        if item.restartFromZero {
            // After a checksum mismatch: every range again, into a fresh preallocated file.
            item.restartFromZero = false
            if truncate(path, 0) == 0, truncate(path, off_t(total)) == 0 {
                item.segments = segments.map { SegmentState(start: $0.start, end: $0.end) }
            }
        }
        var st = stat()
        if stat(path, &st) != 0 || Int64(st.st_size) != total {
            item.segments = nil
            item.segmentFallback = true
            item.restartFromZero = true
            item.state = .queued
            return []
        }
        item.attempts.append(Attempt(number: item.attempts.count + 1, startedAt: Date(), fromOffset: Self.currentBytes(item)))
        item.rate.reset()
        item.state = .running
        let current = item.segments ?? segments
        if current.allSatisfy(\.isComplete) { return finishSegments(item) }
        for index in current.indices where !current[index].isComplete && item.segmentRuns[index] == nil {
            startSegment(item, index)
        }
        return []
    }

    /// Makes the range's attempt; its task is made and started on the call queue (SessionTask).
    func startSegment(_ item: Item, _ index: Int) {
        guard let segment = item.segments?[index], let name = item.fileName, let total = item.validators.totalLength else { return }
        let id = item.id
        let generation = item.generation
        let token = (item.segmentTokens[index] ?? 0) + 1
        item.segmentTokens[index] = token
        let start = SegmentRun.Start(spec: item.spec, partPath: PartialFile.path(directory: item.spec.directory, name: name), index: index,
                                     from: segment.next, end: segment.end, total: total, validators: item.validators,
                                     bufferSize: configuration.writeBufferSize)
        let run = SegmentRun(start: start) { [weak self] outcome, flushed in
            self?.segmentFinished(id, generation: generation, index: index, token: token, outcome: outcome, flushed: flushed)
        }
        let request = run.makeRequest(userAgent: configuration.userAgent, timeout: configuration.idleTimeout,
                                      hostHeaders: configuration.hostHeaders)
        item.segmentRuns[index] = run
        let limits = limitMembership(item)
        item.segmentTasks[index] = SessionTask.make({ [session] in session.dataTask(with: request) }) { [delegate] task in
            delegate.register(run, for: task, limits: limits)
            task.resume()
        }
    }

    private func segmentFinished(_ id: TransferID, generation: Int, index: Int, token: Int,
                                 outcome: Result<Void, SegmentRun.Failure>?, flushed: Int64) {
        mutate { core in
            guard let item = core.items[id], item.generation == generation, item.segmentTokens[index] == token,
                  item.segmentRuns[index] != nil, var segments = item.segments else { return ((), []) }
            item.segmentRuns[index] = nil
            item.segmentTasks[index] = nil
            segments[index].done = min(segments[index].end - segments[index].start, segments[index].done + flushed)
            item.segments = segments
            var effects: [Effect] = []
            switch outcome {
            case nil:
                break  // stopped on purpose: settled below once every range has drained
            case .success:
                item.segmentRetries[index] = 0
                if segments.allSatisfy(\.isComplete), item.state == .running, item.stopIntent == nil {
                    effects += finishSegments(item)
                }
            case let .failure(.unusable(reason)):
                // The server will not serve this file in ranges (any more): one stream, from zero.
                item.lastError = reason
                item.segmentFallback = true
                item.restartFromZero = true
                if item.stopIntent == nil { item.stopIntent = .split }
                for task in item.allTasks { effects.append { task.cancel() } }
            case let .failure(.failed(failure, progressed)):
                if progressed { item.segmentRetries[index] = 0 }
                // While a pause, cancel or fallback drains the ranges, a failing one just stops.
                guard item.state == .running, item.stopIntent == nil else { break }
                let retries = item.segmentRetries[index] ?? 0
                switch configuration.retry.decide(failure, retries: retries) {
                case let .retry(after):
                    // Only this range waits and goes again; the others carry on.
                    item.segmentRetries[index] = retries + 1
                    item.lastError = failure.message
                    effects.append { [timerQueue] in
                        timerQueue.asyncAfter(deadline: .now() + after) { [weak self] in
                            self?.relaunchSegment(id, generation: generation, index: index)
                        }
                    }
                case .giveUp:
                    item.stopIntent = .cancel
                    item.state = .failed
                    item.lastError = failure.message
                    for task in item.allTasks { effects.append { task.cancel() } }
                }
            }
            if item.segmentRuns.isEmpty, let intent = item.stopIntent {
                settleSegments(item, intent)
            }
            core.items[id] = item
            core.touch(id)
            checkShutdown(&core)
            return ((), effects + pump(&core))
        }
    }

    /// Every range has stopped after a pause, cancel, shutdown, failure or fallback: the item's state follows.
    private func settleSegments(_ item: Item, _ intent: StopIntent) {
        item.stopIntent = nil
        if var attempt = item.attempts.popLast() {
            attempt.endedAt = Date()
            attempt.error = item.state == .failed ? item.lastError : "stopped"
            item.attempts.append(attempt)
        }
        switch intent {
        case .shutdown: item.state = .queued
        case .split:
            // Fallback to a single stream.
            item.segments = nil
            item.state = .queued
        case .pause, .cancel, .remove: break  // the command already set the state
        }
    }

    private func relaunchSegment(_ id: TransferID, generation: Int, index: Int) {
        mutate { core in
            guard let item = core.items[id], item.generation == generation, item.state == .running,
                  item.stopIntent == nil, item.segmentRuns[index] == nil,
                  let segment = item.segments?[index], !segment.isComplete else { return ((), []) }
            startSegment(item, index)
            core.items[id] = item
            return ((), pump(&core))
        }
    }

    /// All ranges are on disk: the same last steps as a single stream (size, checksum, fsync, rename).
    private func finishSegments(_ item: Item) -> [Effect] {
        guard let name = item.fileName, let total = item.validators.totalLength else { return [] }
        let path = PartialFile.path(directory: item.spec.directory, name: name)
        let file: PartialFile
        do throws(TransferFailure) {
            file = try PartialFile(openingOrCreating: path, bufferSize: 64 * 1024)
        } catch {
            return fail(item, error.message)
        }
        if var attempt = item.attempts.popLast() {
            attempt.endedAt = Date()
            item.attempts.append(attempt)
        }
        item.finishing = true
        let id = item.id
        let generation = item.generation
        let handover = FileHandover(file: file, fileName: name, total: total)
        return [{ [finishQueue] in finishQueue.async { self.finalize(id, generation, handover) } }]
    }
}
