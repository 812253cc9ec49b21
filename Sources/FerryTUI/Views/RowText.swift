import FerryCore
import Foundation

/// The words a transfer's row and detail view show: percent, sizes, rate, ETA or state word.
enum RowText {
    /// Where an item comes from (or goes to), in a few words: the host and the last directory of the URL's path
    /// (`a.example/v2`), to tell items of the same name apart.
    static func origin(_ item: TransferSnapshot) -> String {
        let host = item.spec.url.host ?? "?"
        let directories = item.spec.url.path.split(separator: "/").dropLast()
        return directories.last.map { "\(host)/\($0)" } ?? host
    }

    /// A failed or cancelled upload: nothing of it is kept on the other side (a retry sends it all again), but
    /// for a resumable one the server still holds (its confirmed offset, where a retry goes on).
    static func keepsNothing(_ item: TransferSnapshot) -> Bool {
        item.spec.direction == .upload && (item.state == .failed || item.state == .cancelled) && item.resumable?.location == nil
    }

    /// The row's name: the item's, or a tree's with its files and its walk (`pub/ 120/2000 files, listing 40 dirs`).
    static func name(_ item: TransferSnapshot) -> String {
        guard let tree = item.tree else { return item.displayName }
        return "\(tree.name) \(tree.filesText)" + (tree.walk?.rowText.map { ", \($0)" } ?? "")
    }

    static func percent(_ item: TransferSnapshot) -> String {
        if item.state == .completed { return "100%" }
        if keepsNothing(item) { return "" }
        guard let progress = item.progress else { return "" }
        return "\(min(100, Int(progress * 100)))%"
    }

    /// `width`: the size column's (short units when the whole does not fit).
    static func size(_ item: TransferSnapshot, width: Int = .max) -> String {
        // One unit when both have it (the row's width goes to the name and the id).
        if let total = item.bytesExpected { return ByteFormat.progress(item.bytesDone, of: total, fitting: width) }
        return item.bytesDone > 0 || item.state == .running ? ByteFormat.bytes(item.bytesDone) : ""
    }

    static func rate(_ item: TransferSnapshot) -> String {
        guard item.state == .running, let rate = item.bytesPerSecond else { return "" }
        return ByteFormat.rate(rate)
    }

    /// ETA while running, else what the item is doing: "queued", "paused", "HTTP 503, in 8s" (why the last
    /// attempt failed and when the next begins; the row's glyph says it is a retry, the detail view its
    /// number), "HTTP 503, queued" (queued again after that failure), "refused" (why it failed),
    /// "done". The words of a failure come from its kind (TransferSnapshot.failureWords), never its message.
    static func status(_ item: TransferSnapshot, now: Date) -> String {
        // A tree's files have each their own failure and retry (its row opens to them).
        if item.tree != nil, item.state != .running { return item.state.label }
        switch item.state {
        case .running: return item.eta.map { ByteFormat.duration($0) } ?? "--"
        case .waiting:
            let wait = item.nextRetryAt.map { max(0, $0.timeIntervalSince(now)).rounded(.up) } ?? 0
            guard let words = item.failureWords else { return "retry \(item.retryCount) in \(ByteFormat.duration(wait))" }
            return "\(words), in \(ByteFormat.duration(wait))"
        case .failed: return item.failureWords ?? item.state.label
        case .queued where item.retries > 0:
            // Queued again after a failure (its retry came due while every slot was taken, or it was paused and
            // resumed): the failure it will retry, and that it waits for its turn.
            guard let words = item.failureWords else { return "retry \(item.retryCount), queued" }
            return "\(words), queued"
        case .queued, .paused, .completed, .cancelled: return item.state.label
        }
    }
}
