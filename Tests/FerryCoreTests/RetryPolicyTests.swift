import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy()
    /// Always draws the top of the range, so the ceiling is visible.
    let top: (ClosedRange<Double>) -> Double = { $0.upperBound }

    /// Issue 41: a failure that costs nothing to wait out is retried past the count until `patience` has passed
    /// since the run of failures began (a server restarting for 20 s spent five retries in about 4 s); others are
    /// not, and neither is one past its patience.
    @Test func aServerThatIsAwayIsWaitedOutPastTheCount() {
        let policy = RetryPolicy()
        let refused = TransferFailure.transport(code: -1004, kind: .refused, message: "Could not connect")
        let busy = TransferFailure.http(status: 503, reason: "Service Unavailable", retryAfter: nil)
        for failure in [refused, busy, .http(status: 502, reason: "Bad Gateway", retryAfter: nil), .transport(code: -1005, kind: .connectionLost, message: "lost")] {
            #expect(policy.decide(failure, retries: 5, failingFor: 4) != .giveUp, "\(failure)")
            #expect(policy.decide(failure, retries: 40, failingFor: 59) != .giveUp, "\(failure)")
            #expect(policy.decide(failure, retries: 5, failingFor: 60) == .giveUp, "\(failure)")
        }
        for failure in [TransferFailure.http(status: 404, reason: "Not Found", retryAfter: nil), .http(status: 500, reason: "Internal Server Error", retryAfter: nil),
                        .transport(code: -1003, kind: .noSuchHost, message: "no such host")] {
            #expect(policy.decide(failure, retries: policy.maxRetries, failingFor: 4) == .giveUp, "\(failure)")
        }
        // A POST the server may have acted on is not retried however long it has been failing.
        #expect(policy.decide(.http(status: 502, reason: "Bad Gateway", retryAfter: nil), retries: 0, idempotent: false, failingFor: 1) == .giveUp)
    }

    @Test func defaultsMatchTheDesign() {
        #expect(policy.maxRetries == 5)
        #expect(policy.baseDelay == 1)
        #expect(policy.factor == 2)
        #expect(policy.maxDelay == 60)
        #expect(policy.maxRetryAfter == 600)
    }

    @Test func backoffDoublesUpToTheCap() {
        #expect((1...8).map { policy.backoffCeiling(retry: $0) } == [1, 2, 4, 8, 16, 32, 60, 60])
        #expect(policy.backoffCeiling(retry: 10_000) == 60)
    }

    @Test func fullJitterDrawsFromZeroToTheCeiling() {
        var seen: ClosedRange<Double>?
        _ = policy.decide(.transport(code: -1005, kind: .connectionLost, message: "lost"), retries: 2) { range in
            seen = range
            return range.lowerBound
        }
        #expect(seen == 0...4)
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504])
    func retryableStatuses(_ status: Int) {
        #expect(policy.decide(.http(status: status, reason: "", retryAfter: nil), retries: 0, random: top) == .retry(after: 1))
    }

    @Test(arguments: [400, 401, 403, 404, 410, 416, 501])
    func otherStatusesFailAtOnce(_ status: Int) {
        #expect(policy.decide(.http(status: status, reason: "", retryAfter: nil), retries: 0) == .giveUp)
    }

    /// -1 is how a mid-body close looks on Linux ("transfer closed with N bytes remaining"), not -1005.
    @Test(arguments: [-1, -1001, -1004, -1005])
    func connectionFailuresAreRetried(_ code: Int) {
        #expect(policy.decide(.transport(code: code, kind: FailureKind(urlErrorCode: code), message: ""), retries: 0, random: top) == .retry(after: 1))
    }

    @Test(arguments: [-1002, -999, -1000])
    func badURLsAndUnsupportedSchemesAreNotRetried(_ code: Int) {
        #expect(policy.decide(.transport(code: code, kind: FailureKind(urlErrorCode: code), message: ""), retries: 0) == .giveUp)
    }

    @Test func localAndIntegrityFailuresAreNotRetried() {
        #expect(policy.decide(.local(.diskFull, "disk full"), retries: 0) == .giveUp)
        #expect(policy.decide(.integrity(.checksum, "SHA-256 mismatch"), retries: 0) == .giveUp)
    }

    @Test func dnsFailuresOnlyALimitedNumberOfTimes() {
        let dns = TransferFailure.transport(code: -1003, kind: .noSuchHost, message: "no such host")
        #expect(policy.decide(dns, retries: 0, dnsRetries: 0, random: top) != .giveUp)
        #expect(policy.decide(dns, retries: 2, dnsRetries: 2, random: top) == .giveUp)
    }

    @Test func theBudgetRunsOut() {
        let lost = TransferFailure.transport(code: -1005, kind: .connectionLost, message: "")
        #expect(policy.decide(lost, retries: 4, random: top) == .retry(after: 16))
        #expect(policy.decide(lost, retries: 5, random: top) == .giveUp)
    }

    @Test func retryAfterIsAFloorAndIsCapped() {
        let zero: (ClosedRange<Double>) -> Double = { $0.lowerBound }
        #expect(policy.decide(.http(status: 503, reason: "", retryAfter: 2), retries: 0, random: zero) == .retry(after: 2))
        #expect(policy.decide(.http(status: 429, reason: "", retryAfter: 86_400), retries: 0, random: zero) == .retry(after: 600))
        // A short Retry-After never makes the wait shorter than the backoff drawn.
        #expect(policy.decide(.http(status: 503, reason: "", retryAfter: 0.5), retries: 3, random: top) == .retry(after: 8))
    }
}
