import FerryModel
import Foundation

/// What `ferry get`/`put` show in a terminal while their items move (aria2c's and curl's readout, not the
/// full-screen UI): a line per item under way, redrawn in place, a line of totals, and a summary at the end.
/// Plain text, one terminal line each (cut to the width, never wrapped: the redraw counts lines); the writer
/// that moves the cursor is the executable's.
public enum ProgressReadout {
    /// What the command asked for, as counted so far.
    public struct Totals: Sendable, Equatable {
        public var items: Int
        public var done: Int
        public var failed: Int
        /// Bytes of the items ended well.
        public var bytesDone: Int64
        /// The command's bytes per second, finished items' included (RateEstimator over all its bytes); nil: the
        /// sum of the items under way (which says 0 B/s for files that end between two looks).
        public var bytesPerSecond: Double?

        public init(items: Int, done: Int = 0, failed: Int = 0, bytesDone: Int64 = 0, bytesPerSecond: Double? = nil) {
            self.items = items
            self.done = done
            self.failed = failed
            self.bytesDone = bytesDone
            self.bytesPerSecond = bytesPerSecond
        }
    }

    /// The readout's lines: the items running or waiting to retry (`maxItems` of them at most, then how many
    /// more), then the totals, each at most `width` columns.
    public static func lines(_ items: [TransferSnapshot], totals: Totals, width: Int, maxItems: Int, now: Date = Date()) -> [String] {
        let width = max(width, 20)
        let moving = underWay(items)
        var lines = moving.prefix(max(maxItems, 1)).map { line($0, width: width, now: now) }
        if moving.count > lines.count { lines.append(DisplayWidth.truncate("  and \(moving.count - lines.count) more under way", to: width)) }
        let rate = totals.bytesPerSecond ?? moving.reduce(0.0) { $0 + ($1.state == .running ? $1.bytesPerSecond ?? 0 : 0) }
        var total = "\(totals.done) of \(totals.items) done"
        if totals.failed > 0 { total += ", \(totals.failed) failed" }
        // Nothing measured yet (the command's first look, items with no rate of their own): no figure, not 0 B/s.
        if !moving.isEmpty, totals.bytesPerSecond != nil || rate > 0 { total += ", \(ByteFormat.rate(rate))" }
        lines.append(DisplayWidth.truncate(total, to: width))
        return lines
    }

    /// The items the readout shows: running or waiting to retry.
    public static func underWay(_ items: [TransferSnapshot]) -> [TransferSnapshot] {
        items.filter { $0.state == .running || $0.state == .waiting }
    }

    /// One item: `#1 name [=====>    ] 42% 12.0/27.0 MiB 3.2 MiB/s ETA 5s`, or its retry's wait and reason.
    public static func line(_ item: TransferSnapshot, width: Int, now: Date = Date()) -> String {
        let name = "\(item.id) \(TerminalSafe.sanitize(item.displayName))"
        if item.state == .waiting {
            let wait = item.nextRetryAt.map { max(0, $0.timeIntervalSince(now)).rounded(.up) } ?? 0
            let why = TerminalSafe.sanitize(item.failureWords ?? item.lastError ?? "")
            return DisplayWidth.truncate("\(name)  retry \(item.retryCount) in \(ByteFormat.duration(wait)): \(why)", to: width)
        }
        // The figures in columns of their own, so that the bars of the lines line up.
        let percent = item.progress.map { "\(Int(($0 * 100).rounded(.down)))%" } ?? ""
        let sizes = item.bytesExpected.map { ByteFormat.progress(item.bytesDone, of: $0, fitting: 19) } ?? ByteFormat.bytes(item.bytesDone)
        let eta = item.eta.map { "ETA \(ByteFormat.duration($0))" } ?? ""
        let tail = [DisplayWidth.pad(percent, to: 4, alignRight: true), DisplayWidth.pad(sizes, to: 19, alignRight: true),
                    DisplayWidth.pad(ByteFormat.rate(item.bytesPerSecond ?? 0), to: 11, alignRight: true),
                    DisplayWidth.pad(eta, to: 10)].joined(separator: " ")
        // The name keeps at least 12 columns; the bar takes what is left, up to 24, and goes on a narrow screen.
        let room = width - DisplayWidth.of(tail) - 1
        let barWidth = item.progress == nil ? 0 : min(24, room - 14)
        let nameWidth = room - (barWidth >= 8 ? barWidth + 1 : 0)
        guard nameWidth >= 8 else {
            // Narrow: the figures without their columns.
            let figures = [percent, sizes, ByteFormat.rate(item.bytesPerSecond ?? 0), eta].filter { !$0.isEmpty }.joined(separator: " ")
            return DisplayWidth.truncate("\(name) \(figures)", to: width)
        }
        var line = DisplayWidth.pad(name, to: nameWidth)
        if barWidth >= 8, let progress = item.progress { line += " " + bar(Double(progress), width: barWidth) }
        return DisplayWidth.truncate(line + " " + tail, to: width).replacingOccurrences(of: " +$", with: "", options: .regularExpression)
    }

    /// `[=====>     ]` in `width` columns (ASCII: any terminal and locale draws it).
    public static func bar(_ fraction: Double, width: Int) -> String {
        let inner = max(width - 2, 1)
        let filled = Int((min(max(fraction, 0), 1) * Double(inner)).rounded(.down))
        let head = filled < inner && filled > 0 ? ">" : ""
        let body = String(repeating: "=", count: head.isEmpty ? filled : filled - 1) + head
        return "[" + body + String(repeating: " ", count: inner - DisplayWidth.of(body)) + "]"
    }

    /// The last line: `3 done, 1 failed: 54.0 MiB in 12s (4.5 MiB/s)`.
    public static func summary(_ totals: Totals, elapsed: TimeInterval) -> String {
        var line = "\(totals.done) done"
        if totals.failed > 0 { line += ", \(totals.failed) failed" }
        let left = totals.items - totals.done - totals.failed
        if left > 0 { line += ", \(left) not ended" }
        line += ": \(ByteFormat.bytes(totals.bytesDone)) in \(ByteFormat.duration(elapsed))"
        if elapsed >= 1, totals.bytesDone > 0 { line += " (\(ByteFormat.rate(Double(totals.bytesDone) / elapsed)))" }
        return line
    }
}
