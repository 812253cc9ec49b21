import Foundation
import Testing
@testable import FerryEngine
@testable import FerryModel

/// A tree's row rate: its bytes moved per second, counted where the header's totals are (TransferManager.Core.Moved),
/// on sample times of the test's own.
@Suite struct TreeRateTests {
    /// A tree of small files: each is done between two samples (no file has a rate of its own), and between
    /// them nothing runs at a sample, so the sampler stops and starts again. The totals' rates begin again at
    /// each start (a first sample spanning a quiet stretch said too little); a tree's goes on while it moves, and
    /// says its 100 kB/s. Without that, a tree of small files had no rate and no ETA on its row at all.
    @Test func aTreesRateGoesOnAcrossTheSamplersRestartsWhileItMoves() throws {
        var moved = TransferManager.Core.Moved()
        moved.trees[7] = (0, RateEstimator())
        var time = 100.0
        for step in 0..<20 {
            // 20 kB at each 0.2 s sample: 100 kB/s.
            moved.trees[7]!.bytes += 20_000
            moved.down += 20_000
            moved.sample(at: time)
            time += 0.2
            // Every other sample found nothing running: the sampler stopped, and started with the next file.
            if step % 2 == 1 { moved.restartRates(moving: [7]) }
        }
        let rate = try #require(moved.trees[7]?.rate.bytesPerSecond)
        #expect(abs(rate - 100_000) < 5_000, "\(rate)")
        // The header's total began again at the last start: one sample, no rate yet.
        #expect(moved.downRate.bytesPerSecond == nil)
        // A tree that no longer moves is forgotten at the next start.
        moved.restartRates(moving: [])
        #expect(moved.trees[7] == nil)
    }
}
