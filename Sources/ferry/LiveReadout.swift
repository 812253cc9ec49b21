import FerryCore
import FerryTUI
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// `ferry get`/`put` in a terminal: ProgressReadout's lines on stderr, redrawn in place (the cursor goes back up
/// over them), with every other line of the command printed above them, and a summary in their place at the
/// end. While it is drawn, whatever ferry writes to stderr goes through it (Output.error), so no line lands in
/// the middle of the readout.
final class LiveReadout: Sendable {
    private struct State {
        /// The lines on the screen now (their count is how far a redraw goes back up).
        var last: [String] = []
        var totals = ProgressReadout.Totals(items: 0)
        /// Over all the command's bytes (those of ended items and those under way): 2,000 small files went at
        /// 5 MiB/s and the sum of the items under way said 0 B/s, each ending before its own rate had two samples.
        var rate = RateEstimator()
        var finished = false
    }

    private let state = Mutex(State())
    private let started = Date()
    /// The readout drawn now, if any (Output.error's way to it).
    static let current = Mutex<LiveReadout?>(nil)

    /// In a terminal that can move its cursor, unless `--no-tui` asked for plain lines.
    static func wanted(noTUI: Bool) -> Bool {
        guard !noTUI, isatty(STDERR_FILENO) != 0 else { return false }
        let term = ProcessInfo.processInfo.environment["TERM"] ?? ""
        return !term.isEmpty && term != "dumb"
    }

    init() {
        Self.current.withLock { $0 = self }
    }

    /// How many items the command waits for (its own, and those handed to it meanwhile).
    func expect(_ count: Int) {
        state.withLock { $0.totals.items = max($0.totals.items, count) }
    }

    /// An item the command waits for ended (once per item: the reporter tells each change once).
    func ended(_ item: TransferSnapshot) {
        state.withLock { s in
            switch item.state {
            case .completed:
                s.totals.done += 1
                s.totals.bytesDone += item.bytesDone
            case .failed, .cancelled:
                s.totals.failed += 1
            default: break
            }
        }
    }

    /// Lines (each `ferry: ...\n`) above the readout, which is drawn again below them.
    func above(_ text: String) {
        state.withLock { s in
            guard !s.finished else { return write(text) }
            write(erase(s.last.count) + text + Self.joined(s.last))
        }
    }

    /// The readout for these items (those of the command; the readout keeps those running or waiting).
    func draw(_ items: [TransferSnapshot]) {
        let (width, height) = Self.terminalSize()
        state.withLock { s in
            guard !s.finished else { return }
            let moving = ProgressReadout.underWay(items).reduce(Int64(0)) { $0 + $1.bytesDone }
            s.rate.add(totalBytes: s.totals.bytesDone + moving, at: monotonicSeconds())
            s.totals.bytesPerSecond = s.rate.bytesPerSecond
            let lines = ProgressReadout.lines(items, totals: s.totals, width: width - 1, maxItems: max(1, min(8, height - 4)))
            guard lines != s.last else { return }
            write(erase(s.last.count) + Self.joined(lines))
            s.last = lines
        }
    }

    /// The end: the readout gives way to its summary (none when the command was interrupted: its own line
    /// says what became of the items); stderr is plain again.
    func finish(summary: Bool = true) {
        state.withLock { s in
            guard !s.finished else { return }
            s.finished = true
            let last = summary ? "ferry: " + ProgressReadout.summary(s.totals, elapsed: Date().timeIntervalSince(started)) + "\n" : ""
            write(erase(s.last.count) + last)
            s.last = []
        }
        Self.current.withLock { if $0 === self { $0 = nil } }
    }

    private func erase(_ lines: Int) -> String {
        lines > 0 ? "\r\u{1B}[\(lines)A\u{1B}[J" : ""
    }

    private static func joined(_ lines: [String]) -> String {
        lines.map { $0 + "\n" }.joined()
    }

    private func write(_ text: String) {
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }

    /// The terminal's columns and rows (80 x 24 when it does not say).
    static func terminalSize() -> (Int, Int) {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return (80, 24) }
        return (Int(size.ws_col), Int(max(size.ws_row, 5)))
    }
}
