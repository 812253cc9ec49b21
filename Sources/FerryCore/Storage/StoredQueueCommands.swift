import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// pause, resume, cancel, retry, remove and move on the stored queue, when no engine runs (the caller holds
/// the engine lock, so none starts halfway). The state rules are a running engine's own (Transfer).
public enum StoredQueueCommands {
    /// An unknown id is a UsageError naming it, and then nothing is changed.
    public static func apply(_ verb: ControlVerb, ids: [Int64], all: Bool, store: any QueueStore,
                             deletePart: Bool = false, move: QueueMove? = nil) throws {
        let items = try store.loadAll()
        let known = Dictionary(items.map { ($0.id.rawValue, $0) }, uniquingKeysWith: { a, _ in a })
        let unknown = ids.filter { known[$0] == nil }
        guard unknown.isEmpty else { throw UsageError("no item " + unknown.map { "#\($0)" }.joined(separator: ", ")) }
        let chosen = all ? items : ids.compactMap { known[$0] }
        if verb == .move, let move, let item = chosen.first {
            var order = items.map(\.id)
            let index = order.firstIndex(of: item.id)!
            order.remove(at: index)
            order.insert(item.id, at: move.target(from: index, among: order.count))
            try store.saveOrder(order)
            return
        }
        for item in chosen {
            if verb == .remove {
                try store.remove(item.id)
                if deletePart, item.state != .completed, let path = item.partPath { _ = unlink(path) }
                continue
            }
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
            guard changed != nil else { continue }
            var record = transfer.record()
            record.position = item.position
            try store.save(record)
        }
    }
}
