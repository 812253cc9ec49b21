import Foundation

/// A transfer's rate from (time, total bytes) samples taken a few times a second: the bytes that came between
/// the first and the last sample of the window at which bytes had come, over the time between those two samples.
/// The one estimate every surface shows (the row, the header, the detail, the headless lines, `list --json`,
/// aria2's RPC): each reads it from the engine's snapshot, none keeps its own.
///
/// Both ends of the window are arrivals, so a stream that comes in bursts (nginx's `limit_rate`, libcurl's 16 KiB
/// reads at 32 KiB/s, ferry's own pacer) is measured over whole bursts: a steady stream reads its true rate to
/// within one sample's period over the window (0.2 s in 8 s: 2.5 %), whatever the phase of its bursts. The
/// exponentially weighted average this replaces read a stream of 256 KiB bursts once a second at 237.8 KiB/s and
/// 64 KiB bursts four times a second at 264.6 KiB/s, the same to the tenth for minutes: the headless lines and the
/// screen read it at a fixed phase of the bursts, and the average's value depends on the phase.
///
/// When nothing has come for longer than twice the usual gap between arrivals, the time since counts too, so the
/// rate falls as a stream slows or stops; after a whole window with nothing it is 0 (the upload rate in the
/// header said 271 B/s two minutes after the last upload ended). The wait before the first byte (the connection,
/// the server's first answer) is never counted: an estimate begins at the first sample with bytes.
public struct RateEstimator: Sendable, Equatable {
    /// Rates below this (bytes per second) count as a stall for `eta`.
    public static let minimumRate: Double = 1e-3

    /// How far back the rate looks (seconds).
    public let window: TimeInterval

    private struct Point: Sendable, Equatable {
        var time: TimeInterval
        var total: Int64
    }

    /// The samples at which bytes had come, oldest first: the newest one at or before `window` seconds ago (the
    /// window's start), and every one since.
    private var arrivals: [Point] = []
    /// The latest sample.
    private var last: Point?

    /// `window` must be positive and finite; anything else falls back to 8 seconds.
    public init(window: TimeInterval = 8) {
        self.window = (window.isFinite && window > 0) ? window : 8
    }

    /// Adds a sample. `time`: monotonic seconds. Samples with non-increasing or non-finite time, or negative totals,
    /// are ignored; a decrease of `totalBytes` (a restart from zero) starts over from this sample.
    public mutating func add(totalBytes: Int64, at time: TimeInterval) {
        guard time.isFinite, totalBytes >= 0 else { return }
        guard let previous = last else {
            last = Point(time: time, total: totalBytes)
            return
        }
        guard time > previous.time else { return }
        guard totalBytes >= previous.total else {
            reset()
            last = Point(time: time, total: totalBytes)
            return
        }
        let point = Point(time: time, total: totalBytes)
        if totalBytes > previous.total { arrivals.append(point) }
        last = point
        while arrivals.count > 2, arrivals[1].time <= time - window { arrivals.removeFirst() }
    }

    /// Bytes per second; nil until two samples with bytes.
    public var bytesPerSecond: Double? {
        guard arrivals.count >= 2, let first = arrivals.first, let newest = arrivals.last, let now = last?.time else { return nil }
        let quiet = now - newest.time
        if quiet >= window { return 0 }
        let span = newest.time - first.time
        let gap = span / Double(arrivals.count - 1)
        let rate = Double(newest.total - first.total) / (span + max(0, quiet - 2 * gap))
        return rate.isFinite ? rate : nil
    }

    /// Seconds until `remaining` more bytes arrive at the current rate; nil when the rate is unknown or ~0
    /// (below `minimumRate`). 0 when nothing remains.
    public func eta(remaining: Int64) -> TimeInterval? {
        guard let rate = bytesPerSecond, rate >= Self.minimumRate else { return nil }
        guard remaining > 0 else { return 0 }
        return Double(remaining) / rate
    }

    /// Forgets all samples.
    public mutating func reset() {
        arrivals = []
        last = nil
    }
}
