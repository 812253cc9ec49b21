import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

/// A transfer's life driven alone: events in, effects out, no session, no server, no files.
@Suite struct TransferTests {
    static let url = URL(string: "http://example.test/file.bin")!

    func download(segments: Int? = nil, retries: Int = 5) -> Transfer {
        var spec = TransferSpec(download: Self.url, directory: "/nowhere")
        spec.segments = segments
        var policy = RetryPolicy()
        policy.maxRetries = retries
        return Transfer(id: TransferID(1), spec: spec, state: .queued, policy: policy, retryUploads: true)
    }

    /// A segmented download whose probe found 8 MiB in 4 ranges; the ranges are running.
    func runningRanges(retries: Int = 5) -> (Transfer, [Transfer.RangeAttempt]) {
        let transfer = download(segments: 4, retries: retries)
        let probe = ranges(transfer.start(partSize: nil))[0]
        let validators = Validators(etag: "\"v1\"", lastModified: nil, totalLength: 8 << 20)
        let split = transfer.accepted(serial: probe.serial, fileName: "file.bin", validators: validators, rangeable: true)
        #expect(stops(split) == [probe.serial])
        let prepared = transfer.ended(serial: probe.serial, AttemptReport(outcome: .stopped, fileName: "file.bin", validators: validators))
        #expect(prepared.flatMap(preallocations) == 8 << 20)
        #expect(transfer.state == .queued)
        let attempts = ranges(transfer.start(partSize: 8 << 20))
        #expect(attempts.map(\.index) == [0, 1, 2, 3])
        #expect(attempts.allSatisfy { $0.end != nil && $0.knownTotal == 8 << 20 })
        return (transfer, attempts)
    }

    func ranges(_ effects: [Transfer.Effect]?) -> [Transfer.RangeAttempt] {
        (effects ?? []).compactMap { if case let .startRange(attempt) = $0 { attempt } else { nil } }
    }

    func stops(_ effects: [Transfer.Effect]?) -> [Int] {
        (effects ?? []).flatMap { effect -> [Int] in if case let .stop(serials) = effect { serials } else { [] } }
    }

    func wakes(_ effects: [Transfer.Effect]?) -> [Int] {
        (effects ?? []).compactMap { if case let .wake(_, token) = $0 { token } else { nil } }
    }

    func preallocations(_ effects: [Transfer.Effect]) -> Int64? {
        effects.lazy.compactMap { if case let .preallocate(size) = $0 { size } else { nil } }.first
    }

    func finishes(_ effects: [Transfer.Effect]?) -> [Int] {
        (effects ?? []).compactMap { if case let .finish(_, token) = $0 { token } else { nil } }
    }

    /// What a single stream hands the finisher (a file that is never opened: the finisher is not run here).
    func handover(_ size: Int64) -> AttemptOutcome {
        .finished(FileHandover(file: PartialFile(path: "/nowhere/file.bin.part", fd: -1, bufferSize: 0), fileName: "file.bin", total: size))
    }

    let lostConnection = AttemptOutcome.failed(.transport(code: -1005, kind: .connectionLost, message: "connection lost"), progressed: false)

    /// A name that did not resolve has 2 retries, not 5: what the row and the detail view show says so
    /// ("retry 1/2"), and after any other failure the whole budget shows again.
    @Test func theRetriesShownAfterANameThatDidNotResolveAreItsOwnBudget() throws {
        let transfer = download()
        let dns = AttemptOutcome.failed(.transport(code: -1003, kind: .noSuchHost, message: "cannot find host"), progressed: false)
        var attempt = try #require(ranges(transfer.start(partSize: nil)).first)
        _ = transfer.ended(serial: attempt.serial, AttemptReport(outcome: dns))
        #expect(transfer.state == .waiting)
        #expect(transfer.snapshot().retries == 1 && transfer.snapshot().maxRetries == 2)
        _ = transfer.retryDue(token: transfer.generation)
        attempt = try #require(ranges(transfer.start(partSize: nil)).first)
        _ = transfer.ended(serial: attempt.serial, AttemptReport(outcome: lostConnection))
        #expect(transfer.snapshot().retries == 2 && transfer.snapshot().maxRetries == 5)
        _ = transfer.retryDue(token: transfer.generation)
        attempt = try #require(ranges(transfer.start(partSize: nil)).first)
        _ = transfer.ended(serial: attempt.serial, AttemptReport(outcome: dns))
        #expect(transfer.state == .waiting)
        #expect(transfer.snapshot().retries == 3 && transfer.snapshot().maxRetries == 3)  // the name's last one
        _ = transfer.retryDue(token: transfer.generation)
        attempt = try #require(ranges(transfer.start(partSize: nil)).first)
        _ = transfer.ended(serial: attempt.serial, AttemptReport(outcome: dns))
        #expect(transfer.state == .failed)
        #expect(transfer.snapshot().retries == 3 && transfer.snapshot().maxRetries == 3)
    }

