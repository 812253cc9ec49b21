import FerryCore
import Foundation
import Synchronization

/// `ferry get/put --no-tui` while an engine runs: the items are handed to it and followed through its
/// control socket, with the same lines and exit status as if this process ran them (Reporter).
enum Follow {
    private struct Seen: Equatable {
        var state: TransferState
        var attempts: Int
        var retries: Int
        var resumable: Reporter.ResumableShown?
    }

    /// Waits until every one of `ids` has ended (or left the queue); the exit status. Ctrl-C (or SIGTERM)
    /// pauses in the engine what this command started and not ended, and says so, as a headless run without an
    /// engine stops its own (it exited 130 and left them running in the engine, without a word); the same
    /// command resumes them.
    /// `saying`: lines said once Ctrl-C is taken care of.
    /// `since`: when the command asked for them (attempts begun since are its own, and all said).
    /// `readout`: progress as a readout redrawn in place in the terminal (LiveReadout), not lines.
    static func run(_ client: ControlClient, ids: Set<TransferID>, directory: StateDirectory, since: Date, saying: [String] = [],
                    readout: Bool = false) async -> Int32 {
        let reporter = Reporter(since: since, live: readout ? LiveReadout() : nil)
        reporter.live?.expect(ids.count)
        let seen = Mutex<[TransferID: Seen]>([:])
        let signals = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                let open = ids.filter { id in seen.withLock { $0[id].map { !$0.state.isTerminal } ?? true } }.sorted()
                reporter.output.sync {}
                reporter.live?.finish(summary: false)
                printError(interrupted(open, directory: directory))
                exit(128 + number)
            }
            source.resume()
            return source
        }
        defer {
            signals.forEach { $0.cancel() }
            for number in [SIGINT, SIGTERM] { signal(number, SIG_DFL) }
        }
        saying.forEach { printError($0) }
        // The end comes once, from the update that finishes the last item or from the connection closing;
        // whichever of it and the waiter below comes second resumes the waiter.
        let end = Mutex<(result: (snapshot: QueueSnapshot?, reason: String?)?, waiter: CheckedContinuation<Void, Never>?)>((nil, nil))
        let finish: @Sendable (QueueSnapshot?, String?) -> Void = { snapshot, reason in
            let waiter = end.withLock { state -> CheckedContinuation<Void, Never>? in
                guard state.result == nil else { return nil }
                state.result = (snapshot, reason)
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
        let ticker = DispatchSource.makeTimerSource(queue: reporter.output)
        ticker.schedule(deadline: .now() + reporter.progressInterval, repeating: reporter.progressInterval)
        ticker.setEventHandler { reporter.progress(client.snapshot.items.filter { ids.contains($0.id) }) }
        ticker.resume()
        defer { ticker.cancel() }
        do {
            // Only these items: the engine sends nothing about the rest of the queue.
            try client.subscribe(view: QueueView(ids: ids.map(\.rawValue)), onUpdate: { snapshot in
                var open = ids
                for item in snapshot.items where ids.contains(item.id) {
                    let now = Seen(state: item.state, attempts: item.attempts.count, retries: item.retries,
                                   resumable: item.resumable.map(Reporter.ResumableShown.init))
                    let was = seen.withLock { $0.updateValue(now, forKey: item.id) }
                    if was != now { reporter.stateChanged(item, before: was?.state) }
                    if item.state.isTerminal { open.remove(item.id) }
                }
                let present = Set(snapshot.items.map(\.id))
                open = open.intersection(present)
                if open.isEmpty { finish(snapshot, nil) }
            }, onClose: { reason in finish(nil, reason) })
        } catch {
            printError("cannot follow the items: \(error)")
            return 1
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = end.withLock { state -> Bool in
                if state.result != nil { return true }
                state.waiter = continuation
                return false
            }
            if ended { continuation.resume() }
        }
        let (snapshot, reason) = end.withLock { $0.result! }
        reporter.output.sync {}
        client.close()
        guard let snapshot else {
            printError("the engine went away before the transfers ended (\(reason ?? "closed")); `ferry list` shows where they stand")
            return 1
        }
        return reporter.results(snapshot, ids: ids)
    }

    /// Pauses `open` in the engine (a connection of its own: the subscribed one only listens); what happened, in words.
    private static func interrupted(_ open: [TransferID], directory: StateDirectory) -> String {
        guard !open.isEmpty else { return "interrupted" }
        let listed = TransferID.list(open)
        guard let pauser = ControlClient.connect(directory) else {
            return "interrupted: the engine could not be reached; \(listed) may go on there (ferry pause \(listed) stops them)"
        }
        defer { pauser.close() }
        do {
            _ = try QueueCommand.pause(Selection(ids: open.map(\.rawValue))).perform(on: .remote(pauser))
            return "interrupted: paused \(listed) in the engine; the partial files stay, and the same command resumes them"
        } catch {
            return "interrupted: \(listed) could not be paused (\(error)); they go on in the engine (ferry pause \(listed) stops them)"
        }
    }
}
