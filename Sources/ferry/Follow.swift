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
    /// `tree`: a tree's batch the engine walks (`get -r`): its files are followed as the walk adds them, until the
    /// walk ended and they did; its report is said when the walk ends, and a directory not listed makes it 1.
    static func run(_ client: ControlClient, ids initial: Set<TransferID>, tree: Int64? = nil, directory: StateDirectory, since: Date,
                    saying: [String] = [], readout: Bool = false) async -> Int32 {
        let reporter = Reporter(since: since, live: readout ? LiveReadout() : nil)
        reporter.live?.expect(initial.count)
        let followed = Mutex(initial)
        /// The tree's walk as last seen, and whether its end was said.
        let walk = Mutex<(progress: WalkProgress?, said: Bool)>((nil, false))
        let seen = Mutex<[TransferID: Seen]>([:])
        let signals = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                let open = followed.withLock { $0 }.filter { id in seen.withLock { $0[id].map { !$0.state.isTerminal } ?? true } }.sorted()
                reporter.output.sync {}
                reporter.live?.finish(summary: false)
                printError(interrupted(open, tree: tree, directory: directory))
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
        ticker.setEventHandler {
            let ids = followed.withLock { $0 }
            reporter.progress(client.snapshot.items.filter { ids.contains($0.id) })
        }
        ticker.resume()
        defer { ticker.cancel() }
        do {
            // Only these items: the engine sends nothing about the rest of the queue.
            let view = tree.map { QueueView(batch: $0) } ?? QueueView(ids: initial.map(\.rawValue))
            try client.subscribe(view: view, onUpdate: { snapshot in
                var walkEnded = true
                if let tree {
                    // The batch's files as the walk adds them (the view is the batch: every item in it is the tree's).
                    let count = followed.withLock { ids in
                        ids.formUnion(snapshot.items.map(\.id))
                        return ids.count
                    }
                    reporter.live?.expect(count)
                    // A walk the engine no longer knows was removed with its batch: nothing more comes.
                    let progress = snapshot.walks.first { $0.batch == tree }
                    walkEnded = progress?.ended ?? true
                    let report = walk.withLock { walk -> [String]? in
                        walk.progress = progress
                        guard walkEnded, !walk.said, let progress else { return nil }
                        walk.said = true
                        return progress.report
                    }
                    if let report { reporter.output.async { printErrors(report) } }
                }
                let ids = followed.withLock { $0 }
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
                if open.isEmpty, walkEnded { finish(snapshot, nil) }
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
        let status = reporter.results(snapshot, ids: followed.withLock { $0 })
        let unlisted = walk.withLock { $0.progress.map { $0.failed > 0 } ?? false }
        return unlisted ? max(status, 1) : status
    }

    /// Pauses `open` in the engine (a connection of its own: the subscribed one only listens); what happened, in words.
    /// A tree's whole batch is paused, its walk with it.
    private static func interrupted(_ open: [TransferID], tree: Int64?, directory: StateDirectory) -> String {
        if let tree {
            guard let pauser = ControlClient.connect(directory) else {
                return "interrupted: the engine could not be reached; the tree may go on there (ferry pause --batch \(tree) stops it)"
            }
            defer { pauser.close() }
            do {
                _ = try QueueCommand.pause(Selection(batch: tree)).perform(on: .remote(pauser))
                return "interrupted: paused the tree (batch \(tree)) in the engine; the partial files stay, and the same command resumes it"
            } catch {
                return "interrupted: the tree could not be paused (\(error)); it goes on in the engine (ferry pause --batch \(tree) stops it)"
            }
        }
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