    @Test func aPauseDuringTheRetryWaitHoldsUntilResumed() throws {
        let transfer = download()
        let attempt = try #require(ranges(transfer.start(partSize: nil)).first)
        let failed = transfer.ended(serial: attempt.serial, AttemptReport(outcome: lostConnection))
        let token = try #require(wakes(failed).first)
        #expect(transfer.state == .waiting && transfer.nextRetryAt != nil && transfer.retries == 1)

        #expect(transfer.pause() != nil)
        #expect(transfer.state == .paused && transfer.nextRetryAt == nil)
        // The timer of the wait fires anyway: it changes nothing.
        #expect(transfer.retryDue(token: token) == nil)
        #expect(transfer.state == .paused && !transfer.startable)

        #expect(transfer.resume() != nil)
        #expect(transfer.state == .queued && transfer.startable)
        let next = try #require(ranges(transfer.start(partSize: nil)).first)
        #expect(next.serial != attempt.serial && transfer.state == .running)
        // A timer of the earlier start still cannot move this one.
        #expect(transfer.retryDue(token: token) == nil && transfer.state == .running)
    }

    @Test func aCancelDuringTheFinishKeepsAFileThatChecksOut() throws {
        let transfer = download()
        let attempt = try #require(ranges(transfer.start(partSize: nil)).first)
        // The finisher gets the file; the attempt is over, nothing runs.
        let ended = transfer.ended(serial: attempt.serial, AttemptReport(outcome: handover(100), bytesDone: 100, fileName: "file.bin"))
        let token = try #require(finishes(ended).first)
        #expect(transfer.finishing && !transfer.busy && transfer.state == .running)
        #expect(!transfer.holdsSlot, "a file being synced and published leaves its connection slot to the next")

        #expect(stops(transfer.cancel()).isEmpty)
        #expect(transfer.state == .running, "a cancel does not tear a file out of the finisher's hands")
        #expect(transfer.finished(token: token, .success((name: "file.bin", size: 100))) != nil)
        #expect(transfer.state == .completed && transfer.savedPath == "/nowhere/file.bin" && !transfer.finishing)
    }

    @Test func aCancelDuringTheFinishWinsWhenTheFileFailsItsChecks() throws {
        let transfer = download()
        let attempt = try #require(ranges(transfer.start(partSize: nil)).first)
        let ended = transfer.ended(serial: attempt.serial, AttemptReport(outcome: handover(100), bytesDone: 100, fileName: "file.bin"))
        let token = try #require(finishes(ended).first)
        _ = transfer.cancel()
        let after = transfer.finished(token: token, .failure(.protocolViolation("received 90 of 100 bytes")))
        #expect(wakes(after).isEmpty, "no retry of a cancelled transfer")
        #expect(transfer.state == .cancelled && !transfer.finishing)
        #expect(transfer.lastError?.contains("received 90 of 100 bytes") == true)
    }

