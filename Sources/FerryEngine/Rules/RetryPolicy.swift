import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// When and whether to try again: exponential backoff with full jitter, Retry-After honoured.
public struct RetryPolicy: Sendable, Equatable {
    /// Retries after the first attempt (`--retries N`).
    public var maxRetries: Int = 5
    public var baseDelay: TimeInterval = 1
    public var factor: Double = 2
    public var maxDelay: TimeInterval = 60
    /// The longest Retry-After we are willing to wait; a longer one is cut to this.
    public var maxRetryAfter: TimeInterval = 600
    /// DNS failures are usually permanent typos: only this many retries for them.
    public var maxDNSRetries: Int = 2
    public var retryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// -1: Linux's "transfer closed with N bytes remaining" (a mid-body close), -1001 timed out,
    /// -1004 cannot connect, -1005 connection lost, -1009 not connected, -1020 data not allowed.
    public var retryableTransportCodes: Set<Int> = [-1, -1001, -1004, -1005, -1009, -1020]
    public var dnsTransportCodes: Set<Int> = [-1003, -1006]
    /// A failure that costs nothing to wait out (the server or the link is away for a while) is retried past
    /// `maxRetries` until this long has passed since the first failure of its run (progress starts a new run):
    /// a server restarting for 20 s spent five retries in about 4 s and the upload failed. Not with
    /// `--retries 0`: no retry was asked for.
    public var patience: TimeInterval = 60
    /// Those failures: a connection refused, lost or timed out, the link down, and the statuses of a server
    /// that is busy or behind a proxy while it restarts (not 500: a server's own error may be for good).
    public var waitedOutTransportCodes: Set<Int> = [-1, -1001, -1004, -1005, -1009]
    public var waitedOutStatuses: Set<Int> = [408, 429, 502, 503, 504]

    public init() {}

    /// Whether `failure` is one that costs nothing to wait out (`patience`).
    public func waitsOut(_ failure: TransferFailure) -> Bool {
        switch failure {
        case let .transport(code, _, _): return waitedOutTransportCodes.contains(code)
        case let .http(status, _, _): return waitedOutStatuses.contains(status)
        case .protocolViolation, .local, .integrity: return false
        }
    }

    /// The jitter-free ceiling for retry number `n` (1-based).
    public func backoffCeiling(retry n: Int) -> TimeInterval {
        let exponent = Double(max(0, n - 1))
        let raw = baseDelay * pow(factor, exponent)
        return min(maxDelay, raw.isFinite ? raw : maxDelay)
    }

    /// Whether `failure` is a name that did not resolve (which gets `maxDNSRetries` retries at most).
    public func isDNS(_ failure: TransferFailure) -> Bool {
        if case let .transport(code, _, _) = failure { return dnsTransportCodes.contains(code) }
        return false
    }

    /// The retries an item has in all, counted as `retries` is (what "retry 2/5" shows): after a name that did
    /// not resolve, the retries spent and those its DNS budget leaves, fewer than `maxRetries`.
    public func budget(retries: Int, dnsRetries: Int, afterDNS: Bool) -> Int {
        guard afterDNS else { return maxRetries }
        return retries + max(0, min(maxRetries - retries, maxDNSRetries - dnsRetries))
    }

    public enum Decision: Sendable, Equatable {
        case retry(after: TimeInterval)
        case giveUp
    }

    /// Decides what follows a failure. `retries` counts the retries already spent, `dnsRetries` those spent on DNS.
    /// `random` draws uniformly from the range (injectable for tests).
    /// Statuses after which a non-idempotent request (POST) cannot have been acted on.
    public var retryableStatusesForNonIdempotent: Set<Int> = [408, 429, 503]

    /// - Parameters:
    ///   - idempotent: false for POST: only failures where the server cannot have acted are retried.
    ///   - failingFor: seconds since the first failure of this run of failures (`patience`; without it, none).
    public func decide(
        _ failure: TransferFailure, retries: Int, dnsRetries: Int = 0, idempotent: Bool = true, failingFor: TimeInterval = .infinity,
        random: (ClosedRange<Double>) -> Double = { Double.random(in: $0) }
    ) -> Decision {
        // The budget says how many retries this failure has (a name that does not resolve has fewer); one that
        // costs nothing to wait out has at least `patience` seconds too.
        guard retries < budget(retries: retries, dnsRetries: dnsRetries, afterDNS: isDNS(failure))
            || (maxRetries > 0 && waitsOut(failure) && failingFor < patience) else { return .giveUp }
        var floor: TimeInterval = 0
        switch failure {
        case let .http(status, _, retryAfter):
            guard retryableStatuses.contains(status) else { return .giveUp }
            guard idempotent || retryableStatusesForNonIdempotent.contains(status) else { return .giveUp }
            if let retryAfter { floor = min(max(0, retryAfter), maxRetryAfter) }
        case let .transport(code, _, _):
            if !isDNS(failure), !retryableTransportCodes.contains(code) { return .giveUp }
        case .protocolViolation:
            break
        case .local, .integrity:
            return .giveUp
        }
        let jittered = random(0...backoffCeiling(retry: retries + 1))
        return .retry(after: max(floor, jittered))
    }
}
