import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// One queue item's life: its state, its attempts, retries, pause and resume, and its last steps.
/// Events in (commands, attempt reports, timers, the finisher's result), effects out (start an attempt, stop
/// some, wake me later, finish the file). It does no I/O and never sees URLSession, so a test drives it alone
/// (TransferTests). TransferManager keeps what is shared (session, scheduler, store, snapshots), owns every
/// Transfer under its lock, and carries out the effects (TransferManager+Effects).
///
/// A download is one or more byte ranges: a single stream is the open-ended range from what the `.part`
/// file holds; a segmented download is N bounded ranges of a preallocated file, each with attempts and
/// retries of its own. Every attempt is a RangeRun and ends in an AttemptReport; uploads have their own
/// run (UploadRun) and the same report.
final class Transfer {
    /// What the manager does for a transfer. Effects are carried out in order; a file effect that fails ends
    /// the batch and the transfer hears why (`fileProblem`).
    enum Effect: Sendable {
        /// Start an attempt at a download range.
        case startRange(RangeAttempt)
        case startUpload(serial: Int)
        /// Cancel these attempts' tasks; each reports `.stopped` (or whatever it had come to) back.
        case stop([Int])
        /// Empty the `.part` file: the next attempt starts from zero.
        case truncatePart
        /// An empty `.part` file of this size for the ranges to write into.
        case preallocate(Int64)
        /// Call `retryDue(token)` after the delay.
        case wake(after: TimeInterval, token: Int)
        /// Call `rangeRetryDue(index:token:)` after the delay.
        case wakeRange(index: Int, after: TimeInterval, token: Int)
        /// Check and publish the file (size, checksum, fsync, rename), then call `finished(token:_:)`. Without a
        /// handover the file is the ranges' preallocated `.part` file.
        case finish(FileHandover?, token: Int)
        /// End a resumable upload's copy on the server (the item was cancelled); nothing waits for the answer.
        case discardUpload(ResumableUpload)
    }

    /// One attempt at one range: `from..<end` of the file (`end` nil: to its end).
    struct RangeAttempt: Sendable, Equatable {
        var serial: Int
        var index: Int
        var rangeStart: Int64
        var from: Int64
        var end: Int64?
        var knownTotal: Int64?
    }

    /// Why the transfer stopped its own attempts. `restart`: to go on at once as a new attempt (asked again with
    /// other options, or renamed), in the slot it holds (TransferManager.restartInPlace).
    enum StopIntent: Sendable { case pause, cancel, shutdown, split, restart }

    /// An attempt in flight. The manager attaches its run (progress for snapshots) and its task (to cancel).
    struct Live {
        let serial: Int
        /// One range of a segmented download, not the single stream or an upload.
        let bounded: Bool
        var run: (any TaskRun)?
        var task: SessionTask?
    }

    let id: TransferID
    /// What was asked (a re-asked item takes the options given again: retake).
    private(set) var spec: TransferSpec
    /// `spec.host`, computed once (parsing a URL on every scheduling pass was a hot spot).
    let host: String
    let policy: RetryPolicy
    let retryUploads: Bool
    /// What the time is (when an attempt begins and ends, when a retry is due).
    let clock: any EngineClock
    var state: TransferState

