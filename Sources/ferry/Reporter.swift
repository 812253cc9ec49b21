import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// What a headless ferry prints about its items, whether it runs them itself (HeadlessRun) or follows them
/// in another engine (Follow): a line per state change and per attempt, progress at most once a second on
/// stderr, the saved paths (or upload answers) on stdout at the end. Plain lines only: no escape sequences.
final class Reporter: Sendable {
    private let lastPrinted = Mutex<[TransferID: Int64]>([:])
    private let lastAttemptShown = Mutex<[TransferID: Int]>([:])
    /// The retry whose wait was said (a follower may see the item waiting twice in a row, for two retries).
    private let lastRetryShown = Mutex<[TransferID: Int]>([:])
    /// The attempt whose start over from zero was said (Attempt.restartWords(over:)).
    private let lastRestartShown = Mutex<[TransferID: Int]>([:])
    /// The items its engine ended (done, failed, cancelled) while it heard it: a run of the whole queue reports
    /// them though they ended before it first looked at what was left (HeadlessRun).
    private let endedItems = Mutex<Set<TransferID>>([])
    /// sftp and ftp uploads that went on from the server's copy: the attempt whose start (what the server had) was said.
    private let lastAppendShown = Mutex<[TransferID: Int]>([:])
    /// Resumable uploads: the resumptions and the start-over reason already said.
    private let lastResumableShown = Mutex<[TransferID: ResumableShown]>([:])
    let output = DispatchQueue(label: "ferry.output")
    /// State lines, in order on `output`; those that come while it writes go out in one write.
    private let lines: BatchedDelivery<String>
    /// Items of the state directory's queue are named with their ids; those of a private queue (an upload from
    /// standard input, run in this process) are not: their `#1` is not the queue's `#1`.
    private let showsIDs: Bool
    /// When the command asked for its items (a follower's): attempts begun since are its run's, and said even
    /// when its first look at an item comes after several of them; nil: only what is seen from the first look.
    private let since: Date?
    /// In a terminal: progress as a readout redrawn in place (get/put); nil: a line a second per item.
    let live: LiveReadout?
    /// How often `progress` is called: a readout twice a second (a slow SSH link carries that easily), lines
    /// once a second.
    var progressInterval: TimeInterval { live != nil ? 0.5 : 1 }

    init(showsIDs: Bool = true, since: Date? = nil, live: LiveReadout? = nil) {
        self.showsIDs = showsIDs
        self.since = since
        self.live = live
        self.lines = BatchedDelivery(queue: output) { printErrors($0) }
    }

    /// How a line names an item: `#3 name`, or the name alone for a private queue's item.
    private func label(_ id: TransferID, _ name: String) -> String {
        showsIDs ? "\(id) \(name)" : name
    }

