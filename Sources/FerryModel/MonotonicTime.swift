import Foundation

/// Seconds on a clock that only goes forward (the system's uptime): what rates, paces and durations are measured
/// on, never the wall clock, which can jump.
public func monotonicSeconds() -> TimeInterval {
    Double(DispatchTime.now().uptimeNanoseconds) / 1e9
}