    var fileName: String?
    /// A name asked for while an attempt was in flight (QueueCommand.rename): the engine moves the file to it
    /// once nothing is (TransferManager.renameWhenStopped), and the item goes on under it.
    var pendingName: String?
    var savedPath: String?
    var validators = Validators()
    var bytesDone: Int64 = 0
    /// Size of the body being transferred, once known (uploads: the body's length).
    var bytesExpected: Int64?
    var highWater: Int64 = 0
    var retries = 0
    var dnsRetries = 0
    /// When the run of failures under way began (RetryPolicy.patience); nil after progress or a fresh start.
    var failingSince: Date?
    /// The last failure was a name that did not resolve: the retries shown are out of its smaller budget.
    var lastFailureWasDNS = false
    var attempts: [Attempt] = []
    /// The state the engine last told its monitor (TransferMonitor.transitioned's `before`): as loaded, then each one told.
    var toldState: TransferState
    /// The last failure (kept while the item retries or has failed); nil once it moves on.
    var lastFailure: ItemFailure?
    var lastError: String? { lastFailure?.message }
    var lastStatus: Int?
    var nextRetryAt: Date?
    var response: ServerResponse?
    /// A resumable upload's place on the server (kept with the item; written at once when it changes).
    var resumable: ResumableUpload?
    /// The item's own bandwidth limit (bytes per second), saved with it.
    var rateLimit: Int64?
    /// The batch (the command) that last asked for this item.
    var batch: Int64?
    /// Its rank in the queue's order (StoredTransfer.position).
    var rank = 0
    /// Segmented downloads: the ranges (their `done` is on disk).
    var segments: [SegmentState]?
    /// The server cannot serve this file in ranges: one stream from now on.
    var segmentFallback = false
    /// The next start empties the `.part` file first (after a checksum mismatch or a fallback).
    var restartFromZero = false
    private(set) var finishing = false
    /// A cancel that came while the file was being finished: it wins if the finish fails.
    private(set) var cancelAfterFinish = false
    var stopIntent: StopIntent?
    /// Stopped to go on at once (StopIntent.restart): queued, and started again before the scheduler sees its
    /// slot free.
    var restartsInPlace = false
    /// Attempts in flight by range index (0: a single stream or an upload).
    var live: [Int: Live] = [:]
    var rangeRetries: [Int: Int] = [:]
    /// Counts starts: timers and the finisher carry it, so one from an earlier start is ignored.
    private(set) var generation = 0
    private var nextSerial = 0

    // Kept for snapshots by the manager's sampler.
    var rate = RateEstimator()
    /// The smoothed rate once a second, oldest first, at most a minute of it.
    var rateHistory: [Double] = []
    var lastHistorySample: TimeInterval = 0
    /// Of its bytes, those counted in the engine's total of bytes moved (Core.moved).
    var countedBytes: Int64 = 0

    init(id: TransferID, spec: TransferSpec, state: TransferState, policy: RetryPolicy, retryUploads: Bool,
         clock: any EngineClock = SystemClock.shared) {
        self.id = id
        self.clock = clock
        self.spec = spec
        self.host = spec.host
        self.state = state
        self.toldState = state
        self.policy = policy
        self.retryUploads = retryUploads
    }

    /// An attempt (or a range's) is in flight or draining.
    var busy: Bool { !live.isEmpty }
    /// Holds a connection slot: an attempt runs or is about to. A finishing item (its body in, its file being
    /// synced and published) holds none: files wait for their sync together (FileFinisher.publish), and a slot
    /// held through it kept the next file from starting (a tree of 2,000 small files, 8 at a time, waited for
    /// each group's sync 250 times over).
    var holdsSlot: Bool { (state == .running && !finishing) || busy }
    /// Neither holds a slot nor waits for one, and will not until a command changes its state.
    var settled: Bool { state.isTerminal && !busy && !finishing }
    /// Nothing in flight, no timer and no finish pending: the item may go back to the store (a queued one is
    /// loaded again when the scheduler starts it).
    /// (Not while its next start must do something that only memory knows: start over from zero, or keep to
    /// one stream.)
    var idle: Bool {
        !busy && !finishing && !restartFromZero && !segmentFallback && (state.isTerminal || state == .paused || state == .queued)
    }

    /// A transfer loaded again after it left memory: its starts are counted above every earlier one's, so a
    /// timer of its earlier life (a retry's) finds a newer generation and does nothing.
    func countGenerations(after floor: Int) { generation = max(generation, floor) }
    /// Ready for the scheduler to start.
    var startable: Bool { state == .queued && !busy && !finishing }
    /// Every task of the attempts in flight.
    var tasks: [SessionTask] { live.values.compactMap(\.task) }
    /// What an upload had sent when its last attempt ended (or the store last recorded).
    var sentBefore: Int64 { max(bytesDone, highWater) }
    /// An sftp or ftp upload that sent bytes before goes on from the server's copy, once it checks out
    /// (RemoteAppendRun); a first attempt writes the file whole.
    var appendsToServersCopy: Bool { TransferScheme(spec.url)?.appendsUploads == true && sentBefore > 0 }
    var runs: [any TaskRun] { live.values.compactMap(\.run) }