    /// A line for the item's new state (once per attempt while it runs), and for a resumable upload a line
    /// when it goes on from the server's offset or starts over (with the reason). `before`: the state told
    /// before this change (the monitor's `before`; a follower's last seen): a state line is said once per change.
    func stateChanged(_ item: TransferSnapshot, before: TransferState?) {
        let name = label(item.id, TerminalSafe.sanitize(item.displayName))
        // The lock's closures take the id, not the whole snapshot.
        let id = item.id
        if let upload = item.resumable {
            let now = ResumableShown(upload)
            // What the item held when first seen is of an earlier run (a put asked again, `ferry run` after a
            // kill): said then, not now.
            if let before = lastResumableShown.withLock({ $0.updateValue(now, forKey: id) }) {
                if let reason = upload.restartReason, reason != before.restartReason {
                    lines.send(["\(name): starting over from zero: \(TerminalSafe.sanitize(reason))"])
                }
                if now.lastResumption != before.lastResumption, let offset = upload.resumptions.last?.offset {
                    lines.send([Self.serverHas(offset, name)])
                }
            }
        }
        // After the attempt's own line: what the server had of an sftp or ftp upload that goes on from its copy, once,
        // while it does (not an earlier run's, seen on a finished item asked for again).
        defer {
            if item.state == .running, let attempt = item.attempts.last, let had = attempt.serverHad,
               lastAppendShown.withLock({ $0.updateValue(attempt.number, forKey: id) }) != attempt.number {
                lines.send([had > 0 ? Self.serverHas(had, name) : "\(name): the server has none of it that matches this file; sending it whole"])
            }
        }
        // After the attempt's own line: a start over from zero, once (its progress goes back).
        defer {
            if item.state == .running, let attempt = item.attempts.last, let words = attempt.restartWords(over: TransferScheme(item.spec.url)),
               lastRestartShown.withLock({ $0.updateValue(attempt.number, forKey: id) }) != attempt.number {
                lines.send(["\(name): \(words) (attempt \(attempt.number))"])
            }
        }
        // The attempt's own line, once per attempt, in whatever state the item is seen next: a follower (Follow)
        // sees the engine's queue a few times a second, and attempts that began and failed between two looks
        // were not said (`retry 1/5`, then silence until `failed`): they are said from the item's list of
        // attempts, each with its retry. Not those of an earlier run (on first sight, only the last).
        let attemptSeen = item.state == .running || item.state == .waiting || (item.state.isTerminal && before != nil && before != item.state)
        if attemptSeen, let last = item.attempts.last {
            let firstOfRun = since.flatMap { since in item.attempts.first { $0.startedAt >= since }?.number } ?? last.number
            let from = lastAttemptShown.withLock { shown -> Int in
                defer { shown[id] = max(shown[id] ?? 0, last.number) }
                return shown[id].map { $0 + 1 } ?? firstOfRun
            }
            // The retries before the first look are not this run's either.
            let retriesFrom = lastRetryShown.withLock { shown -> Int in
                if shown[id] == nil { shown[id] = from - 1 }
                return shown[id]! + 1
            }
            for attempt in item.attempts where attempt.number >= min(from, retriesFrom) {
                if attempt.number < from {
                    // Said when it began; its retry was not.
                } else if attempt.number == last.number, item.resumable?.location != nil {
                    // The server's offset decides where it goes on (its own line follows), not the one last confirmed.
                    lines.send(["\(name): asking the server where the upload stands (attempt \(attempt.number))"])
                } else if attempt.number == last.number, item.spec.direction == .upload, attempt.fromOffset > 0,
                          TransferScheme(item.spec.url)?.appendsUploads == true {
                    // sftp, ftp: what the server has of the file decides (its own line follows), not what was sent.
                    lines.send(["\(name): asking the server how much of the file it has (attempt \(attempt.number))"])
                } else if live != nil, attempt.number == 1, (attempt.restartedFrom ?? attempt.fromOffset) == 0 {
                    // The readout shows it under way: a line for each start (thousands, with -i) says nothing more.
                } else {
                    let offset = attempt.restartedFrom ?? attempt.fromOffset
                    lines.send([offset > 0
                        ? "\(name): resuming at \(ByteFormat.bytes(offset)) (attempt \(attempt.number))"
                        : "\(name): \(item.spec.direction == .upload ? "uploading" : "downloading") (attempt \(attempt.number))"])
                }
                // One that failed between two looks and was retried: its retry, said after the fact.
                if attempt.number != last.number, attempt.number >= retriesFrom, let error = attempt.error, attempt.number <= item.retries {
                    lastRetryShown.withLock { $0[id] = attempt.number }
                    lines.send(["\(name): retry \(TransferSnapshot.retryWords(attempt.number, of: item.maxRetries)): \(TerminalSafe.sanitize(error))"])
                }
            }
        }
        let line: String
        switch item.state {
        case .running:
            return  // its attempt's line, above
        case .waiting:
            // Once per retry (a follower may see it waiting for two retries in a row).
            guard lastRetryShown.withLock({ $0.updateValue(item.retries, forKey: id) }) != item.retries || before != .waiting else { return }
            let wait = item.nextRetryAt.map { max(0, $0.timeIntervalSinceNow) } ?? 0
            lines.send(["\(name): retry \(item.retryCount) in \(ByteFormat.duration(wait.rounded(.up))): \(TerminalSafe.sanitize(item.lastError ?? ""))"])
            return
        case .completed where item.spec.direction == .upload:
            let status = item.response.map { " (HTTP \($0.status))" } ?? ""
            line = "\(name): done, \(ByteFormat.bytes(item.bytesDone)) sent\(status)"
        case .completed:
            line = "\(name): done, \(ByteFormat.bytes(item.bytesDone))"
        case .failed:
            // In a few words: the whole reason is said once, with the results (`failed: URL: reason`).
            line = "\(name): failed (\(item.failureWords ?? "unknown error"))"
        case .queued where live != nil:
            return  // the readout's totals count what is still to go
        case .queued, .paused, .cancelled:
            line = "\(name): \(item.state.rawValue)"
        }
        // One line per change.
        guard before != item.state else { return }
        if item.state.isTerminal { live?.ended(item) }
        lines.send([line])
    }

