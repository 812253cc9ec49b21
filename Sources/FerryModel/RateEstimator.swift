import Foundation

/// Smoothed transfer rate from (time, total bytes) samples taken a few times a second: an exponentially weighted moving
/// average of the instantaneous rate between samples, with the weight derived from the time between samples and a
/// half-life, so irregular sampling is fine.
///
/// After a gap of `dt` seconds the previous estimate keeps the weight `0.5^(dt / halfLife)`; the first pair of samples
/// between which bytes came sets the estimate to their instantaneous rate. Samples before any byte came (the
/// connection, the server's first answer) start no estimate: an average begun on an empty window showed 186 KiB/s
/// for a 1.7 MiB/s stream in its first seconds.
public struct RateEstimator: Sendable {
    /// Rates below this (bytes per second) count as a stall for `eta`.
    public static let minimumRate: Double = 1e-3

    public let halfLife: TimeInterval
    private var lastTime: TimeInterval?
    private var lastBytes: Int64 = 0
    private var rate: Double?

    /// `halfLife` must be positive and finite; anything else falls back to 2 seconds.
    public init(halfLife: TimeInterval = 2) {
        self.halfLife = (halfLife.isFinite && halfLife > 0) ? halfLife : 2
    }

    /// Adds a sample. `time`: monotonic seconds. Samples with non-increasing or non-finite time, or negative totals, are
    /// ignored; a decrease of `totalBytes` (restart from zero) resets the estimator and starts over from this sample.
    public mutating func add(totalBytes: Int64, at time: TimeInterval) {
        guard time.isFinite, totalBytes >= 0 else { return }
        guard let previousTime = lastTime else {
            lastTime = time
            lastBytes = totalBytes
            return
        }
        guard time > previousTime else { return }
        guard totalBytes >= lastBytes else {
            reset()
            lastTime = time
            lastBytes = totalBytes
            return
        }
        let dt = time - previousTime
        let instant = Double(totalBytes - lastBytes) / dt
        guard instant.isFinite else { return }  // absurdly small dt
        if rate == nil, totalBytes == lastBytes {
            // Nothing has come yet: the estimate begins when data flows.
            lastTime = time
            return
        }
        if let current = rate {
            let keep = pow(0.5, dt / halfLife)
            rate = instant + (current - instant) * keep
        } else {
            rate = instant
        }
        lastTime = time
        lastBytes = totalBytes
    }

    /// Smoothed bytes per second; nil until two samples.
    public var bytesPerSecond: Double? { rate }

    /// Seconds until `remaining` more bytes arrive at the current rate; nil when the rate is unknown or ~0
    /// (below `minimumRate`). 0 when nothing remains.
    public func eta(remaining: Int64) -> TimeInterval? {
        guard let rate, rate >= Self.minimumRate else { return nil }
        guard remaining > 0 else { return 0 }
        return Double(remaining) / rate
    }

    /// Forgets all samples.
    public mutating func reset() {
        lastTime = nil
        lastBytes = 0
        rate = nil
    }
}