    func attach(serial: Int, run: any TaskRun, task: SessionTask?) {
        guard let index = live.first(where: { $0.value.serial == serial })?.key else { return }
        live[index]?.run = run
        live[index]?.task = task
    }

    func tasks(of serials: [Int]) -> [SessionTask] {
        live.values.filter { serials.contains($0.serial) }.compactMap(\.task)
    }

    /// Stops every attempt in flight.
    var stopEveryAttempt: [Effect] { live.isEmpty ? [] : [.stop(live.values.map(\.serial).sorted())] }

    // MARK: Commands. Each returns nil when it does not apply (nothing changed): the states each applies to are
    // StateChange's, the one copy of that rule.

    /// Stops a running or waiting transfer; its `.part` file and validators stay. (Not while its file is being
    /// finished: that ends in a moment.)
    func pause() -> [Effect]? {
        guard StateChange.pause.applies(to: state), !(state == .running && finishing) else { return nil }
        if state == .running {
            stopIntent = .pause
            state = .paused
            return stopEveryAttempt
        }
        nextRetryAt = nil
        state = .paused
        return []
    }

    func resume() -> [Effect]? {
        guard StateChange.resume.applies(to: state) else { return nil }
        state = .queued
        return []
    }

    /// Stops the transfer and any pending retry at once. The `.part` file stays for `retry`. While the file
    /// is being finished the cancel waits: a finished file is kept, one that fails its checks is cancelled.
    func cancel() -> [Effect]? {
        guard StateChange.cancel.applies(to: state) else { return nil }
        if finishing {
            cancelAfterFinish = true
            return []
        }
        nextRetryAt = nil
        if busy { stopIntent = .cancel }
        state = .cancelled
        lastFailure = .cancelled()
        // The server's copy of a resumable upload goes too (a retry starts over).
        var discard: [Effect] = []
        if let upload = resumable, upload.location != nil {
            discard = [.discardUpload(upload)]
            resumable = nil
        }
        return stopEveryAttempt + discard
    }

    /// A failed or cancelled transfer goes back in the queue with a fresh retry budget.
    func retry() -> [Effect]? {
        guard StateChange.retry.applies(to: state) else { return nil }
        state = .queued
        retries = 0
        dnsRetries = 0
        failingSince = nil
        lastFailureWasDNS = false
        rangeRetries = [:]
        cancelAfterFinish = false
        lastFailure = nil
        return []
    }

    /// The same transfer asked for again with other options (`new`: TransferSpec.optionChanges): they hold from
    /// now on, the limit at once, a checksum at the finish. A running attempt whose requests they alter goes
    /// on as a new attempt from where it is (stopped as a shutdown stops it: queued again, not paused); a
    /// resumable upload asked with another protocol starts over, its copy on the server ended.
    func retake(_ new: TransferSpec) -> [Effect] {
        let old = spec
        spec = new
        if new.rateLimit != old.rateLimit { rateLimit = new.rateLimit }
        var effects: [Effect] = []
        let restarts = state == .running && busy && !finishing && stopIntent == nil && new.changesRequests(from: old)
        if restarts {
            stopIntent = .restart
            effects += stopEveryAttempt
        }
        if new.upload?.resumable != old.upload?.resumable, let upload = resumable {
            if upload.location != nil { effects.append(.discardUpload(upload)) }
            resumable = nil
        }
        return effects
    }

    /// A rename asked while it runs: the attempt stops to go on at once (a stop under way already ends it), so
    /// that its file can move (pendingName). aria2 restarts an active download to rename it.
    func stopForRename() -> [Effect] {
        guard state == .running, busy, !finishing, stopIntent == nil else { return [] }
        stopIntent = .restart
        return stopEveryAttempt
    }

    /// The engine stops: attempts stop and the transfer stays queued for the next start.
    func shutdown() -> [Effect] {
        if state == .waiting {
            state = .queued
            nextRetryAt = nil
        }
        guard busy, !finishing else { return [] }
        stopIntent = .shutdown
        return stopEveryAttempt
    }

