import Foundation
import Testing
@testable import FerryModel

/// The rate every surface shows, against streams whose true rate is known, on a clock of the test's own: a
/// sender that paces bursts of a given size (nginx's `limit_rate`, libcurl's 16 KiB reads, ferry's pacer), read
/// by the engine's sampler every 0.2 s (late by up to 40 ms, as under load), and the estimate read at every
/// sample from 10 s on (the headless lines and the screen read it at a fixed phase of the bursts).
@Suite struct RateEstimatorTests {
    /// A stream of `burst`-byte arrivals at `rate` bytes per second, sampled every 0.2 s for `seconds`: the
    /// largest error of the estimate (a fraction of the rate) at the samples from `from` seconds on.
    static func worstError(rate: Double, burst: Int64, seconds: Double = 120, from: Double = 10,
                           offset: Double = 0.013, seed: UInt64 = 1) -> Double {
        var estimator = RateEstimator()
        var random = seed
        var worst = 0.0
        var tick = 0.0
        estimator.add(totalBytes: 0, at: 0)
        while tick < seconds {
            random = random &* 6364136223846793005 &+ 1442695040888963407
            tick += 0.2
            let late = Double(random >> 33) / Double(1 << 31) * 0.04
            let time = tick + late
            // Bursts arrive at offset, offset + burst/rate, ...; what has come by `time`.
            let arrived = time < offset ? 0 : Int64(((time - offset) * rate / Double(burst)).rounded(.down)) + 1
            estimator.add(totalBytes: arrived * burst, at: time)
            if time >= from, let estimate = estimator.bytesPerSecond {
                worst = max(worst, abs(estimate - rate) / rate)
            } else if time >= from {
                worst = .infinity
            }
        }
        return worst
    }

    /// Issue 41: a steady stream reads within 5 % of its true rate after 10 s, at 32 KiB/s as at 100 MiB/s, in
    /// bursts or not. The average this replaced read nginx's 256 KiB/s in bursts once a second at 237.8 KiB/s
    /// (7 % low, the same to the tenth for minutes) and in 64 KiB bursts at 264.6 KiB/s.
    static let kib = 1024.0
    static let streams: [(rate: Double, burst: Int64)] = [
        (32 * kib, 16 << 10),  // a 32 KiB/s limit: libcurl's 16 KiB reads twice a second
        (256 * kib, 256 << 10),  // nginx limit_rate 256k: one burst a second
        (256 * kib, 64 << 10),  // four bursts a second, out of step with the samples
        (200 * kib, 48 << 10),
        (10 * 1024 * kib, 16 << 10),  // 10 MiB/s: bytes at every sample
        (100 * 1024 * kib, 16 << 10),
    ]

    @Test(arguments: streams)
    func aSteadyStreamReadsItsTrueRate(_ rate: Double, _ burst: Int64) {
        for (seed, offset) in [(1, 0.013), (2, 0.11), (3, 0.187)] as [(UInt64, Double)] {
            let worst = Self.worstError(rate: rate, burst: burst, offset: offset, seed: seed)
            #expect(worst < 0.05, "\(rate / 1024) KiB/s in \(burst / 1024) KiB bursts: off by \(worst * 100) %")
        }
    }

    /// The estimate begins with the first two samples with bytes: the wait before the first byte (the
    /// connection, the server's first answer) is not averaged in (a second of nothing then 1.7 MiB/s said
    /// 186 KiB/s, ETA 5m41s).
    @Test func theWaitBeforeTheFirstByteIsNotAveragedIn() {
        var e = RateEstimator()
        var t = 0.0
        for _ in 0...5 {
            e.add(totalBytes: 0, at: t)
            t += 0.2
        }
        #expect(e.bytesPerSecond == nil)
        #expect(e.eta(remaining: 100) == nil)
        let rate = 1.7 * 1_048_576
        var bytes: Int64 = 0
        bytes += Int64(rate * 0.2)
        e.add(totalBytes: bytes, at: t)
        #expect(e.bytesPerSecond == nil, "one sample with bytes says nothing of a rate")
        for _ in 0..<2 {
            t += 0.2
            bytes += Int64(rate * 0.2)
            e.add(totalBytes: bytes, at: t)
        }
        #expect(abs(e.bytesPerSecond! - rate) < rate * 0.01, "\(e.bytesPerSecond!)")
    }

