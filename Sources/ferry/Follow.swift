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
    }

    /// Waits until every one of `ids` has ended (or left the queue); the exit status.
    static func run(_ client: ControlClient, ids: Set<TransferID>) async -> Int32 {
        let reporter = Reporter()
        let seen = Mutex<[TransferID: Seen]>([:])
        let ended = Mutex<CheckedContinuation<QueueSnapshot?, Never>?>(nil)
        let outcome = Mutex<(snapshot: QueueSnapshot?, reason: String?)?>(nil)
        let finish: @Sendable (QueueSnapshot?, String?) -> Void = { snapshot, reason in
            let continuation = ended.withLock { slot -> CheckedContinuation<QueueSnapshot?, Never>? in
                guard outcome.withLock({ $0 == nil }) else { return nil }
                outcome.withLock { $0 = (snapshot, reason) }
                defer { slot = nil }
                return slot
            }
            continuation?.resume(returning: snapshot)
        }
        let ticker = DispatchSource.makeTimerSource(queue: reporter.output)
        ticker.schedule(deadline: .now() + 1, repeating: 1)
        ticker.setEventHandler { reporter.progress(client.snapshot.items.filter { ids.contains($0.id) }) }
        ticker.resume()
        defer { ticker.cancel() }
        do {
            try client.subscribe(onUpdate: { snapshot in
                var open = ids
                for item in snapshot.items where ids.contains(item.id) {
                    let now = Seen(state: item.state, attempts: item.attempts.count, retries: item.retries)
                    if seen.withLock({ $0.updateValue(now, forKey: item.id) }) != now { reporter.stateChanged(item) }
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
        let snapshot = await withCheckedContinuation { (continuation: CheckedContinuation<QueueSnapshot?, Never>) in
            let done = ended.withLock { slot -> QueueSnapshot?? in
                if let result = outcome.withLock({ $0 }) { return .some(result.snapshot) }
                slot = continuation
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
        reporter.output.sync {}
        client.close()
        guard let snapshot else {
            printError("the engine went away before the transfers ended (\(outcome.withLock { $0?.reason } ?? "closed")); `ferry list` shows where they stand")
            return 1
        }
        return reporter.results(snapshot, ids: ids)
    }
}
