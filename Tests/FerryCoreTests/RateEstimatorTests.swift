import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct RateEstimatorTests {
    @Test func nilUntilTwoSamples() {
        var e = RateEstimator()
        #expect(e.bytesPerSecond == nil)
        #expect(e.eta(remaining: 100) == nil)
        e.add(totalBytes: 0, at: 10)
        #expect(e.bytesPerSecond == nil)
        e.add(totalBytes: 1000, at: 11)
        #expect(e.bytesPerSecond == 1000)
    }

    @Test func constantRateConverges() {
        var e = RateEstimator(halfLife: 2)
        var t = 0.0
        var bytes: Int64 = 0
        e.add(totalBytes: bytes, at: t)
        for i in 0..<200 {
            let dt = [0.1, 0.25, 0.33, 0.5][i % 4]  // irregular sampling
            t += dt
            bytes += Int64((dt * 50_000).rounded())
            e.add(totalBytes: bytes, at: t)
        }
        let r = try! #require(e.bytesPerSecond)
        #expect(abs(r - 50_000) < 50)
    }

    @Test func stepChangeFollowsHalfLife() {
        let halfLife = 2.0
        var e = RateEstimator(halfLife: halfLife)
        var t = 0.0
        var bytes: Int64 = 0
        e.add(totalBytes: 0, at: 0)
        for _ in 0..<100 {  // 1000 B/s for 25 s
            t += 0.25
            bytes += 250
            e.add(totalBytes: bytes, at: t)
        }
        #expect(abs(e.bytesPerSecond! - 1000) < 1e-6)
        // step to 3000 B/s: after one half-life the estimate is half way, after two it is 3/4 of the way
        for _ in 0..<8 {
            t += 0.25
            bytes += 750
            e.add(totalBytes: bytes, at: t)
        }
        #expect(abs(e.bytesPerSecond! - 2000) < 1e-6)
        for _ in 0..<8 {
            t += 0.25
            bytes += 750
            e.add(totalBytes: bytes, at: t)
        }
        #expect(abs(e.bytesPerSecond! - 2500) < 1e-6)
    }

    @Test func weightDependsOnElapsedTimeNotSampleCount() {
        // Same history sampled coarsely or finely gives the same estimate for a constant-per-interval rate.
        var fine = RateEstimator(halfLife: 1)
        var coarse = RateEstimator(halfLife: 1)
        fine.add(totalBytes: 0, at: 0)
        coarse.add(totalBytes: 0, at: 0)
        fine.add(totalBytes: 100, at: 1)
        coarse.add(totalBytes: 100, at: 1)
        for i in 1...10 {
            fine.add(totalBytes: 100 + Int64(i) * 50, at: 1 + Double(i) * 0.1)
        }
        coarse.add(totalBytes: 600, at: 2)
        #expect(abs(fine.bytesPerSecond! - coarse.bytesPerSecond!) < 1e-9)
        #expect(abs(coarse.bytesPerSecond! - 300) < 1e-9)  // 500 + (100 - 500) * 0.5
    }

    @Test func stallDecaysTowardZero() {
        var e = RateEstimator(halfLife: 2)
        e.add(totalBytes: 0, at: 0)
        e.add(totalBytes: 10_000, at: 1)
        #expect(e.bytesPerSecond == 10_000)
        var t = 1.0
        for _ in 0..<4 {  // 2 s of nothing
            t += 0.5
            e.add(totalBytes: 10_000, at: t)
        }
        #expect(abs(e.bytesPerSecond! - 5_000) < 1e-6)
        for _ in 0..<116 {  // 58 s more
            t += 0.5
            e.add(totalBytes: 10_000, at: t)
        }
        #expect(e.bytesPerSecond! < 0.01)
        #expect(e.bytesPerSecond! >= 0)
        #expect(e.eta(remaining: 1000) == nil)
    }

    /// Issue 24, bug 7: the wait before a stream's first byte (the connection, the server's answer) is not
    /// averaged in: a second of nothing then 1.7 MiB/s is 1.7 MiB/s from the first sample with data (it said
    /// 186 KiB/s, ETA 5m41s).
    @Test func theWaitBeforeTheFirstByteIsNotAveragedIn() {
        var e = RateEstimator(halfLife: 2)
        var t = 0.0
        var bytes: Int64 = 0
        for _ in 0...5 {
            e.add(totalBytes: 0, at: t)
            t += 0.2
        }
        #expect(e.bytesPerSecond == nil)
        let rate = 1.7 * 1_048_576
        for _ in 0..<3 {
            bytes += Int64(rate * 0.2)
            e.add(totalBytes: bytes, at: t)
            t += 0.2
        }
        #expect(abs(e.bytesPerSecond! - rate) < rate * 0.01, "\(e.bytesPerSecond!)")
    }

    @Test func ignoresNonIncreasingAndBadTime() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 5)
        e.add(totalBytes: 500, at: 5)  // same time
        e.add(totalBytes: 500, at: 4)  // back in time
        e.add(totalBytes: 500, at: .nan)
        e.add(totalBytes: 500, at: .infinity)
        #expect(e.bytesPerSecond == nil)
        e.add(totalBytes: 1000, at: 6)
        #expect(e.bytesPerSecond == 1000)
        e.add(totalBytes: -7, at: 7)  // nonsense total: ignored
        #expect(e.bytesPerSecond == 1000)
        e.add(totalBytes: 2000, at: 7)
        #expect(e.bytesPerSecond == 1000)
    }

    @Test func decreaseResets() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 0)
        e.add(totalBytes: 5000, at: 1)
        #expect(e.bytesPerSecond == 5000)
        e.add(totalBytes: 0, at: 2)  // restarted from zero
        #expect(e.bytesPerSecond == nil)
        e.add(totalBytes: 200, at: 3)
        #expect(e.bytesPerSecond == 200)
    }

    @Test func reset() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 0)
        e.add(totalBytes: 100, at: 1)
        e.reset()
        #expect(e.bytesPerSecond == nil)
        e.add(totalBytes: 100, at: 0.5)  // time may restart after reset
        #expect(e.bytesPerSecond == nil)
        e.add(totalBytes: 300, at: 1.5)
        #expect(e.bytesPerSecond == 200)
    }

    @Test func eta() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 0)
        e.add(totalBytes: 1000, at: 2)  // 500 B/s
        #expect(e.eta(remaining: 5000) == 10)
        #expect(e.eta(remaining: 0) == 0)
        #expect(e.eta(remaining: -3) == 0)
        // Nothing came yet: no rate and no ETA (a rate begins with the first byte; it was 0 before).
        var waiting = RateEstimator()
        waiting.add(totalBytes: 10, at: 0)
        waiting.add(totalBytes: 10, at: 1)
        #expect(waiting.bytesPerSecond == nil)
        #expect(waiting.eta(remaining: 100) == nil)
        // Stalled after data: the rate decays toward 0, and below the floor there is no ETA.
        var stalled = RateEstimator(halfLife: 0.1)
        stalled.add(totalBytes: 0, at: 0)
        stalled.add(totalBytes: 10, at: 1)
        stalled.add(totalBytes: 10, at: 10)
        #expect(stalled.bytesPerSecond! < RateEstimator.minimumRate)
        #expect(stalled.eta(remaining: 100) == nil)
    }

    @Test func badHalfLifeFallsBack() {
        #expect(RateEstimator(halfLife: 0).halfLife == 2)
        #expect(RateEstimator(halfLife: -1).halfLife == 2)
        #expect(RateEstimator(halfLife: .nan).halfLife == 2)
        #expect(RateEstimator(halfLife: .infinity).halfLife == 2)
        #expect(RateEstimator(halfLife: 0.5).halfLife == 0.5)
    }

    @Test func extremeValuesStayFinite() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 0)
        e.add(totalBytes: Int64.max, at: 1e-300)  // instantaneous rate would be infinite: ignored
        #expect(e.bytesPerSecond == nil)
        e.add(totalBytes: Int64.max, at: 1)
        #expect(e.bytesPerSecond == Double(Int64.max))
    }
}
