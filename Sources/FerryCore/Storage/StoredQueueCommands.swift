import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// pause, resume, cancel, retry, remove and move on the stored queue, when no engine runs (the caller holds
/// the engine lock, so none starts halfway). The state rules are a running engine's own (Transfer).
public enum StoredQueueCommands {
    /// An unknown id is a UsageError naming it, and then nothing is changed. What changed and what was left.
    public static func apply(_ verb: ControlVerb, _ selection: Selection, store: any QueueStore,
                             deletePart: Bool = false, move: QueueMove? = nil) throws -> CommandOutcome {
        let items = try store.loadAll()
        let known = Dictionary(items.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let chosen = try selection.choose(among: items.map { ($0.id, $0.state, $0.batch) }).get().compactMap { known[$0] }
        var outcome = CommandOutcome()
        if verb == .move, let move, let item = chosen.first {
            let index = items.firstIndex { $0.id == item.id }!
            let ranks = move.ranks(moving: index, count: items.count) { items[$0].position }
            try store.saveRanks(ranks.map { (items[$0.index].id, $0.rank) })
            if !ranks.isEmpty { outcome.changed = [item.id] }
            return outcome
        }
        for item in chosen {
            if verb == .remove {
                try store.remove(item.id)
                if deletePart, item.state != .completed, let path = item.partPath { _ = unlink(path) }
                outcome.changed.append(item.id)
                continue
            }
            var item = item
            let startsOver = item.startOverIfUnreadable() != nil
            let transfer = Transfer(stored: item, policy: RetryPolicy(), retryUploads: true)
            // A stored item runs nowhere: it was running when its engine died, and is queued again.
            transfer.state = item.state
            let changed: [Transfer.Effect]?
            switch verb {
            case .pause: changed = transfer.pause()
            case .resume: changed = transfer.resume()
            case .cancel: changed = transfer.cancel()
            case .retry: changed = transfer.retry()
            default: changed = nil
            }
            if changed == nil {
                outcome.left.append(.init(id: item.id, state: item.state))
            } else {
                outcome.changed.append(item.id)
            }
            guard changed != nil || startsOver else { continue }
            var record = transfer.record()
            record.position = item.position
            try store.save(record)
        }
        return outcome
    }
}