    /// An upload goes on from what the server holds (a resumable upload's offset, an sftp or ftp copy's size).
    private static func serverHas(_ offset: Int64, _ name: String) -> String {
        "\(name): the server has \(ByteFormat.bytes(offset)); sending the rest"
    }

    /// What was said of a resumable upload.
    struct ResumableShown: Equatable {
        var lastResumption: Date?
        var restartReason: String?
        init() {}
        init(_ upload: ResumableUpload) {
            lastResumption = upload.resumptions.last?.at
            restartReason = upload.restartReason
        }
    }

    /// Lines said of items found in the queue already, at most; past them one line counts the rest (a list of
    /// 100,000 URLs added again printed 100,000 lines).
    static let foundLinesShown = 20

    /// A line for each spec of the command that found its transfer in the queue already (nothing for new items),
    /// `foundLinesShown` at most, then how many more.
    func added(_ items: [AddedItem]) {
        var shown = 0
        var more: [AddedItem.How: Int] = [:]
        for item in items where item.how != .added || item.replaced != nil {
            guard shown < Self.foundLinesShown else {
                more[item.how, default: 0] += 1
                continue
            }
            shown += 1
            let name = "\(item.id) \(TerminalSafe.sanitize(item.name ?? ""))"
            let before = item.before?.rawValue ?? "queued"
            // The options it was asked with now and differ from the item's: it takes them.
            let takes = item.changed.map { "; it takes the options given now: " + $0.map(\.words).joined(separator: ", ") } ?? ""
            switch item.how {
            case .added:
                if let old = item.replaced { printError("\(item.id): a new copy in place of \(old) (--force: its partial file deleted)") }
            case .alreadyQueued: printError("\(name): already in the queue (\(before)); not added again\(takes)")
            case .resumed: printError("\(name): already in the queue (\(before)); resuming it\(takes)")
            case .alreadyDone:
                if let path = item.savedPath {
                    printError("already done: \(TerminalSafe.sanitize(path)) (\(item.id); --force fetches a new copy)")
                } else {
                    printError("\(name): already sent (--force sends it again)")
                }
            }
        }
        guard !more.isEmpty else { return }
        let counts = [(AddedItem.How.alreadyQueued, "already in the queue, not added again"), (.resumed, "resumed"),
                      (.alreadyDone, "already done"), (.added, "unfinished, replaced by new copies (--force)")]
            .compactMap { how, words in more[how].map { "\($0) \(words)" } }
        printError("and \(more.values.reduce(0, +)) more found in the queue: \(counts.joined(separator: ", ")) (ferry list shows them)")
    }

    /// Progress of the running items among `items` (call once a second, on the output queue; with a readout,
    /// as often as it is to be redrawn).
    func progress(_ items: [TransferSnapshot]) {
        if let live { return live.draw(items) }
        for item in items where item.state == .running {
            // The id and the count only into the closure, not the whole snapshot.
            let (id, done) = (item.id, item.bytesDone)
            let changed = lastPrinted.withLock { last -> Bool in
                last.updateValue(done, forKey: id) != done
            }
            guard changed else { continue }
            var line = label(item.id, TerminalSafe.sanitize(item.displayName)) + ": "
            if let progress = item.progress, let total = item.bytesExpected {
                line += "\(Int(progress * 100))% \(ByteFormat.bytes(item.bytesDone))/\(ByteFormat.bytes(total))"
            } else {
                line += ByteFormat.bytes(item.bytesDone)
            }
            if let rate = item.bytesPerSecond { line += " \(ByteFormat.rate(rate))" }
            if let eta = item.eta { line += " ETA \(ByteFormat.duration(eta))" }
            printError(line)
        }
    }