    @Test func aRangeFailsAndIsRetriedAlone() throws {
        let (transfer, attempts) = runningRanges()
        let failing = attempts[1]
        let effects = transfer.ended(serial: failing.serial, AttemptReport(outcome: lostConnection, bytesDone: 1000))
        #expect(stops(effects).isEmpty, "the other ranges carry on")
        let wake = try #require((effects ?? []).compactMap { effect -> (Int, Int)? in
            if case let .wakeRange(index, _, token) = effect { (index, token) } else { nil }
        }.first)
        #expect(wake.0 == 1)
        #expect(transfer.state == .running && transfer.busy && transfer.retries == 0)
        #expect(transfer.segments?[1].done == 1000)

        let again = ranges(transfer.rangeRetryDue(index: 1, token: wake.1))
        #expect(again.count == 1)
        #expect(again.first?.index == 1 && again.first?.from == failing.rangeStart + 1000 && again.first?.end == failing.end)
        // The others finish, then the retried one: the file goes to the finisher once.
        for attempt in [attempts[0], attempts[2], attempts[3]] {
            let length = attempt.end! - attempt.rangeStart
            #expect(finishes(transfer.ended(serial: attempt.serial, AttemptReport(outcome: .finished(nil), bytesDone: length))).isEmpty)
        }
        let last = try #require(again.first)
        let done = transfer.ended(serial: last.serial, AttemptReport(outcome: .finished(nil), bytesDone: last.end! - last.rangeStart))
        #expect(finishes(done).count == 1 && transfer.finishing)
    }

    @Test func aRangeThatKeepsFailingFailsTheTransfer() throws {
        let (transfer, attempts) = runningRanges(retries: 2)
        var serial = attempts[2].serial
        for retry in 0...2 {
            let effects = transfer.ended(serial: serial, AttemptReport(outcome: lostConnection))
            if retry == 2 {
                #expect(stops(effects) == [attempts[0], attempts[1], attempts[3]].map(\.serial))
                break
            }
            let token = try #require((effects ?? []).compactMap { if case let .wakeRange(_, _, token) = $0 { token } else { nil } }.first)
            serial = try #require(ranges(transfer.rangeRetryDue(index: 2, token: token)).first).serial
        }
        #expect(transfer.state == .failed)
        for attempt in [attempts[0], attempts[1], attempts[3]] { _ = transfer.ended(serial: attempt.serial, AttemptReport(outcome: .stopped)) }
        #expect(!transfer.busy && transfer.settled)
    }

    @Test func aWholeFileAnswerToARangeTurnsTheDownloadIntoOneStreamFromZero() throws {
        let (transfer, attempts) = runningRanges()
        // What RangeRun makes of a 200 to `Range: bytes=N-M` (ResumeRuleTests: a bounded range cannot start over).
        let unusable = AttemptOutcome.unusable("the server ignored the range or the file changed")
        let effects = transfer.ended(serial: attempts[2].serial, AttemptReport(outcome: unusable))
        #expect(stops(effects) == [attempts[0], attempts[1], attempts[3]].map(\.serial))
        #expect(transfer.state == .running && transfer.busy)
        for attempt in [attempts[0], attempts[1], attempts[3]] {
            _ = transfer.ended(serial: attempt.serial, AttemptReport(outcome: .stopped, bytesDone: 4096))
        }
        #expect(transfer.state == .queued && transfer.segments == nil && !transfer.busy)
        #expect(transfer.lastError == "the server ignored the range or the file changed")

        // Next start: the preallocated file is emptied and one open-ended range asks for the whole file.
        let restart = transfer.start(partSize: 8 << 20)
        #expect(restart.first.map { if case .truncatePart = $0 { true } else { false } } == true)
        let stream = try #require(ranges(restart).first)
        #expect(stream.from == 0 && stream.end == nil && stream.knownTotal == nil)
        // And it stays one stream: the server cannot be trusted with ranges for this file.
        let again = transfer.accepted(serial: stream.serial, fileName: "file.bin",
                                      validators: Validators(etag: "\"v1\"", lastModified: nil, totalLength: 8 << 20), rangeable: true)
        #expect(stops(again).isEmpty && transfer.segments == nil)
    }

    @Test func aPauseBeforeTheSplitKeepsTheStreamsBytes() throws {
        let transfer = download(segments: 4)
        let probe = try #require(ranges(transfer.start(partSize: nil)).first)
        let validators = Validators(etag: "\"v1\"", lastModified: nil, totalLength: 8 << 20)
        #expect(stops(transfer.accepted(serial: probe.serial, fileName: "file.bin", validators: validators, rangeable: true)) == [probe.serial])
        // The user pauses while the probe is being stopped for the split: the pause wins.
        _ = transfer.pause()
        let ended = transfer.ended(serial: probe.serial, AttemptReport(outcome: .stopped, bytesDone: 300_000, fileName: "file.bin",
                                                                       validators: validators))
        #expect(ended.map { $0.isEmpty } == true, "no preallocation: the probe's bytes are kept")
        #expect(transfer.state == .paused && transfer.segments == nil)
        _ = transfer.resume()
        let next = try #require(ranges(transfer.start(partSize: 300_000)).first)
        #expect(next.from == 300_000 && next.end == nil && next.knownTotal == 8 << 20)
    }

    @Test func aReportOfAnAttemptThatIsNoLongerLiveChangesNothing() throws {
        let transfer = download()
        let attempt = try #require(ranges(transfer.start(partSize: nil)).first)
        _ = transfer.ended(serial: attempt.serial, AttemptReport(outcome: lostConnection))
        #expect(transfer.ended(serial: attempt.serial, AttemptReport(outcome: .finished(nil))) == nil)
        #expect(transfer.state == .waiting)
    }
}
