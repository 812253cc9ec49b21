import Foundation

/// Bytes per second with a burst of at most a quarter second's worth: taking may go into debt (libcurl
/// hands over what it read in one piece), and a transfer in debt waits until it is repaid.
struct TokenBucket {
    private(set) var rate: Double
    private var tokens: Double
    private var updated: TimeInterval

    init(rate: Double, now: TimeInterval) {
        self.rate = rate
        self.tokens = Self.capacity(rate)
        self.updated = now
    }

    /// A burst after a pause is at most this much (a quarter second, so that no second carries more than
    /// 1.25 times the rate), and never less than one of libcurl's reads.
    static func capacity(_ rate: Double) -> Double { max(rate / 4, Double(16 << 10)) }

    mutating func setRate(_ newRate: Double, now: TimeInterval) {
        refill(now)
        rate = newRate
        tokens = min(tokens, Self.capacity(newRate))
    }

    private mutating func refill(_ now: TimeInterval) {
        guard now > updated else { return }
        tokens = min(Self.capacity(rate), tokens + (now - updated) * rate)
        updated = now
    }

    /// Whole bytes that may go now (0 while in debt).
    mutating func available(_ now: TimeInterval) -> Int {
        refill(now)
        return tokens > 0 ? Int(tokens) : 0
    }

    mutating func take(_ bytes: Int, now: TimeInterval) {
        refill(now)
        tokens -= Double(bytes)
    }

    /// When the debt is repaid (now when there is none).
    mutating func readyAt(_ now: TimeInterval) -> TimeInterval {
        refill(now)
        return tokens > 0 ? now : now + (-tokens + 1) / max(rate, 1)
    }
}