    // MARK: Starting

    /// The scheduler gave the transfer a slot. `partSize`: the length of its `.part` file, if there is one.
    func start(partSize: Int64?) -> [Effect] {
        generation += 1
        stopIntent = nil
        restartsInPlace = false
        nextRetryAt = nil
        if spec.direction == .upload {
            // A resumable upload the server holds goes on from the offset it last confirmed (asked again first); an
            // sftp or ftp upload that sent bytes before, from what the server has (RemoteAppendRun asks, then checks).
            if appendsToServersCopy {
                begin(from: sentBefore)
            } else {
                begin(from: resumable?.location != nil ? resumable?.confirmedOffset ?? 0 : 0)
            }
            return [.startUpload(serial: open(index: 0, bounded: false))]
        }
        if segments != nil, let effects = startRanges(partSize: partSize) { return effects }
        var effects: [Effect] = []
        var offset = fileName == nil ? 0 : partSize ?? 0
        // Resume only what can be checked: the `.part` file must fit the size the server gave, and that size
        // must be known (a 206 is then accepted only with the same total). Otherwise start over.
        let total = validators.totalLength
        if restartFromZero || (offset > 0 && (total.map { offset > $0 } ?? true)) {
            if fileName != nil { effects.append(.truncatePart) }
            offset = 0
        }
        restartFromZero = false
        begin(from: offset)
        let serial = open(index: 0, bounded: false)
        effects.append(.startRange(RangeAttempt(serial: serial, index: 0, rangeStart: 0, from: offset, end: nil,
                                                knownTotal: offset > 0 ? total : nil)))
        return effects
    }

    /// Starts every unfinished range; nil when the ranges cannot go on (the caller starts one stream instead).
    private func startRanges(partSize: Int64?) -> [Effect]? {
        guard let ranges = segments, fileName != nil, let total = validators.totalLength else {
            segments = nil
            return nil
        }
        var effects: [Effect] = []
        var size = partSize
        if restartFromZero {
            // After a checksum mismatch: every range again, into a fresh preallocated file.
            restartFromZero = false
            segments = ranges.map { SegmentState(start: $0.start, end: $0.end) }
            effects.append(.preallocate(total))
            size = total
        }
        // A `.part` file without the full size cannot hold what the stored ranges claim: one stream from zero.
        guard size == total else {
            segments = nil
            segmentFallback = true
            restartFromZero = true
            return nil
        }
        begin(from: currentBytes)
        if segments?.allSatisfy(\.isComplete) ?? true { return effects + finishRanges() }
        for index in segments!.indices where !segments![index].isComplete && live[index] == nil {
            effects.append(startRange(index))
        }
        return effects
    }

    /// The attempt record and the running state for a start from `offset`.
    private func begin(from offset: Int64) {
        attempts.append(Attempt(number: attempts.count + 1, startedAt: clock.now, fromOffset: offset))
        if segments == nil { bytesDone = offset }
        rate.reset()
        state = .running
    }

    /// A new attempt in flight at `index`; its serial.
    func open(index: Int, bounded: Bool) -> Int {
        nextSerial += 1
        live[index] = Live(serial: nextSerial, bounded: bounded)
        return nextSerial
    }

    /// Ends the attempt `serial`; its range index and whether it was a bounded range, or nil if it is not live.
    func close(serial: Int) -> (index: Int, bounded: Bool)? {
        guard let (index, attempt) = live.first(where: { $0.value.serial == serial }) else { return nil }
        live[index] = nil
        return (index, attempt.bounded)
    }

    func startRange(_ index: Int) -> Effect {
        let range = segments![index]
        let serial = open(index: index, bounded: true)
        return .startRange(RangeAttempt(serial: serial, index: index, rangeStart: range.start, from: range.next,
                                        end: range.end, knownTotal: validators.totalLength))
    }

    /// The last steps start: no attempt runs, the finisher checks and publishes the file.
    func beginFinishing(_ handover: FileHandover?) -> [Effect] {
        finishing = true
        state = .running
        return [.finish(handover, token: generation)]
    }

    func endFinishing() { finishing = false }
}