    /// A rate that changes is followed within the window: 1 MiB/s, then 2 MiB/s, reads 2 MiB/s a window later.
    @Test func aChangeOfRateIsFollowedWithinTheWindow() {
        var e = RateEstimator()
        var (t, bytes) = (0.0, Int64(0))
        e.add(totalBytes: 0, at: 0)
        for _ in 0..<100 {
            t += 0.2
            bytes += 1 << 20 / 5
            e.add(totalBytes: bytes, at: t)
        }
        #expect(abs(e.bytesPerSecond! - Double(1 << 20)) < 10)  // 1 MiB / 5 in whole bytes
        for step in 1...45 {
            t += 0.2
            bytes += 2 << 20 / 5
            e.add(totalBytes: bytes, at: t)
            // On its way up, never past it.
            #expect(e.bytesPerSecond! <= Double(2 << 20) + 1, "step \(step)")
        }
        #expect(abs(e.bytesPerSecond! - Double(2 << 20)) < 10, "\(e.bytesPerSecond! / Double(1 << 20)) MiB/s")
    }

    /// A stream that stops reads less with every sample past its usual gap, and 0 once a whole window passed
    /// with nothing (the header's upload rate said 271 B/s two minutes after the last upload ended).
    @Test func aStreamThatStopsFallsToZero() {
        var e = RateEstimator(window: 8)
        var (t, bytes) = (0.0, Int64(0))
        e.add(totalBytes: 0, at: 0)
        for _ in 0..<50 {
            t += 0.2
            bytes += 20_000
            e.add(totalBytes: bytes, at: t)
        }
        #expect(abs(e.bytesPerSecond! - 100_000) < 1)
        var previous = e.bytesPerSecond!
        var fell = 0
        while t < 10 + 8 - 0.1 {
            t += 0.2
            e.add(totalBytes: bytes, at: t)
            let now = e.bytesPerSecond!
            #expect(now <= previous)
            if now < previous { fell += 1 }
            previous = now
        }
        #expect(fell > 30, "it falls at nearly every sample: \(fell)")
        #expect(previous > 0)
        t += 0.2
        e.add(totalBytes: bytes, at: t)
        #expect(e.bytesPerSecond == 0)
        #expect(e.eta(remaining: 1000) == nil)
        // Bytes again: a rate again, from the new arrivals on.
        for _ in 0..<3 {
            t += 0.2
            bytes += 10_000
            e.add(totalBytes: bytes, at: t)
        }
        #expect(e.bytesPerSecond! > 0)
    }

    @Test func ignoresNonIncreasingAndBadTime() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 5)
        e.add(totalBytes: 500, at: 5)  // same time
        e.add(totalBytes: 500, at: 4)  // back in time
        e.add(totalBytes: 500, at: .nan)
        e.add(totalBytes: 500, at: .infinity)
        e.add(totalBytes: 1000, at: 6)
        e.add(totalBytes: 2000, at: 7)
        #expect(e.bytesPerSecond == 1000)
        e.add(totalBytes: -7, at: 8)  // nonsense total: ignored
        #expect(e.bytesPerSecond == 1000)
    }

    @Test func aDecreaseStartsOver() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 0)
        e.add(totalBytes: 5000, at: 1)
        e.add(totalBytes: 10000, at: 2)
        #expect(e.bytesPerSecond == 5000)
        e.add(totalBytes: 0, at: 3)  // restarted from zero
        #expect(e.bytesPerSecond == nil)
        e.add(totalBytes: 200, at: 4)
        e.add(totalBytes: 400, at: 5)
        #expect(e.bytesPerSecond == 200)
        e.reset()
        #expect(e.bytesPerSecond == nil)
        e.add(totalBytes: 100, at: 0.5)  // time may start again after a reset
        e.add(totalBytes: 300, at: 1.5)
        e.add(totalBytes: 500, at: 2.5)
        #expect(e.bytesPerSecond == 200)
    }

    @Test func eta() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 0)
        e.add(totalBytes: 500, at: 1)
        e.add(totalBytes: 1000, at: 2)  // 500 B/s
        #expect(e.eta(remaining: 5000) == 10)
        #expect(e.eta(remaining: 0) == 0)
        #expect(e.eta(remaining: -3) == 0)
    }

    @Test func aBadWindowFallsBack() {
        #expect(RateEstimator(window: 0).window == 8)
        #expect(RateEstimator(window: -1).window == 8)
        #expect(RateEstimator(window: .nan).window == 8)
        #expect(RateEstimator(window: .infinity).window == 8)
        #expect(RateEstimator(window: 5).window == 5)
    }

    @Test func extremeValuesStayFinite() {
        var e = RateEstimator()
        e.add(totalBytes: 0, at: 0)
        e.add(totalBytes: 1, at: 1e-300)
        e.add(totalBytes: Int64.max, at: 2e-300)
        #expect(e.bytesPerSecond.map(\.isFinite) ?? true)
        e.add(totalBytes: Int64.max, at: 1)
        #expect(e.bytesPerSecond.map { $0.isFinite && $0 >= 0 } ?? true)
    }
}
