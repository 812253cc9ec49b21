import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// QueueCommand on the stored queue, when no engine runs (the caller holds the engine lock, so none starts
/// halfway). The state rules are a running engine's own (Transfer).
public enum StoredQueueCommands {
    /// An unknown id is a UsageError naming it, and then nothing is changed. What changed and what was left.
    /// Commands that only an engine can carry out (an add, transfers at once, the global limits) are a
    /// UsageError saying so.
    public static func perform(_ command: QueueCommand, store: any QueueStore) throws -> CommandResult {
        var result = CommandResult()
        // No engine runs them: a row left running or waiting by one that stopped is queued, to every verb as
        // to `ferry list` (`resume 1` said "#1 is running, left as it is" of an item nothing ran).
        let items = try store.loadAll().map { item in
            var item = item
            item.state = item.state.atRest
            return item
        }
        let known = Dictionary(items.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let chosen: [StoredTransfer] = try command.selection.map { selection in
            let text = QueueView(filter: selection.filter).matcher
            return try selection.choose(among: items.map { ($0.id, $0.state, $0.batch) }, text: { id in
                known[id].map { text.matches(id: id, state: $0.state, batch: $0.batch, spec: $0.spec, fileName: $0.fileName) } ?? false
            }).get().compactMap { known[$0] }
        } ?? []
        switch command {
        case .add, .walk, .place, .setConcurrency, .setGlobalLimits, .rename:
            throw UsageError("no engine is running; \(command.name) needs one (ferry starts one: `ferry`, or `ferry get --detach`)")
        case let .move(_, direction):
            var queue = items
            let wanted = Set(chosen.map(\.id))
            let (ranked, _) = direction.apply(to: &queue, rank: \.position) { wanted.contains($0.id) }
            try store.saveRanks(ranked.map { ($0.id, $0.position) })
            let rerankedIDs = Set(ranked.map(\.id))
            result.outcome.changed = chosen.map(\.id).filter(rerankedIDs.contains)
        case let .remove(selection, deletePart):
            var leftovers: [Leftover] = []
            for item in chosen {
                try store.remove(item.id)
                if deletePart, item.state != .completed, let path = item.partPath { _ = unlink(path) }
                // A `.part` file kept: the same transfer asked again goes on from it, as with an engine.
                if !deletePart, let leftover = Leftover(keptBy: item) { leftovers.append(leftover) }
                result.outcome.changed.append(item.id)
            }
            try store.keepLeftovers(leftovers)
            // A batch removed as a whole takes its limit with it, as with an engine.
            if let batch = selection.wholeBatch { try store.saveBatchLimit(batch, nil) }
        case let .setRateLimit(selection, rate):
            if let batch = selection.wholeBatch {
                // A batch named as a whole: its own limit, as with an engine (TransferManager.setBatchLimit).
                guard try store.saveBatchLimit(batch, rate.flatMap { $0 > 0 ? $0 : nil }) else { throw UsageError("no batch \(batch)") }
                result.outcome.changed = chosen.map(\.id)
                break
            }
            for item in chosen {
                var item = item
                item.rateLimit = rate.flatMap { $0 > 0 ? $0 : nil }
                try store.save(item)
                result.outcome.changed.append(item.id)
            }
        case .pause, .resume, .cancel, .retry:
            for item in chosen {
                var item = item
                let startsOver = item.startOverIfUnreadable() != nil
                let transfer = Transfer(stored: item, policy: RetryPolicy(), retryUploads: true)
                let changed: [Transfer.Effect]?
                switch command {
                case .pause: changed = transfer.pause()
                case .resume: changed = transfer.resume()
                case .cancel: changed = transfer.cancel()
                default: changed = transfer.retry()
                }
                if changed == nil {
                    result.outcome.left.append(.init(id: item.id, state: item.state))
                } else {
                    result.outcome.changed.append(item.id)
                }
                guard changed != nil || startsOver else { continue }
                try store.save(transfer.record())
            }
        }
        // A tree's walk follows its batch as an engine's does (TreeWalker.steerWalks): the next engine finds it held,
        // going on, or gone.
        if let batch = command.selection?.batch {
            switch command {
            case .pause, .cancel: try store.setWalkHeld(batch: batch, true)
            case .resume: try store.setWalkHeld(batch: batch, false)
            case .retry:
                _ = try store.retryWalk(batch: batch)
                try store.setWalkHeld(batch: batch, false)
            case .remove: try store.removeWalk(batch: batch)
            default: break
            }
        }
        return result
    }
}