    /// The end: saved paths (or upload answers) on stdout, failures on stderr, in the order the items were added,
    /// read `resultsWindow` at a time by `snapshots` (the items of those ids). The exit status: 0 when every one of
    /// `ids` succeeded, 1 otherwise (an id no longer in the queue was removed: a failure).
    func results(ids: Set<TransferID>, snapshots: ([Int64]) -> [TransferSnapshot]) -> Int32 {
        live?.finish()
        var failed = 0
        var present = Set<TransferID>()
        let sorted = ids.map(\.rawValue).sorted()
        for start in stride(from: 0, to: sorted.count, by: Self.resultsWindow) {
            let items = snapshots(Array(sorted[start..<min(sorted.count, start + Self.resultsWindow)])).sorted { $0.id < $1.id }
            present.formUnion(items.map(\.id))
            failed += report(items, of: ids)
        }
        for id in ids.subtracting(present).sorted() {
            failed += 1
            printError("failed: \(id) was removed from the queue")
        }
        fflush(nil)
        if failed > 0 { printError("\(failed) of \(ids.count) transfers failed") }
        return failed > 0 ? 1 : 0
    }

    /// The results of items followed in an engine of their own (their snapshot in hand).
    func results(_ snapshot: QueueSnapshot, ids: Set<TransferID>) -> Int32 {
        let byID = Dictionary(snapshot.items.map { ($0.id.rawValue, $0) }) { first, _ in first }
        return results(ids: ids) { $0.compactMap { byID[$0] } }
    }

    /// Items read at a time for a run's results.
    static let resultsWindow = 1_000

    /// Each item's path, an upload's answer, or why it failed; the number that failed.
    private func report(_ items: [TransferSnapshot], of ids: Set<TransferID>) -> Int {
        var failed = 0
        for item in items where ids.contains(item.id) {
            if item.state == .completed, let path = item.savedPath {
                print(path)
            } else if item.state == .completed, item.spec.direction == .upload {
                writeResponseBody(item.response)
            } else {
                failed += 1
                let reason = item.lastError ?? item.state.rawValue
                printError("failed: \(TerminalSafe.redactedURL(item.spec.url)): \(TerminalSafe.sanitize(reason))")
            }
        }
        return failed
    }

    /// The server's answer to an upload, on stdout: raw when piped (so it can go on to jq), made
    /// terminal-safe when stdout is a terminal.
    private func writeResponseBody(_ response: ServerResponse?) {
        guard let response, !response.body.isEmpty else { return }
        if isatty(STDOUT_FILENO) != 0 {
            Output.out(Data(TerminalSafe.sanitize(bytes: response.body, allowNewlines: true).utf8))
        } else {
            Output.out(response.body)
        }
        if response.truncated {
            printError("the response body was cut at \(ByteFormat.bytes(Int64(response.body.count))) of \(ByteFormat.bytes(response.bodyLength))")
        }
    }
}

func printError(_ line: String) {
    printErrors([line])
}

/// Lines on stderr, each as `ferry: LINE`, in one write.
func printErrors(_ lines: [String]) {
    guard !lines.isEmpty else { return }
    Output.error(lines.map { "ferry: " + $0 + "\n" }.joined())
}

/// A headless run's reporter hears everything its engine tells: each item added, each change.
extension Reporter: TransferMonitor {
    var hearsAdds: Bool { true }
    func added(_ item: TransferSnapshot) { stateChanged(item, before: nil) }
    func transitioned(_ item: TransferSnapshot, from before: TransferState) {
        if item.state.isTerminal { endedItems.withLock { _ = $0.insert(item.id) } }
        stateChanged(item, before: before)
    }
    /// The items the engine ended while this reporter heard it (complete once the engine's events are drained).
    var ended: Set<TransferID> { endedItems.withLock { $0 } }
    func updated(_ item: TransferSnapshot) { stateChanged(item, before: item.state) }
}
