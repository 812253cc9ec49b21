import Foundation

/// One transfer's pace under its limits: the bucket of its share, the engine's bucket for its direction (shared
/// with every transfer moving that way), when a transfer held back may go on, and what it took in. A value that
/// is told the time at every call (`now`), never reads a clock: the transport gives it the monotonic clock
/// (CurlTransfer), RatePacingTests a clock of its own, so the rates it makes are checked to the byte, whatever
/// the machine's load. Transport thread only.
struct RatePacer {
    private var bucket: TokenBucket?
    /// The engine's rate for this direction (nil: none).
    private var shared: SharedBucket?
    /// The item's own rate, as one bucket for all its transfers, those before this one included (nil: none).
    private var item: SharedBucket?
    /// Its batch's rate (a tree's), as one bucket for all the batch's transfers as they come and go (nil: none).
    private var batch: SharedBucket?
    /// When a transfer held back for its rate may go on (nil: not held back).
    private(set) var resumeAt: TimeInterval?
    /// Bytes taken since the last measurement, and whether the buckets held the transfer back meanwhile.
    private var taken = 0
    private var heldBack = false
    /// Bytes per second taken in over the last measurement while the buckets never held it back (a slow server,
    /// a slow disk); nil when they did, when it ran without a rate of its own, or when it is new.
    private(set) var intake: Double?

    /// Whether a rate holds the transfer at all (without one, nothing here is asked).
    var limited: Bool { bucket != nil || shared != nil || item != nil || batch != nil }
    /// The rate of its own share (nil: none).
    var rate: Double? { bucket?.rate }

    /// Bytes the rates let go now: the least of what the share's bucket and the engine's allow (0 in debt).
    mutating func allowance(_ now: TimeInterval) -> Int {
        var allowed = Int.max
        if bucket != nil { allowed = bucket!.available(now) }
        if let shared { allowed = min(allowed, shared.bucket.available(now)) }
        if let item { allowed = min(allowed, item.bucket.available(now)) }
        if let batch { allowed = min(allowed, batch.bucket.available(now)) }
        return allowed
    }

    /// `bytes` went under the rates (both buckets pay; either may go into debt: libcurl hands over a whole read).
    mutating func spend(_ bytes: Int, now: TimeInterval) {
        bucket?.take(bytes, now: now)
        shared?.bucket.take(bytes, now: now)
        item?.bucket.take(bytes, now: now)
        batch?.bucket.take(bytes, now: now)
    }

    /// `bytes` moved, limited or not (what the next measurement counts).
    mutating func count(_ bytes: Int) { taken += bytes }

    /// Held back for the rate: it may go on at `resumeAt`.
    mutating func hold(_ now: TimeInterval) {
        heldBack = true
        resumeAt = readyAt(now)
    }

    /// Measures `intake` over the last `interval` seconds and starts the next measurement.
    mutating func measureIntake(over interval: TimeInterval) {
        intake = bucket == nil || heldBack || interval <= 0 ? nil : Double(taken) / interval
        taken = 0
        heldBack = false
    }

    /// The bucket of the engine's rate it also takes from (nil: none).
    mutating func share(_ shared: SharedBucket?) { self.shared = shared }

    /// The bucket of its item's own rate (nil: none).
    mutating func shareItem(_ item: SharedBucket?) { self.item = item }

    /// The bucket of its batch's rate (nil: none).
    mutating func shareBatch(_ batch: SharedBucket?) { self.batch = batch }

    /// Its share of its limits (nil: unlimited). A bucket made now starts with its quarter second's burst.
    mutating func setRate(_ rate: Double?, now: TimeInterval) {
        if let rate {
            if bucket == nil { bucket = TokenBucket(rate: rate, now: now) } else { bucket!.setRate(rate, now: now) }
        } else {
            bucket = nil
        }
    }

    /// Its rates changed while it is held back (a limit raised or lifted, a share worked out again): it goes on
    /// when its buckets now allow, at once with none left (it waited out the old rate: at 100 B/s, 164 s for its
    /// next 16 KiB, after the limit was gone).
    mutating func ratesChanged(now: TimeInterval) {
        guard resumeAt != nil else { return }
        resumeAt = readyAt(now)
    }

    /// It went on after being held back.
    mutating func waitEnded() { resumeAt = nil }

    /// When the share's bucket and the engine's both let it go on (now, without either).
    private mutating func readyAt(_ now: TimeInterval) -> TimeInterval {
        let own = bucket != nil ? bucket!.readyAt(now) : now
        return max(own, shared?.bucket.readyAt(now) ?? now, item?.bucket.readyAt(now) ?? now, batch?.bucket.readyAt(now) ?? now)
    }
}
