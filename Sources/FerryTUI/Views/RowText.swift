import FerryCore
import Foundation

/// The words a transfer's row and detail view show: percent, sizes, rate, ETA or state word.
enum RowText {
    static func percent(_ item: TransferSnapshot) -> String {
        if item.state == .completed { return "100%" }
        guard let progress = item.progress else { return "" }
        return "\(min(100, Int(progress * 100)))%"
    }

    static func size(_ item: TransferSnapshot) -> String {
        if let total = item.bytesExpected {
            return "\(ByteFormat.bytes(item.bytesDone))/\(ByteFormat.bytes(total))"
        }
        return item.bytesDone > 0 || item.state == .running ? ByteFormat.bytes(item.bytesDone) : ""
    }

    static func rate(_ item: TransferSnapshot) -> String {
        guard item.state == .running, let rate = item.bytesPerSecond else { return "" }
        return ByteFormat.rate(rate)
    }

    /// ETA while running, else what the item is doing: "queued", "paused", "retry 2/5 in 8s", "failed", "done".
    static func status(_ item: TransferSnapshot, now: Date) -> String {
        switch item.state {
        case .running: return item.eta.map { ByteFormat.duration($0) } ?? "--"
        case .waiting:
            let wait = item.nextRetryAt.map { max(0, $0.timeIntervalSince(now)).rounded(.up) } ?? 0
            return "retry \(item.retries)/\(item.maxRetries) in \(ByteFormat.duration(wait))"
        case .queued: return "queued"
        case .paused: return "paused"
        case .completed: return "done"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        }
    }
}
