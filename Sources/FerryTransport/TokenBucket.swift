import FerryModel
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

    /// Whether it holds its whole burst again (a new bucket would be the same).
    mutating func isFull(_ now: TimeInterval) -> Bool {
        refill(now)
        return tokens >= Self.capacity(rate)
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

    /// How much a paused transfer waits for before it goes on: a sixteenth of a second's worth (at least one
    /// of libcurl's 16 KiB writes). libcurl hands over what it holds 16 KiB at a time, so going on as soon
    /// as the debt is repaid paused and resumed the transfer for every 16 KiB (125 times a second at 2 MiB/s:
    /// 6 times the CPU of the same download without a limit).
    static func resumeThreshold(_ rate: Double) -> Double { min(capacity(rate), max(rate / 16, Double(16 << 10))) }

    /// When a paused transfer may go on: once the debt is repaid and resumeThreshold has come in.
    mutating func readyAt(_ now: TimeInterval) -> TimeInterval {
        refill(now)
        let wanted = Self.resumeThreshold(rate)
        return tokens >= wanted ? now : now + (wanted - tokens) / max(rate, 1)
    }
}

/// The engine's own rate for one direction as one bucket, which every transfer moving that way takes from as
/// well as from its share's (transport thread only). A share's bucket is made with its transfer and starts
/// with a quarter second's burst; this one outlives the transfers, so that transfers coming and going cannot
/// carry more than the rate between them (200 files of 64 KiB under a global 1 MiB/s took 0.1 s: each new
/// transfer's first burst, 256 KiB, held its whole file).
final class SharedBucket {
    var bucket: TokenBucket

    init(rate: Double, now: TimeInterval) {
        bucket = TokenBucket(rate: rate, now: now)
    }
}
